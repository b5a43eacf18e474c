"""Which blocks an engine step allocates: a shared live block copied on
write (:func:`shared_block`), a fresh slot for a live column
(:func:`needs_fresh_slot`), the null columns a row covers before its live
one (:func:`covers`) and those that take a fresh block
(:func:`needs_cover_slot`). On ints each is a Python bool, on Z3 terms a
term: the caller assumptions, the allocation phase and the explorer's
pick generators all ask these same questions."""

from __future__ import annotations

from ..geometry import moves_live_column
from ..vocab import Cond, Value, conj, disj
from .picks import StepPicks
from .state import State
from .step_plan import RowPlan


def shared_block(st: State, g: int, slot: Value, sched: Cond) -> Cond:
    """A scheduled row's live block ``slot`` (of group ``g``) is named by
    another table too (``ref > 1``): the step copies it on write."""
    return conj(sched, slot != st.p.geo.pad_slot, st.get("ref", g, slot) > 1)


def needs_fresh_slot(st: State, g: int, slot: Value, sched: Cond, null: Value) -> Cond:
    """A scheduled row takes a fresh slot in group ``g`` for its live column,
    whose slot is ``slot`` now: the column holds the null block and the
    row's ``null`` pick does not keep it null, or the block is shared
    (:func:`shared_block`). On ints a Python bool, on Z3 terms a term."""
    return disj(conj(sched, slot == st.p.geo.pad_slot, null == 0), shared_block(st, g, slot, sched))


def covers(st: State, r: int, sched: Cond, live_col: Value, c: int) -> Cond:
    """Request ``r``'s row (scheduled: ``sched``) ending in ``live_col``
    covers column ``c`` before it: the block holds one of the row's tokens
    (it ends after the request's position) and comes before the live one.
    vLLM allocates every block a row covers (model choice
    ``covered_blocks_allocated``); in mode none the one live column holds
    every token, so nothing is covered."""
    if not moves_live_column(st.p.mode):
        return False
    return conj(sched, (c + 1) * st.p.geo.block_size > st.get("N", r), c < live_col)


def needs_cover_slot(st: State, k: StepPicks, row: RowPlan, c: int) -> Cond:
    """Column ``c`` of ``row``'s request takes a fresh block in every group:
    the row covers it (:func:`covers`), it holds the null block (in group 0;
    the groups agree, ``aux.groups_agree_on_null``) and the pool does not give
    it the null block (``cover_null[c]`` 0)."""
    return conj(covers(st, row.r, row.sched, row.live_col, c), st.get("table", 0, row.r, c) == st.p.geo.pad_slot,
                k.rows[row.r].cover_null[c] == 0)
