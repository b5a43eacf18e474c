"""Goals every kernel's obligations share, built from recorded accesses.

Each returns named parts (see :class:`verify.obligation.Claim`): memory
safety of every access, int32 range of every intermediate, and race freedom
of two programs of one launch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import z3

from replayssm.spec.vocab import INT32_MAX, INT32_MIN, Cond, conj, implies, negate

from .memory import Access, SymbolicMemory
from .terms import Sym, Symbolic, lift

if TYPE_CHECKING:
    from .obligation import PartName

TRACKERS = ("ring_start", "num_committed")


_TEXT: dict[int, tuple[z3.ExprRef, str]] = {}
"""Per Z3 term (by id), the term and its text: Z3's printer takes tens of
milliseconds a term, and the cases of one obligation name the same index
and intermediate terms many times over (``postprocess.int32``: 612 parts,
116 distinct terms). The term is held so that its id is not reused."""


def term_text(term: Symbolic) -> str:
    """``str`` of ``term`` lifted to Z3, printed once per term and process."""
    z = lift(term)
    kept = _TEXT.get(z.get_id())
    if kept is None:
        kept = _TEXT[z.get_id()] = (z, str(z))
    return kept[1]


def show_index(index: tuple) -> str:
    return "[" + ", ".join(term_text(i) for i in index) + "]"


GoalPart: TypeAlias = "tuple[PartName, Symbolic]"
"""One part of a proof goal (``obligation.Claim.goal``): its name, or a function that prints it when a report
needs it, and its condition."""


def in_bounds(mem: SymbolicMemory) -> list[GoalPart]:
    """Every access of ``mem`` lies inside its buffer."""
    return [(_access_name(a), mem.in_bounds(a)) for a in mem.accesses]


def _access_name(access: Access) -> Callable[[], str]:
    """The part's name, printed when a report needs it (the access is the default of its one parameter)."""
    def name(a: Access = access) -> str:
        return f"{a.kind} {a.buffer}{show_index(a.index)}"

    return name


def _int32_name(term: z3.ArithRef) -> Callable[[], str]:
    """The part's name, printed when a report needs it (the term is the default of its one parameter)."""
    def name(x: z3.ArithRef = term) -> str:
        return f"int32: {term_text(x)}"

    return name


def within_int32(intermediates: list) -> list[GoalPart]:
    """Every recorded integer intermediate fits int32 where it is computed."""
    return [(_int32_name(x), implies(conj(*where), conj(Sym(x) >= INT32_MIN, Sym(x) <= INT32_MAX)))
            for x, where in intermediates]


def race_free(p: SymbolicMemory, q: SymbolicMemory, read_buffers: tuple[str, ...] = TRACKERS) -> list[GoalPart]:
    """Two programs of one launch: stores to one entry carry one value, and
    neither reads an entry of ``read_buffers`` the other stores to."""
    def same_entry(a: Access, b: Access) -> Cond:
        return conj(a.guard, b.guard, *[x == y for x, y in zip(a.index, b.index)])

    parts: list[GoalPart] = []
    for wp in p.writes:
        for wq in q.writes:
            if wp.buffer == wq.buffer:
                parts.append((f"{wp.buffer} write-write", implies(same_entry(wp, wq), wp.value == wq.value)))
    for me, other in ((p, q), (q, p)):
        for r in me.reads:
            if r.buffer in read_buffers:
                for w in other.writes:
                    if w.buffer == r.buffer:
                        parts.append((f"{r.buffer} read-write", negate(same_entry(r, w))))
    return parts
