"""The engine step's guard and caller assumptions (its effect: ``spec.system.phases``).

One step schedules a row for some running requests. Per request it picks
whether it runs, its query length, accepted count, live column and
``is_prefilling`` flag, and per cache group the fresh slot the pool hands out
and whether the scheduler keeps a column null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from ..vocab import conj, disj, implies, ite, within
from .action import int_flag
from .picks import StepPicks
from .state import State

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
"""Every caller assumption the system actions name."""


def check_dropped(dropped: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the entries of ``dropped`` that name no system
    assumption (a misspelt name would otherwise drop nothing, silently)."""
    known = {x.name for x in SYSTEM_ASSUMPTIONS}
    unknown = sorted(set(dropped) - known)
    if unknown:
        raise ValueError(f"dropped names no system assumption: {unknown}; the assumptions are "
                         f"{', '.join(sorted(known))}")


@dataclass
class RowPlan:
    """The scheduler's decision for one request in one step."""

    r: int
    sched: Any
    prefill: Any
    q: Any
    acc: Any
    live_col: Any
    flag: Any
    final_chunk: Any
    ghost: GhostRow


def in_prefill(st: State, r: int) -> Any:
    """Request ``r`` has not computed its whole prompt: its next row is a prefill chunk."""
    return st.get("N", r) < st.get("prompt", r)


def row_plans(st: State, k: StepPicks) -> list[RowPlan]:
    p = st.p
    rows = []
    for r in range(p.num_reqs):
        N, prompt = st.get("N", r), st.get("prompt", r)
        sched = int_flag(k.rows[r].sched)
        prefill = in_prefill(st, r)
        q, acc = k.rows[r].q, k.rows[r].acc
        live_col = k.rows[r].live_col if p.conv.materialize_prefixes else 0
        flag = int_flag(k.rows[r].is_prefilling)
        ghost = GhostRow(N, q, acc, flag, live_col, r)
        rows.append(RowPlan(r, sched, prefill, q, acc, live_col, flag, N + q == prompt, ghost))
    return rows


def step_guard(st: State, k: StepPicks) -> Any:
    """What the scheduler guarantees by construction: a step schedules at least
    one request (the model runner returns before any kernel when none is),
    and only running ones; a prefill row schedules at most the rest of its prompt; a decode
    row stays within the model length and accepts at most what it scheduled
    (at least one token is the assumption ``accepted_within_row``); the live
    column and the fresh slots are in range; a slot the pool hands out is a
    real slot."""
    p = st.p
    rows = row_plans(st, k)
    parts = [disj(*[row.sched for row in rows])]
    for row in rows:
        r = row.r
        N, prompt = st.get("N", r), st.get("prompt", r)
        parts += [
            within(k.rows[r].sched, 0, 1), implies(row.sched, st.get("active", r) == 1),
            within(k.rows[r].is_prefilling, 0, 1),
            within(row.live_col, 0, p.num_cols - 1), within(row.q, 0, p.max_len), within(row.acc, 0, p.geo.window),
            implies(row.sched, ite(row.prefill, N + row.q <= prompt,
                                   conj(N + row.q <= p.max_len, row.acc <= row.q))),
        ]
        for g in range(p.groups):
            parts += [within(k.rows[r].slot[g], 1, p.num_slots - 1), within(k.rows[r].null[g], 0, 1)]
    return conj(*parts)


def shared_block(st: State, g: int, slot: Any, sched: Any) -> Any:
    """A scheduled row's live block ``slot`` (of group ``g``) is named by
    another table too (``ref > 1``): the step copies it on write."""
    return conj(sched, slot != st.p.geo.pad_slot, st.get("ref", g, slot) > 1)


def needs_fresh_slot(st: State, g: int, slot: Any, sched: Any, null: Any) -> Any:
    """A scheduled row takes a fresh slot in group ``g`` for its live column,
    whose slot is ``slot`` now: the column holds the null block and the
    row's ``null`` pick does not keep it null, or the block is shared
    (:func:`shared_block`). On ints a Python bool, on Z3 terms a term."""
    return disj(conj(sched, slot == st.p.geo.pad_slot, null == 0), shared_block(st, g, slot, sched))


def step_assumptions(st: State, k: StepPicks) -> list[tuple[str, Any]]:
    """The caller assumptions one engine step relies on, named."""
    p, geo, conv = st.p, st.p.geo, st.p.conv
    out: list[tuple[str, Any]] = []
    rows = row_plans(st, k)
    fresh = {(g, row.r): needs_fresh_slot(st, g, st.get("table", g, row.r, row.live_col), row.sched,
                                          k.rows[row.r].null[g])
             for row in rows for g in range(p.groups)}
    for row in rows:
        r, gh = row.r, row.ghost
        fwd = GhostRow(gh.computed_before, gh.query_len, gh.accepted, row.prefill, gh.live_col, r)
        s = row.sched
        out += [
            (LIVE_COL_IS_LAST_BLOCK.name, implies(s, LIVE_COL_IS_LAST_BLOCK(geo, conv, fwd))),
            (DECODE_ROW_FITS.name, implies(s, DECODE_ROW_FITS(geo, fwd))),
            (ACCEPTED_WITHIN_ROW.name, implies(s, ACCEPTED_WITHIN_ROW(geo, fwd))),
            (ROW_NONEMPTY.name, implies(s, ROW_NONEMPTY(geo, fwd))),
            (DECODE_WITHIN_BLOCK.name, implies(s, DECODE_WITHIN_BLOCK(geo, fwd))),
            (PREFILL_CHUNK_ON_BOUNDARY.name, implies(s, PREFILL_CHUNK_ON_BOUNDARY(geo, conv, fwd, row.final_chunk))),
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
    return out
