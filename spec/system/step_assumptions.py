"""The caller assumptions one engine step relies on, named
(:func:`step_assumptions`; every one is in :data:`SYSTEM_ASSUMPTIONS`)."""

from __future__ import annotations

from ..assumptions import (
    ACCEPTED_WITHIN_ROW,
    DECODE_ROW_FITS,
    DECODE_WITHIN_BLOCK,
    FRESH_DISTINCT_DESTINATIONS,
    FRESH_SLOT_IS_FREE,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    LIVE_COL_IS_LAST_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    ROW_NONEMPTY,
    GhostRow,
)
from ..vocab import Cond, Value, conj, implies, ite
from .action import Named
from .picks import StepPicks
from .state import State
from .step_blocks import needs_cover_slot, needs_fresh_slot
from .step_plan import RowPlan, row_plans


SYSTEM_ASSUMPTIONS = [
    LIVE_COL_IS_LAST_BLOCK,
    DECODE_ROW_FITS,
    ACCEPTED_WITHIN_ROW,
    ROW_NONEMPTY,
    DECODE_WITHIN_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    FRESH_DISTINCT_DESTINATIONS,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    FRESH_SLOT_IS_FREE,
]
"""Every caller assumption the system actions name: the step's (``admit`` and ``free`` name none)."""


def step_assumptions(st: State, k: StepPicks) -> list[Named]:
    """The caller assumptions one engine step relies on, named."""
    p, geo, mode = st.p, st.p.geo, st.p.mode
    out: list[Named] = []
    rows = row_plans(st, k)
    fresh = {(g, row.r): needs_fresh_slot(st, g, st.get("table", g, row.r, row.live_col), row.sched,
                                          k.rows[row.r].null[g])
             for row in rows for g in range(p.groups)}
    covered = {(row.r, c): needs_cover_slot(st, k, row, c) for row in rows for c in range(p.num_cols - 1)}
    for row in rows:
        r, gh = row.r, row.ghost
        fwd = GhostRow(gh.computed_before, gh.query_len, gh.accepted, row.prefill, gh.live_col, r)
        s = row.sched
        out += [
            (LIVE_COL_IS_LAST_BLOCK.name, implies(s, LIVE_COL_IS_LAST_BLOCK(geo, mode, fwd))),
            (DECODE_ROW_FITS.name, implies(s, DECODE_ROW_FITS(geo, fwd))),
            (ACCEPTED_WITHIN_ROW.name, implies(s, ACCEPTED_WITHIN_ROW(geo, fwd))),
            (ROW_NONEMPTY.name, implies(s, ROW_NONEMPTY(geo, fwd))),
            (DECODE_WITHIN_BLOCK.name, implies(s, DECODE_WITHIN_BLOCK(geo, fwd))),
            (PREFILL_CHUNK_ON_BOUNDARY.name, implies(s, PREFILL_CHUNK_ON_BOUNDARY(geo, mode, fwd, row.final_chunk))),
            (IS_PREFILLING_AGREES.name, implies(s, IS_PREFILLING_AGREES(row.flag, row.prefill))),
            (GROUPS_AGREE_ON_NULL.name, implies(s, GROUPS_AGREE_ON_NULL([k.rows[r].null[g] for g in range(p.groups)]))),
        ]
        for g in range(p.groups):
            needs = fresh[g, r]
            slot = k.rows[r].slot[g]
            out.append((FRESH_SLOT_IS_FREE.name, implies(needs, FRESH_SLOT_IS_FREE(st.get("ref", g, slot)))))
            for other in rows:
                if other.r > r:
                    out.append((FRESH_DISTINCT_DESTINATIONS.name, implies(conj(needs, fresh[g, other.r]), FRESH_DISTINCT_DESTINATIONS(
                        slot, k.rows[other.r].slot[g], geo.pad_slot))))
    out += covered_blocks_free(st, k, rows, fresh, covered)
    return out


def covered_blocks_free(st: State, k: StepPicks, rows: list[RowPlan], fresh: dict[tuple[int, int], Cond],
                        covered: dict[tuple[int, int], Cond]) -> list[Named]:
    """``fresh_slot_is_free`` of each block a covered column takes: no table
    names it, nor did the step hand it out before (to a live column, or to an
    earlier covered one)."""
    p = st.p
    out: list[Named] = []
    for g in range(p.groups):
        earlier: list[tuple[Cond, Value]] = [(fresh[g, row.r], k.rows[row.r].slot[g]) for row in rows]
        for row in rows:
            for c in range(p.num_cols - 1):
                if covered[row.r, c] is False:  # on ints: the column takes no block
                    continue
                slot = k.rows[row.r].cover_slot[c][g]
                taken: Value = st.get("ref", g, slot)
                for needs, other in earlier:
                    taken = taken + ite(conj(needs, other == slot), 1, 0)
                out.append((FRESH_SLOT_IS_FREE.name, implies(covered[row.r, c], FRESH_SLOT_IS_FREE(taken))))
                earlier.append((covered[row.r, c], slot))
    return out
