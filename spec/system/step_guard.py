"""The engine step's guard: what vLLM's scheduler guarantees by construction (:func:`step_guard`)."""

from __future__ import annotations

from ..vocab import Cond, conj, disj, implies, ite, within
from .picks import StepPicks
from .state import State
from .step_plan import at_prompt_tail, row_plans


def step_guard(st: State, k: StepPicks) -> Cond:
    """What the scheduler guarantees by construction: a step schedules at least
    one request (the model runner returns before any kernel when none is),
    and only running ones; a prefill row schedules at most the rest of its prompt; a decode
    row stays within the model length and accepts at most what it scheduled
    (at least one token is the assumption ``accepted_within_row``); a prompt
    tail run as a decode is one (prior state, one prompt token left) and
    accepts at most that token (the placeholders after it are no drafts); the live
    column and the fresh slots are in range; a slot the pool hands out is a
    real slot; the batch order is a permutation of the requests."""
    p = st.p
    rows = row_plans(st, k)
    parts = [disj(*[row.sched for row in rows])]
    parts += [within(x, 0, p.num_reqs - 1) for x in k.order]
    parts += [k.order[i] != k.order[j] for i in range(p.num_reqs) for j in range(i + 1, p.num_reqs)]
    for row in rows:
        r = row.r
        N, prompt = st.get("N", r), st.get("prompt", r)
        parts += [
            within(k.rows[r].sched, 0, 1), implies(row.sched, st.get("active", r) == 1),
            within(k.rows[r].is_prefilling, 0, 1), within(k.rows[r].tail_as_decode, 0, 1),
            within(row.live_col, 0, p.num_cols - 1), within(row.q, 0, p.max_len), within(row.acc, 0, p.geo.window),
            implies(row.sched, ite(row.prefill, N + row.q <= prompt,
                                   conj(N + row.q <= p.max_len, row.acc <= row.q))),
            implies(conj(row.sched, row.tail), conj(at_prompt_tail(st, r), row.acc <= 1)),
        ]
        for g in range(p.groups):
            parts += [within(k.rows[r].slot[g], 1, p.num_slots - 1), within(k.rows[r].null[g], 0, 1)]
        for c in range(p.num_cols - 1):
            parts.append(within(k.rows[r].cover_null[c], 0, 1))
            parts += [within(k.rows[r].cover_slot[c][g], 1, p.num_slots - 1) for g in range(p.groups)]
    return conj(*parts)
