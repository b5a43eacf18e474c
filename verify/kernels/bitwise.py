"""Triton's integer bitwise operators on kernel values, as exact integer terms.

``&``, ``|``, ``^``, ``~``, ``<<`` and ``>>`` on ``i32``/``i64`` scalars
(and, lane by lane, blocks; ``arith.binary`` routes them here). Triton
promotes both operands to one integer type (``semantic.bitwise_op_type_
checking_impl``) and computes on its two's complement bits; ``>>`` of a
signed type is arithmetic (``core.tensor.__rshift__``: ``ashr``).

The memory model's integers are unbounded Z3 Ints whose values the ``int32``
obligation keeps inside their types, so every operand here is a value of its
type and the result is the exact one:

* ``~x`` is ``-x - 1``; ``x & (2**k - 1)`` (a constant mask, the ring wrap
  of a power-of-two length) is ``x mod 2**k``; ``x >> k`` for a constant
  ``k`` is ``floor(x / 2**k)``; ``x << k`` is ``x * 2**k`` (noted: a shift
  that carries bits out of the type is an overflow, as ``+`` is): these stay
  in linear integer arithmetic;
* any other ``&``, ``|``, ``^`` and a ``>>`` by a runtime amount go through
  Z3 bit-vectors of the type's width (``Int2BV``, the operator,
  signed ``BV2Int``), exact for operands of their type.

A shift amount outside ``0 .. bits - 1`` is undefined in Triton (LLVM's
``shl``/``ashr`` give poison; ``core.check_bit_width`` only warns for a
constexpr), so each shift notes its amount with the bounds it must keep: the
``int32`` obligation fails on an amount that can leave them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import z3

from ..terms import lift, mk_and, mk_mul, mk_not, mk_or
from .values import Scalar, as_int_term, promote

BITS = {"i32": 32, "i64": 64}
"""The width of each integer element type."""

BITWISE = ("&", "|", "^", "<<", ">>")
"""The binary operators this module computes on integer (non-mask) operands."""

SHIFT = "shift amount"
"""The ``what`` of a noted shift amount (``evaluator.Intermediate``): it must
lie in ``0 .. bits - 1`` of the shifted type, not in the type's range."""

PY_BITWISE = {"&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
              ">>": operator.rshift}
"""The operators on constexprs (Python's, as Triton folds them at compile time)."""


def _const(z: z3.ExprRef) -> int | None:
    return z.as_long() if z3.is_int_value(z) else None


def _low_mask(c: int | None) -> int | None:
    """``k`` when ``c == 2**k - 1`` (``k >= 0``), else None."""
    if c is None or c < 0 or (c + 1) & c:
        return None
    return (c + 1).bit_length() - 1


def _signed(bv: z3.BitVecRef) -> z3.ArithRef:
    return z3.BV2Int(bv, is_signed=True)


def _through_bits(op: str, x: z3.ArithRef, y: z3.ArithRef, n: int) -> z3.ArithRef:
    bx, by = z3.Int2BV(x, n), z3.Int2BV(y, n)
    out = {"&": operator.and_, "|": operator.or_, "^": operator.xor, ">>": operator.rshift}[op](bx, by)
    return _signed(out)


def _pow2(k: z3.ArithRef, n: int) -> z3.ArithRef:
    """``2**k`` for a runtime ``k`` in ``0 .. n - 1`` (0 outside: the noted amount fails there)."""
    out: z3.ArithRef = lift(0)
    for i in reversed(range(n)):
        out = z3.If(k == i, lift(2**i), out)
    return out


def mask_binary(op: str, a: Scalar, b: Scalar) -> Scalar:
    """``&``, ``|``, ``^`` of two masks (``i1``)."""
    if op == "^":
        return Scalar(z3.Xor(a.z, b.z), "i1")
    return Scalar((mk_and if op == "&" else mk_or)([a.z, b.z]), "i1")


def integer_binary(op: str, a: Scalar, b: Scalar, note: Callable[..., None]) -> Scalar:
    """``a op b`` for ``op`` in :data:`BITWISE` on integer scalars, typed as Triton types it."""
    dtype = promote(a.dtype, b.dtype)
    n = BITS[dtype]
    x, y = as_int_term(a), as_int_term(b)
    cx, cy = _const(x), _const(y)
    if cx is not None and cy is not None and op in "&|^":
        return Scalar(lift(PY_BITWISE[op](cx, cy)), dtype)
    if op in ("<<", ">>"):
        note(y, dtype, SHIFT)
        if op == "<<":
            z = mk_mul(x, lift(2**cy)) if cy is not None and 0 <= cy < n else mk_mul(x, _pow2(y, n))
            note(z, dtype)
            return Scalar(z, dtype)
        if cy is not None and 0 <= cy < n:
            return Scalar(x / lift(2**cy) if cy else x, dtype)  # Z3's Int division is floor for a positive divisor
        return Scalar(_through_bits(">>", x, y, n), dtype)
    for value, c in ((x, cy), (y, cx)):
        if c is None:
            continue
        if op == "&" and c == -1 or op in "|^" and c == 0:
            return Scalar(value, dtype)
        if op == "&" and c == 0:
            return Scalar(lift(0), dtype)
        k = _low_mask(c)
        if op == "&" and k is not None:
            return Scalar(value % lift(2**k), dtype)  # Euclidean: the low k bits of the two's complement
    return Scalar(_through_bits(op, x, y, n), dtype)


def invert(a: Scalar) -> Scalar:
    """``~a``: logical not of a mask; ``-a - 1`` of an integer (always of its type)."""
    if a.dtype == "i1":
        return Scalar(mk_not(a.z), "i1")
    return Scalar(-a.z - 1, a.dtype)
