"""The engine step's picks and each request's plan for the step.

The domain of every leaf of a step's picks (:func:`step_specs`, over the
record ``spec.system.picks.StepPicks``) and what the scheduler decided for
each request (:class:`RowPlan`, :func:`row_plans`): whether it runs, as a
prefill chunk or a decode, with which query length, accepted count and live
column. The guard (``step_guard``), the caller assumptions
(``step_assumptions``) and the effect (``step_phases``) all read the step
through these plans.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..assumptions import GhostRow
from ..geometry import moves_live_column
from ..vocab import Cond, Value, conj
from .picks import PickSpec, StepPicks
from .state import State, SystemParams


def step_specs(p: SystemParams) -> list[PickSpec]:
    """The domain of every leaf of a step's picks, by path (``rows[r].q``,
    ``rows[r].slot[g]``, ..., ``order[i]``: the request at place ``i`` of
    the batch order, by request index where a run leaves it out)."""
    out = []
    for r in range(p.num_reqs):
        row = f"rows[{r}]"
        out += [PickSpec(f"{row}.sched", 0, 1), PickSpec(f"{row}.q", 0, p.max_len),
                PickSpec(f"{row}.acc", 0, int(p.geo.window)), PickSpec(f"{row}.live_col", 0, p.num_cols - 1),
                PickSpec(f"{row}.is_prefilling", 0, 1)]
        out += [PickSpec(f"{row}.slot[{g}]", 1, p.num_slots - 1) for g in range(p.groups)]
        out += [PickSpec(f"{row}.null[{g}]", 0, 1) for g in range(p.groups)]
        for c in range(p.num_cols - 1):
            out += [PickSpec(f"{row}.cover_slot[{c}][{g}]", 1, p.num_slots - 1) for g in range(p.groups)]
        out += [PickSpec(f"{row}.cover_null[{c}]", 0, 1) for c in range(p.num_cols - 1)]
        out.append(PickSpec(f"{row}.tail_as_decode", 0, 1))
    return out + [PickSpec(f"order[{i}]", 0, p.num_reqs - 1, i) for i in range(p.num_reqs)]


@dataclass
class RowPlan:
    """The scheduler's decision for one request in one step: ``prefill`` is
    how the forward pass runs the row (the chunked scan, else FlashInfer's
    decode), ``tail`` that it is a prompt tail run as a decode."""

    r: int
    sched: Cond
    prefill: Cond
    tail: Cond
    q: Value
    acc: Value
    live_col: Value
    flag: Cond
    final_chunk: Cond
    ghost: GhostRow


def int_flag(x: Value) -> Cond:
    """An int flag as a vocabulary boolean."""
    return x != 0


def in_prefill(st: State, r: int) -> Cond:
    """Request ``r`` has not computed its whole prompt: its next row is a
    prefill chunk, or at its prompt tail a decode (:func:`runs_prefill`)."""
    return st.get("N", r) < st.get("prompt", r)


def at_prompt_tail(st: State, r: int) -> Cond:
    """Request ``r`` has prior state and exactly one prompt token left: its
    row may run as a decode (model choice ``prompt_tail_runs_as_decode``)."""
    N = st.get("N", r)
    return conj(N > 0, st.get("prompt", r) - N == 1)


def runs_prefill(st: State, k: StepPicks, r: int) -> Cond:
    """Request ``r``'s row in step ``k`` runs as a prefill chunk (the chunked
    scan): the request is in its prompt and the row is no tail run as a decode."""
    return conj(in_prefill(st, r), k.rows[r].tail_as_decode == 0)


def row_plans(st: State, k: StepPicks) -> list[RowPlan]:
    p = st.p
    rows = []
    for r in range(p.num_reqs):
        N, prompt = st.get("N", r), st.get("prompt", r)
        sched = int_flag(k.rows[r].sched)
        prefill = runs_prefill(st, k, r)
        q, acc = k.rows[r].q, k.rows[r].acc
        live_col = k.rows[r].live_col if moves_live_column(p.mode) else 0
        flag = int_flag(k.rows[r].is_prefilling)
        ghost = GhostRow(N, q, acc, flag, live_col, r)
        rows.append(RowPlan(r, sched, prefill, int_flag(k.rows[r].tail_as_decode), q, acc, live_col, flag,
                            N + q == prompt, ghost))
    return rows
