"""The engine step's effect, one function per phase, in vLLM's order.

1. :func:`allocate`: a scheduled request's live column gets a fresh block
   (copy-on-write of a shared one);
2. :func:`move_live_columns`: block copies of moved live columns, then the
   migration kernel;
3. :func:`forward_pass`: FlashInfer's prefill reset or checkpoint rule and
   ring append on each scheduled row's live slot, group by group;
4. :func:`postprocess_and_compact`: the postprocess kernel (commit and plan)
   and, in align mode, compaction;
5. ``worker.materialize``: FlashInfer's materialize of the planned pairs;
6. :func:`bookkeeping`: positions, live columns and the prefix cache.

Between phases the state is *checkpointed* (``State.checkpoint``: proofs name
every symbolic entry afresh, keeping Z3 terms small).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..compaction import compact_program
from ..flashinfer import kernel_checkpoints, materialize_ring_row
from ..launch import next_power_of_2
from ..migration import migrate_program
from ..postprocess import postprocess_program
from ..table_memory import TableMemory
from ..vocab import conj, disj, implies, ite, negate
from .action import Outcome
from .ghost import replay, represents
from .picks import StepPicks
from .state import GARBAGE, State, code
from .step import RowPlan, needs_fresh_slot, row_plans, shared_block
from .worker import batch_layout, kernel_buffers, launch_grid, materialize, snapshot, sync_trackers

Checks = list[tuple[str, Any]]

PUBLISH_IN_EVERY_GROUP = "a publish happens in every group or in none"
"""The check that a row's postprocess publishes (materializes) in every cache group or in none."""


def step_apply(st: State, k: StepPicks) -> Outcome:
    """One engine step: the phases above, in order, each on the state the
    previous one left. ``Outcome.info`` holds the postprocess traces and the
    kernel launches (name, input snapshot, launch size)."""
    rows = row_plans(st, k)
    out = st.copy()
    allocate(st, out, k, rows)
    out = out.checkpoint("alloc")
    src_cols = [ite(row.sched, st.get("live", row.r), -1) for row in rows]
    live_cols = [ite(row.sched, row.live_col, -1) for row in rows]
    _, _, launch = batch_layout(st.p, rows)
    migration = move_live_columns(out, rows, src_cols, live_cols, launch)
    out = out.checkpoint("move")
    out, checks = forward_pass(out, rows)
    out = out.checkpoint("forward")
    post = postprocess_and_compact(out, rows, src_cols, live_cols, launch)
    checks += post.checks
    checks += [(name, negate(fault)) for name, fault in migration.faults + post.faults]
    out = out.checkpoint("postprocess")
    if st.p.conv.materialize_prefixes:
        checks += materialize(out, post.bufs, launch)
    out = out.checkpoint("materialize")
    after = bookkeeping(out, rows)
    return Outcome(after, checks, {"traces": post.traces, "launches": [migration.launch, post.launch]})


@dataclass
class KernelPhase:
    """What a phase's kernel launches left: the buffers after them, the
    launch (name, input snapshot, launch size), the postprocess traces, the
    phase's checks and the table memory's symbolic fault conditions."""

    bufs: dict
    launch: tuple[str, dict, Any]
    faults: Checks
    checks: Checks = field(default_factory=list)
    traces: list = field(default_factory=list)


def allocate(st: State, out: State, k: StepPicks, rows: list[RowPlan]) -> None:
    """Phase 1, on ``out``: a scheduled request's live column gets a fresh
    block in every group where it has none (or a null block when the
    scheduler says so); a live block shared with another table is copied
    first (copy-on-write: state, ring and trackers travel with the copy)."""
    p = st.p
    for row in rows:
        for g in range(p.groups):
            cur = st.get("table", g, row.r, row.live_col)
            fresh = k.rows[row.r].slot[g]
            cow = shared_block(st, g, cur, row.sched)
            alloc = needs_fresh_slot(st, g, cur, row.sched, k.rows[row.r].null[g])
            out.set("table", (g, row.r, row.live_col), fresh, alloc)
            out.set("ref", (g, cur), out.get("ref", g, cur) - 1, cow)
            out.set("ref", (g, fresh), out.get("ref", g, fresh) + 1, alloc)
            out.set("reg", (g, fresh), -1, alloc)  # evicted from the prefix cache
            copy_slot(out, st, g, cur, fresh, cow)


def copy_slot(out: State, src_state: State, g: int, src: Any, dst: Any, guard: Any) -> None:
    """A scheduler block copy: state, ring and trackers of ``src`` onto ``dst``."""
    R = int(out.p.geo.ring_len)
    for name in ("ck", "rs", "nc"):
        out.set(name, (g, dst), src_state.get(name, g, src), guard)
    for i in range(R):
        out.set("ring", (g, dst, i), src_state.get("ring", g, src, i), guard)


