"""Goals every kernel's obligations share, built from recorded accesses.

Each returns named parts (see :class:`verify.obligation.Claim`): memory
safety of every access, int32 range of every intermediate, and race freedom
of two programs of one launch.
"""

from __future__ import annotations

from typing import Any

from replayssm.spec.vocab import INT32_MAX, INT32_MIN, conj, implies, negate

from .memory import SymbolicMemory
from .terms import Sym, lift

TRACKERS = ("ring_start", "num_committed")


_TEXT: dict[int, tuple[Any, str]] = {}
"""Per Z3 term (by id), the term and its text: Z3's printer takes tens of
milliseconds a term, and the cases of one obligation name the same index
and intermediate terms many times over (``postprocess.int32``: 612 parts,
116 distinct terms). The term is held so that its id is not reused."""


def term_text(term: Any) -> str:
    """``str`` of ``term`` lifted to Z3, printed once per term and process."""
    z = lift(term)
    kept = _TEXT.get(z.get_id())
    if kept is None:
        kept = _TEXT[z.get_id()] = (z, str(z))
    return kept[1]


def show_index(index: tuple) -> str:
    return "[" + ", ".join(term_text(i) for i in index) + "]"


def in_bounds(mem: SymbolicMemory) -> list[tuple[Any, Any]]:
    """Every access of ``mem`` lies inside its buffer."""
    return [(lambda a=a: f"{a.kind} {a.buffer}{show_index(a.index)}", mem.in_bounds(a)) for a in mem.accesses]


def within_int32(intermediates: list) -> list[tuple[Any, Any]]:
    """Every recorded integer intermediate fits int32 where it is computed."""
    return [(lambda x=x: f"int32: {term_text(x)}", implies(conj(*where), conj(Sym(x) >= INT32_MIN, Sym(x) <= INT32_MAX)))
            for x, where in intermediates]


def race_free(p: SymbolicMemory, q: SymbolicMemory, read_buffers: tuple[str, ...] = TRACKERS) -> list[tuple[Any, Any]]:
    """Two programs of one launch: stores to one entry carry one value, and
    neither reads an entry of ``read_buffers`` the other stores to."""
    def same_entry(a: Any, b: Any) -> Any:
        return conj(a.guard, b.guard, *[x == y for x, y in zip(a.index, b.index)])

    parts: list[tuple[Any, Any]] = []
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
