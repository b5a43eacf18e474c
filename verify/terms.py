"""The Z3 interpreter of the spec vocabulary.

:class:`Sym` wraps a Z3 integer or boolean term and overloads Python's
arithmetic and comparisons, so a spec transition runs on it unchanged. Every
integer result of ``+ - *``, ``cdiv`` and ``cmod`` is recorded while a
:func:`recording` block is open: the int32 obligations check each of them.
Using a symbolic value in a Python ``if`` raises, since the spec must branch
with ``ite``.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeAlias

import z3
from z3 import z3core

Symbolic: TypeAlias = "Sym | z3.ExprRef | int"
"""A value the Z3 interpreter takes (:func:`lift`): a :class:`Sym`, a raw Z3
term, or a Python int or bool (``bool`` is an ``int``), which becomes a numeral."""

Fact: TypeAlias = "tuple[str, Symbolic]"
"""A named hypothesis of a proof: the caller assumption's (or the proof's own) name and its condition."""

_recorders: list[list[tuple[z3.ArithRef, list]]] = []
_context: list[Symbolic] = []
_fresh = itertools.count()


@contextmanager
def recording() -> Iterator[list[tuple[z3.ArithRef, list]]]:
    """Collect every integer intermediate computed inside the block, with the
    loop-range guards in force where it was computed."""
    terms: list[tuple[z3.ArithRef, list]] = []
    _recorders.append(terms)
    try:
        yield terms
    finally:
        _recorders.pop()


@contextmanager
def within(guard: Symbolic) -> Iterator[None]:
    """Intermediates computed inside the block only matter where ``guard`` holds."""
    _context.append(guard)
    try:
        yield
    finally:
        _context.pop()


def _note(term: z3.ExprRef) -> z3.ExprRef:
    if _recorders and z3.is_int(term):
        _recorders[-1].append((term, list(_context)))
    return term


_NUMERALS: dict[tuple[bool, int], z3.ExprRef] = {}


def lift(x: Symbolic) -> z3.ExprRef:
    """A Z3 term for a Sym, a Python bool or a Python int."""
    if isinstance(x, Sym):
        return x.z
    if isinstance(x, z3.ExprRef):
        return x
    if isinstance(x, int):  # bools included
        key = (type(x) is bool, x)
        if key not in _NUMERALS:
            _NUMERALS[key] = z3.BoolVal(x) if type(x) is bool else z3.IntVal(x)
        return _NUMERALS[key]
    raise TypeError(f"cannot interpret {type(x).__name__} {x!r} symbolically")


# Term constructors straight on Z3's C API: the spec builds tens of thousands
# of terms per step, and z3.py's If/And/== coerce and check each argument in
# Python. Z3 treats mixed sorts as z3.py does: a boolean branch or operand of
# an integer term becomes 0/1, an integer where a boolean must be raises a
# Z3Exception ("Sort mismatch").

def _args(zs: list[z3.ExprRef]) -> "ctypes.Array[z3.Ast]":
    arr = (z3.Ast * len(zs))()
    for i, z in enumerate(zs):
        arr[i] = z.as_ast()
    return arr


def mk_ite(c: z3.ExprRef, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    """``If(c, a, b)``: boolean when both branches are (Z3 makes a boolean
    branch beside an integer one 0/1)."""
    ast = z3core.Z3_mk_ite(c.ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast())
    both_bool = isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef)
    return z3.BoolRef(ast, c.ctx) if both_bool else z3.ArithRef(ast, c.ctx)


def mk_and(zs: list[z3.ExprRef]) -> z3.BoolRef:
    """``And(*zs)`` (True when empty)."""
    if not zs:
        return lift(True)
    return z3.BoolRef(z3core.Z3_mk_and(zs[0].ctx.ref(), len(zs), _args(zs)), zs[0].ctx)


def mk_or(zs: list[z3.ExprRef]) -> z3.BoolRef:
    """``Or(*zs)`` (False when empty)."""
    if not zs:
        return lift(False)
    return z3.BoolRef(z3core.Z3_mk_or(zs[0].ctx.ref(), len(zs), _args(zs)), zs[0].ctx)


def mk_not(z: z3.ExprRef) -> z3.BoolRef:
    return z3.BoolRef(z3core.Z3_mk_not(z.ctx.ref(), z.as_ast()), z.ctx)


Binary: TypeAlias = Callable[[z3.ExprRef, z3.ExprRef], z3.ExprRef]
"""A term constructor of two operands (``mk_add``, ``mk_lt``, ...)."""


def _relation(mk: Callable[..., z3.Ast]) -> Binary:
    return lambda a, b: z3.BoolRef(mk(a.ctx.ref(), a.as_ast(), b.as_ast()), a.ctx)


def _sum(mk: Callable[..., z3.Ast]) -> Binary:
    return lambda a, b: z3.ArithRef(mk(a.ctx.ref(), 2, _args([a, b])), a.ctx)


mk_eq = _relation(z3core.Z3_mk_eq)
mk_lt, mk_le = _relation(z3core.Z3_mk_lt), _relation(z3core.Z3_mk_le)
mk_gt, mk_ge = _relation(z3core.Z3_mk_gt), _relation(z3core.Z3_mk_ge)
mk_add, mk_sub, mk_mul = _sum(z3core.Z3_mk_add), _sum(z3core.Z3_mk_sub), _sum(z3core.Z3_mk_mul)


def mk_ne(a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    return z3.BoolRef(z3core.Z3_mk_distinct(a.ctx.ref(), 2, _args([a, b])), a.ctx)


def variables(x: Symbolic) -> set[str]:
    """The names of the uninterpreted constants (inputs) a term reads, each
    shared subterm visited once (on raw C-API handles: no z3.py object per
    node, about 5x faster on an invariant)."""
    term = lift(x)
    ctx = term.ctx.ref()
    seen: set[int] = set()
    names: set[str] = set()
    todo = [term.as_ast()]
    while todo:
        a = todo.pop()
        i = z3core.Z3_get_ast_id(ctx, a)
        if i in seen or z3core.Z3_get_ast_kind(ctx, a) != z3.Z3_APP_AST:
            continue
        seen.add(i)
        n = z3core.Z3_get_app_num_args(ctx, a)
        if n:
            todo.extend(z3core.Z3_get_app_arg(ctx, a, k) for k in range(n))
            continue
        decl = z3core.Z3_get_app_decl(ctx, a)
        if z3core.Z3_get_decl_kind(ctx, decl) == z3.Z3_OP_UNINTERPRETED:
            names.add(z3core.Z3_get_symbol_string(ctx, z3core.Z3_get_decl_name(ctx, decl)))
    return names


def _z3_cdiv(a: z3.ArithRef, b: Symbolic) -> z3.ArithRef:
    if isinstance(b, int) and b > 0:
        return z3.If(a >= 0, a / b, -((-a) / b))
    bz = lift(b)
    # Z3's integer division is Euclidean; C truncates toward zero.
    return z3.If(
        a >= 0,
        z3.If(bz > 0, a / bz, -(a / -bz)),
        z3.If(bz > 0, -((-a) / bz), (-a) / (-bz)),
    )


SMALL_RANGE = 8
"""A range of at most this many values is stated as the disjunction of its
values (``within``): Z3 then splits on the values instead of bounding and
branching (about 5% less solving on the system step shapes, in
interleaved runs; docs/system.md)."""


class _Z3Vocab:
    @staticmethod
    def ite(c: Symbolic, a: Symbolic, b: Symbolic) -> "Sym":
        return Sym(mk_ite(lift(c), lift(a), lift(b)))

    @staticmethod
    def cdiv(a: Symbolic, b: Symbolic) -> "Sym":
        raw_b = b.z if isinstance(b, Sym) and z3.is_int_value(b.z) else b
        if isinstance(raw_b, z3.IntNumRef):
            raw_b = raw_b.as_long()
        return Sym(_note(_z3_cdiv(lift(a), raw_b)))

    @staticmethod
    def pointer_add(base: Symbolic, offset: Symbolic) -> "Sym":
        return Sym(lift(base) + lift(offset))

    @staticmethod
    def within(x: Symbolic, lo: int, hi: int) -> "Sym":
        if 0 <= hi - lo < SMALL_RANGE:
            return Sym(mk_or([mk_eq(lift(x), lift(v)) for v in range(lo, hi + 1)]))
        return Sym(mk_and([mk_ge(lift(x), lift(lo)), mk_le(lift(x), lift(hi))]))

    @staticmethod
    def conj(*xs: Symbolic) -> "Sym":
        return Sym(mk_and([lift(x) for x in xs]))

    @staticmethod
    def disj(*xs: Symbolic) -> "Sym":
        return Sym(mk_or([lift(x) for x in xs]))

    @staticmethod
    def negate(x: Symbolic) -> "Sym":
        return Sym(mk_not(lift(x)))


class Sym:
    """A Z3 term that behaves like a kernel integer or boolean."""

    __slots__ = ("z",)
    __vocab__ = _Z3Vocab

    def __init__(self, z: z3.ExprRef) -> None:
        self.z = z

    def __repr__(self) -> str:
        return f"Sym({self.z})"

    def __bool__(self) -> bool:
        raise TypeError(f"symbolic value {self.z} used as a Python bool: the spec must branch with ite()")

    __hash__ = None  # type: ignore[assignment]

    def _arith(self, other: Symbolic, op: Binary) -> "Sym":
        return Sym(_note(op(self.z, lift(other))))

    def __add__(self, o: Symbolic) -> "Sym":
        return self._arith(o, mk_add)

    def __radd__(self, o: Symbolic) -> "Sym":
        return Sym(_note(mk_add(lift(o), self.z)))

    def __sub__(self, o: Symbolic) -> "Sym":
        return self._arith(o, mk_sub)

    def __rsub__(self, o: Symbolic) -> "Sym":
        return Sym(_note(mk_sub(lift(o), self.z)))

    def __mul__(self, o: Symbolic) -> "Sym":
        return self._arith(o, mk_mul)

    def __rmul__(self, o: Symbolic) -> "Sym":
        return Sym(_note(mk_mul(lift(o), self.z)))

    def __neg__(self) -> "Sym":
        return Sym(_note(-self.z))

    def __lt__(self, o: Symbolic) -> "Sym":
        return Sym(mk_lt(self.z, lift(o)))

    def __le__(self, o: Symbolic) -> "Sym":
        return Sym(mk_le(self.z, lift(o)))

    def __gt__(self, o: Symbolic) -> "Sym":
        return Sym(mk_gt(self.z, lift(o)))

    def __ge__(self, o: Symbolic) -> "Sym":
        return Sym(mk_ge(self.z, lift(o)))

    def __eq__(self, o: Symbolic) -> "Sym":  # type: ignore[override]
        return Sym(mk_eq(self.z, lift(o)))

    def __ne__(self, o: Symbolic) -> "Sym":  # type: ignore[override]
        return Sym(mk_ne(self.z, lift(o)))

    def __and__(self, o: Symbolic) -> "Sym":
        return Sym(mk_and([self.z, lift(o)]))

    __rand__ = __and__

    def __or__(self, o: Symbolic) -> "Sym":
        return Sym(mk_or([self.z, lift(o)]))

    __ror__ = __or__

    def __invert__(self) -> "Sym":
        return Sym(mk_not(self.z))


def fresh_int(name: str) -> Sym:
    """A new unconstrained integer."""
    return Sym(z3.Int(f"{name}!{next(_fresh)}"))


def named_int(name: str) -> Sym:
    """The integer input called ``name`` (same name, same variable)."""
    return Sym(z3.Int(name))


def named_bool(name: str) -> Sym:
    """The boolean input called ``name``."""
    return Sym(z3.Bool(name))