def move_live_columns(out: State, rows: list[RowPlan], src_cols: list, live_cols: list, launch: Any) -> KernelPhase:
    """Phase 2, on ``out``: a request whose live column moves gets its old
    live block copied onto the new one (state, ring, trackers), then the
    migration kernel runs on every scheduled row."""
    p = out.p
    pad = p.geo.pad_slot
    before_copy = out.copy()
    for row in rows:
        for g in range(p.groups):
            src = before_copy.get("table", g, row.r, src_cols[row.r])
            dst = before_copy.get("table", g, row.r, row.live_col)
            moved = conj(row.sched, src_cols[row.r] >= 0, src_cols[row.r] != row.live_col, src != pad, dst != pad,
                         src != dst)
            copy_slot(out, before_copy, g, src, dst, moved)
    bufs = kernel_buffers(out, rows, live_cols, src_cols)
    record = ("migrate", snapshot(bufs), launch)
    mem = TableMemory(bufs, max(p.num_cols, max(p.layers)))
    launch_grid(p, mem, launch, lambda b, g: migrate_program(mem, pad, p.conv.has_idx_mapping, b, g))
    sync_trackers(out, bufs)
    return KernelPhase(bufs, record, list(mem.faults))


def forward_pass(out: State, rows: list[RowPlan]) -> tuple[State, Checks]:
    """Phase 3: the forward pass, group by group, on each scheduled row's
    live slot (a row the caller scheduled in no group is not run at all).
    A prefill chunk starts from the checkpoint alone (or from zeros at
    position 0) and leaves the state after the chunk in it; a decode row
    follows FlashInfer's checkpoint rule and appends its rows to the ring.
    Returns the state after it and its checks."""
    p = out.p
    pad, R, W = p.geo.pad_slot, int(p.geo.ring_len), int(p.geo.window)
    checks: Checks = []
    fwd = out.copy()
    for row in rows:
        r, N, stream = row.r, out.get("N", row.r), out.get("stream", row.r)
        for g in range(p.groups):
            slot = out.get("table", g, r, row.live_col)
            real = conj(row.sched, slot != pad)
            pnat, start, ck = out.get("nc", g, slot), out.get("rs", g, slot), out.get("ck", g, slot)
            pre = conj(real, row.prefill)
            start_ok = disj(N == 0, conj(ck == code(p, stream, N), pnat == 0))
            checks.append(("forward reads the request's prefix", implies(pre, start_ok)))
            fwd.set("ck", (g, slot), ite(start_ok, code(p, stream, N + row.q), GARBAGE), pre)
            dec = conj(real, negate(row.prefill))
            checks.append(("forward reads the request's prefix", implies(dec, represents(out, g, slot, stream, N))))
            checks.append(("capacity: appended rows never overwrite committed rows", implies(dec, pnat + row.q <= R)))
            cp = kernel_checkpoints(pnat, row.q, W)
            folded = replay(out, g, slot, start, pnat, W)
            fwd.set("ck", (g, slot), folded, conj(dec, cp))
            base = materialize_ring_row(start, pnat, R)  # the append row (kernel_window_after)
            for j in range(p.max_step):
                tok = ite(j < row.acc, code(p, stream, N + j), GARBAGE)
                fwd.set("ring", (g, slot, materialize_ring_row(base, j, R)), tok, conj(dec, j < row.q))
    return fwd, checks


def postprocess_and_compact(out: State, rows: list[RowPlan], src_cols: list, live_cols: list,
                            launch: Any) -> KernelPhase:
    """Phase 4, on ``out``: the postprocess kernel (commit and plan) on every
    launched row and group, then in align mode the compaction of the plan's
    work list; the trackers and plan buffers take what the kernels left.
    Checks that a publish happens in every group of a row or in none."""
    p = out.p
    geo, G = p.geo, p.groups
    bufs = kernel_buffers(out, rows, live_cols, src_cols)
    record = ("postprocess", snapshot(bufs), launch)
    mem = TableMemory(bufs, max(p.num_cols, max(p.layers)))
    traces = launch_grid(p, mem, launch, lambda b, g: postprocess_program(mem, geo, p.conv, b, g))
    checks: Checks = []
    for b in range(p.num_reqs):
        first = traces[b * G].materialize
        checks += [(PUBLISH_IN_EVERY_GROUP, implies(b < launch, tr.materialize == first))
                   for tr in traces[b * G + 1:(b + 1) * G]]
    if p.conv.materialize_prefixes:
        lanes = next_power_of_2(p.num_reqs)
        with mem.masked(launch > 0):
            compact_program(mem, geo.max_num_reqs, launch, lanes)
    sync_trackers(out, bufs)
    for name in ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots"):
        out.v[name] = list(bufs[name][1])
    return KernelPhase(bufs, record, list(mem.faults), checks, traces)


def bookkeeping(out: State, rows: list[RowPlan]) -> State:
    """Phase 6: the scheduler's bookkeeping: positions, live columns, and the
    prefix cache registers every block this step filled."""
    after = out.copy()
    for row in rows:
        r = row.r
        N = out.get("N", r)
        new_n = ite(row.prefill, N + row.q, N + row.acc)
        after.set("N", (r,), new_n, row.sched)
        after.set("live", (r,), row.live_col, row.sched)
        if out.p.conv.materialize_prefixes:
            register_filled_blocks(out, after, r, row.sched, N, new_n)
    return after


def register_filled_blocks(out: State, after: State, r: int, sched: Any, before: Any, now: Any) -> None:
    """The prefix cache registers each non-null block the step filled (its end
    in ``(before, now]``) under its stream and boundary."""
    p = out.p
    bs, pad = p.geo.block_size, p.geo.pad_slot
    stream = out.get("stream", r)
    for c in range(p.num_cols):
        end = (c + 1) * bs
        filled = conj(sched, before < end, end <= now)
        for g in range(p.groups):
            s = out.get("table", g, r, c)
            after.set("reg", (g, s), code(p, stream, end), conj(filled, s != pad))
