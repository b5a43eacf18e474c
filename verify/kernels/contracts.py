"""What each kernel parameter points at: the launch as the proofs see it.

A kernel receives raw pointers and int64 address tables; the spec names
buffers and index tuples. A contract maps each positional (non-constexpr)
parameter to one of the roles below, so a kernel access lands on the spec
buffer and index it designates, per dimension: a block-table column past the
row is a column out of bounds, not the next row's first entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..terms import Sym, Symbolic


@dataclass(frozen=True)
class BufferArg:
    """A pointer to entry 0 of ``buffer``, or to ``start`` with its first
    ``fixed`` components the launch's own (one cache group's rows of a
    per-group tensor: the group fixed, offsets move the rest)."""

    buffer: str
    dtype: str = "i32"
    start: tuple | None = None
    fixed: int = 0


@dataclass(frozen=True)
class StrideArg:
    """A plain integer argument equal to ``value``, the stride of ``buffer``
    along dimension ``dim`` (an offset scaled by it moves that dimension)."""

    buffer: str
    dim: int
    value: Symbolic


@dataclass(frozen=True)
class PointerTable:
    """An int64 table (its own buffer ``name``) whose entry ``e`` holds the
    address of ``buffer`` at ``start(e)``; the first ``fixed`` index components
    are the entry's own, offsets move the others."""

    name: str
    buffer: str
    start: Callable[[Sym], tuple]
    fixed: int
    elem: str = "i32"


@dataclass(frozen=True)
class StrideTable:
    """An int64 table (buffer ``name``) whose entry ``e`` is ``value(e)``, the
    stride of ``buffer`` along dimension ``dim``."""

    name: str
    buffer: str
    dim: int
    value: Callable[[Sym], Symbolic]


@dataclass(frozen=True)
class ScalarArg:
    """A plain integer argument."""

    value: Symbolic
    dtype: str = "i32"


ABSENT = None
"""A parameter the launch passes as ``None`` (an optional table left out)."""

ArgumentRole: TypeAlias = "BufferArg | StrideArg | PointerTable | StrideTable | ScalarArg | int | None"
"""What a kernel parameter is bound to in a launch: a role above, a constant, or :data:`ABSENT`."""


@dataclass(frozen=True)
class LaneSample:
    """Two lanes standing for every lane of a block of ``width``: a
    ``tl.arange(0, width)`` evaluates to the lanes at ``positions`` (terms,
    ``0 <= positions[0] < positions[1] < width`` among the launch's facts), so
    a proof over them is a proof for every pair of lanes of the block.
    The evaluator refuses what two lanes cannot stand for: a scan over the
    block, a sort, a read of a buffer after a store through the block (a
    lane might read what a lane not sampled wrote)."""

    width: int
    positions: tuple


@dataclass
class ProgramLaunch:
    """One program of a launch: arguments by position, constexprs by name,
    program ids."""

    args: list
    constexprs: dict[str, Any]
    program_ids: tuple
    max_trips: int = 8
    """How many iterations a runtime-bounded loop whose iterations depend on
    each other is unrolled to (the memory-safety obligation proves the loop
    runs no longer)."""
    facts: tuple = ()
    """Conditions on the program ids and sizes that every obligation of the
    case assumes (which part of the grid this program is in). A runtime
    ``if`` whose condition they decide runs only the branch they leave
    (sound: each obligation assumes them; the other branch's accesses
    would all be guarded by a condition the assumptions refute)."""
    lanes: LaneSample | None = None
    """Blocks of ``lanes.width`` lanes evaluated at two sampled lanes (None: every lane)."""
