"""Triton's arithmetic on kernel values, as Z3 terms.

Every operation takes Python constants (constexprs: Python semantics, as
Triton folds them at compile time), :class:`Scalar` values and
:class:`Block` lanes (element-wise, scalars broadcast). Signed ``//`` and
``%`` truncate toward zero (C), unlike Python's floor. Integer results are
exact terms; ``note`` receives each one with its element type, for the
overflow obligation (a result that fits its type is exactly what the machine
computes).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TypeVar

import z3

from ..terms import _z3_cdiv, lift, mk_add, mk_eq, mk_ge, mk_gt, mk_ite, mk_le, mk_lt, mk_mul, mk_ne, mk_not, mk_sub
from .bitwise import BITWISE, PY_BITWISE, integer_binary, invert, mask_binary
from .values import (Block, KernelValue, Lane, Operand, Pointer, Scalar, as_bool_term, as_int_term, as_scalar,
                     offset_parts, promote)

Note = Callable[..., None]
"""Receives an integer result and its element type (``evaluator.KernelRun.note``),
or a shift amount with ``bitwise.SHIFT``."""


class KernelTypeError(TypeError):
    """An operation the kernel applies to values it does not accept."""


def _c_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return _z3_cdiv(a, b.as_long() if z3.is_int_value(b) else b)


def _c_mod(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return mk_sub(a, mk_mul(b, _c_div(a, b)))


INT_OPS = {"+": mk_add, "-": mk_sub, "*": mk_mul, "//": _c_div, "%": _c_mod}
CMP_OPS = {"<": mk_lt, "<=": mk_le, ">": mk_gt, ">=": mk_ge, "==": mk_eq, "!=": mk_ne}
PY_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod,
          "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
          "!=": operator.ne, **PY_BITWISE}


R = TypeVar("R")


def lanewise(fn: Callable[..., R], *xs: KernelValue) -> R | Block:
    """Apply ``fn`` to scalars, or lane by lane when any argument is a block."""
    widths = {(len(x.lanes), x.width) for x in xs if isinstance(x, Block)}
    if not widths:
        return fn(*xs)
    if len(widths) > 1:
        raise KernelTypeError(f"blocks of different widths {sorted(w if s is None else s for w, s in widths)}"
                              if len({s for _, s in widths}) == 1 else "a block of sampled lanes beside another block")
    n, sampled = widths.pop()
    out = []
    for i in range(n):
        LANE.append(i)
        try:
            out.append(fn(*[x.lanes[i] if isinstance(x, Block) else x for x in xs]))
        finally:
            LANE.pop()
    return Block(tuple(out), sampled)


LANE: list[int] = []
"""The lane :func:`lanewise` is computing (innermost last): what an
intermediate noted meanwhile belongs to (``evaluator.Intermediate.lane``)."""


def times(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """``a * b`` without multiplying by a literal 0 or 1."""
    for x, y in ((a, b), (b, a)):
        if z3.is_int_value(x) and x.as_long() in (0, 1):
            return y if x.as_long() == 1 else x
    return mk_mul(a, b)


def _linear(op: str, a: Scalar, b: Scalar) -> tuple[tuple, z3.ArithRef | None]:
    """The stride parts of ``a op b`` (for pointer offsets), when linear."""
    if not (a.lin or b.lin):
        return (), None
    la, ua = offset_parts(a)
    lb, ub = offset_parts(b)
    if op in "+-":
        sign = mk_add if op == "+" else mk_sub
        keys = list(dict.fromkeys([*la, *lb]))
        lin = tuple((k, sign(la.get(k, lift(0)), lb.get(k, lift(0)))) for k in keys)
        return lin, sign(ua, ub)
    if op == "*" and (not a.lin or not b.lin):
        scaled, plain, unit = (la, as_int_term(b), ua) if a.lin else (lb, as_int_term(a), ub)
        return tuple((k, times(c, plain)) for k, c in scaled.items()), times(unit, plain)
    return (), None


def binary(op: str, a: Operand, b: Operand, note: Note) -> Operand:
    """``a op b`` for an arithmetic, comparison or logical operator."""
    if isinstance(a, (bool, int)) and isinstance(b, (bool, int)):
        return PY_OPS[op](a, b)
    return lanewise(lambda x, y: _scalar_binary(op, x, y, note), a, b)


def _scalar_binary(op: str, a: Lane | int, b: Lane | int, note: Note) -> Scalar:
    if isinstance(a, Pointer) or isinstance(b, Pointer):
        raise KernelTypeError(f"operator {op} on a pointer outside pointer + offset")
    a, b = as_scalar(a), as_scalar(b)
    if op in BITWISE:
        if a.dtype == b.dtype == "i1" and op in "&|^":
            return mask_binary(op, a, b)
        return integer_binary(op, a, b, note)
    if op in CMP_OPS:
        if a.dtype == b.dtype == "i1" and op in ("==", "!="):
            return Scalar(CMP_OPS[op](a.z, b.z), "i1")
        return Scalar(CMP_OPS[op](as_int_term(a), as_int_term(b)), "i1")
    dtype = promote(a.dtype, b.dtype)
    z = INT_OPS[op](as_int_term(a), as_int_term(b))
    note(z, dtype)
    lin, unit = _linear(op, a, b)
    return Scalar(z, dtype, lin, unit)


def unary(op: str, a: Operand, note: Note) -> Operand:
    """``-a``, ``~a`` or ``not a``."""
    if isinstance(a, (bool, int)):
        return {"-": operator.neg, "~": operator.invert, "not": operator.not_}[op](a)

    def one(lane: Lane | int) -> Scalar:
        x = as_scalar(lane)
        if op == "-":
            z = -as_int_term(x)
            dtype = promote(x.dtype, x.dtype)
            note(z, dtype)
            return Scalar(z, dtype)
        if op == "~":
            return invert(x)
        if x.dtype != "i1":
            raise KernelTypeError(f"not on {x.dtype} (only masks, i1, are supported)")
        return Scalar(mk_not(x.z), "i1")

    return lanewise(one, a)


def where(c: Operand, a: Operand, b: Operand) -> Operand:
    """``tl.where``: Triton types the result by promoting both branches."""
    def one(cc: Lane | int, a: Lane | int, b: Lane | int) -> Lane:
        cond = as_bool_term(as_scalar(cc))
        if isinstance(a, Pointer) and isinstance(b, Pointer):
            return merge_pointers(cond, a, b)
        x, y = as_scalar(a), as_scalar(b)
        if x.dtype == y.dtype == "i1":
            return Scalar(mk_ite(cond, x.z, y.z), "i1")
        return Scalar(mk_ite(cond, as_int_term(x), as_int_term(y)), promote(x.dtype, y.dtype))

    return lanewise(one, c, a, b)


def merge_pointers(cond: z3.BoolRef, x: Pointer, y: Pointer) -> Pointer:
    if x.buffer != y.buffer or x.fixed != y.fixed:
        raise KernelTypeError(f"pointers into {x.buffer} and {y.buffer} merged by a branch")
    index = tuple(mk_ite(cond, lift(i), lift(j)) for i, j in zip(x.index, y.index))
    return Pointer(x.buffer, index, x.fixed, x.elem)


def scalar_extremum(kind: str, x: Scalar, y: Scalar) -> Scalar:
    """The larger (``max``) or smaller (``min``) of two scalars, of their promoted type."""
    xi, yi = as_int_term(x), as_int_term(y)
    pick = mk_ge(xi, yi) if kind == "max" else mk_le(xi, yi)
    return Scalar(mk_ite(pick, xi, yi), promote(x.dtype, y.dtype))


def extremum(kind: str, a: Operand, b: Operand) -> Scalar | Block:
    """``tl.maximum`` / ``tl.minimum``."""
    return lanewise(lambda x, y: scalar_extremum(kind, as_scalar(x), as_scalar(y)), a, b)


def cast(x: Operand, dtype: str, note: Note) -> Scalar | Block:
    """``x.to(dtype)`` between integer types: a narrowing cast must fit (noted)."""
    def one(lane: Lane | int) -> Scalar:
        v = as_scalar(lane)
        if dtype == "i1":
            return Scalar(as_bool_term(v), "i1")
        z = as_int_term(v)
        if v.dtype == "i64" and dtype == "i32":
            note(z, "i32")
        return Scalar(z, dtype)

    return lanewise(one, x)
