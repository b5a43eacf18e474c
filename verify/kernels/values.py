"""Values of a kernel under symbolic execution.

* :class:`Scalar`: a Z3 term with Triton's element type (``i1``, ``i32``,
  ``i64``). An offset scaled by a buffer's stride remembers the scaled part
  (``lin``), so adding it to a pointer moves that dimension of the buffer's
  index, and an entry of a pointer table remembers the buffer it addresses.
* :class:`Pointer`: a buffer of the memory and an index tuple over its
  dimensions; the unscaled part of an offset moves the innermost dimension.
* :class:`Block`: the lanes of a ``tl.arange`` block, one value each.

Python ints and bools stand for constexprs and literals until they meet a
tensor, where Triton types them: a bool is ``i1``, an int is ``i32`` when it
fits, else ``i64``.

The aliases below name what an operation takes: a :data:`Lane` (one lane's
value), an :data:`Operand` (a lane, a block or a constant) and a
:data:`KernelValue` (an operand, or ``None`` for an absent argument).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

import z3

from ..terms import lift, mk_ite, mk_ne

RANGES = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1)}
"""The value range of each integer element type."""

RANK = {"i1": 0, "i32": 1, "i64": 2}


@dataclass(frozen=True)
class Address:
    """Where a pointer-table entry points: ``buffer`` at ``index`` (its
    leading components fixed, the rest moved by offsets)."""

    buffer: str
    index: tuple
    fixed: int


@dataclass(frozen=True)
class Scalar:
    """One typed value: ``z`` is a Z3 Bool for ``i1``, an Int otherwise."""

    z: z3.ExprRef
    dtype: str
    lin: tuple = ()
    """``((buffer, dim), count)`` pairs: this value holds ``count`` times
    ``buffer``'s stride along ``dim``, plus ``unit``."""
    unit: z3.ArithRef | None = None
    address: Address | None = None


@dataclass(frozen=True)
class Pointer:
    """An address inside ``buffer``: the index tuple it designates."""

    buffer: str
    index: tuple
    fixed: int
    elem: str


@dataclass(frozen=True)
class Block:
    """A block of lanes (``tl.arange``), each a Scalar or Pointer."""

    lanes: tuple = field(default_factory=tuple)
    width: int | None = None
    """None: ``lanes`` are every lane of the block; else the block has
    ``width`` lanes and ``lanes`` are the sampled ones (``contracts.LaneSample``)."""


Lane: TypeAlias = "Scalar | Pointer"
"""One lane's value: what a block holds in each lane, and a scalar tensor."""

Constant: TypeAlias = int
"""A constexpr or literal: a Python int or bool (``bool`` is an ``int``)."""

Operand: TypeAlias = "Lane | Block | Constant"
"""What an operator or builtin takes: a lane's value, a block of lanes, or a constant."""

KernelValue: TypeAlias = "Operand | None"
"""A parameter's value in a launch: an operand, or None for an argument the launch leaves out."""


def literal_dtype(x: Constant) -> str:
    if isinstance(x, bool):
        return "i1"
    lo, hi = RANGES["i32"]
    return "i32" if lo <= x <= hi else "i64"


def as_scalar(x: KernelValue) -> Scalar:
    """A Python constant typed as Triton types a literal; Scalars pass through."""
    if isinstance(x, Scalar):
        return x
    if isinstance(x, (bool, int)):
        return Scalar(lift(x), literal_dtype(x))
    raise TypeError(f"{type(x).__name__} is not a kernel scalar")


def as_int_term(s: Scalar) -> z3.ArithRef:
    """The value as an integer term (a boolean is 0 or 1)."""
    if s.dtype == "i1":
        return mk_ite(s.z, lift(1), lift(0))
    return s.z


def as_bool_term(s: Scalar) -> z3.BoolRef:
    """The value as a condition (an integer is true when non-zero)."""
    if s.dtype == "i1":
        return s.z
    return mk_ne(s.z, lift(0))


def promote(a: str, b: str) -> str:
    """Triton's integer promotion of two operand types (``i1`` becomes ``i32``)."""
    out = a if RANK[a] >= RANK[b] else b
    return "i32" if out == "i1" else out


def offset_parts(s: Scalar) -> tuple[dict[tuple[str, int], z3.ArithRef], z3.ArithRef]:
    """``(scaled, unit)``: the stride counts of ``s`` by (buffer, dim), and the rest."""
    return dict(s.lin), (s.unit if s.lin else as_int_term(s))


def concrete(x: KernelValue) -> int | bool | None:
    """The Python value of a constant, or None when it is symbolic."""
    if isinstance(x, (bool, int)):
        return x
    if isinstance(x, Scalar):
        z = z3.simplify(x.z) if not (z3.is_int_value(x.z) or z3.is_true(x.z) or z3.is_false(x.z)) else x.z
        if z3.is_int_value(z):
            return z.as_long()
        if z3.is_true(z) or z3.is_false(z):
            return z3.is_true(z)
    return None
