"""The engine step's effect, one function per phase, in vLLM's order:

1. :func:`allocate`: a scheduled request's live column gets a fresh block
   (copy-on-write of a shared one), and so does every null column it
   covers before it (or the null block: ``step_blocks.covers``);
2. :func:`move_live_columns`: block copies of moved live columns, then the
   migration kernel;
3. :func:`forward_pass`: FlashInfer's prefill reset or checkpoint rule and
   ring append on each scheduled row's live slot, group by group (a
   prefill chunk also leaves each block it covers whole at its boundary);
4. :func:`postprocess_and_compact`: the postprocess kernel (commit and plan)
   and, in align mode, compaction;
5. :func:`materialize`: FlashInfer's materialize of the planned pairs;
6. :func:`bookkeeping`: positions, live columns and the prefix cache.

The kernels are never re-implemented here: phases 2 and 4 run
``spec.migration.migrate_program``, ``spec.postprocess.postprocess_program``
and ``spec.compaction.compact_program`` on the buffers
``step_kernels.kernel_buffers`` lays out; FlashInfer's side comes from
``spec.flashinfer``. ``step.step_apply`` runs the phases in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arrays import select
from ..compaction import compact_program
from ..flashinfer import kernel_checkpoints, materialize_ring_row
from ..geometry import has_prefix_cache, prefill_writes_every_boundary
from ..launch import next_power_of_2
from ..migration import migrate_program
from ..postprocess import PostprocessTrace, postprocess_program
from ..table_memory import Buffers, TableMemory
from ..vocab import Cond, Value, conj, disj, implies, ite, negate
from .action import Named
from .ghost import replay, represents
from .picks import StepPicks
from .state import GARBAGE, WORKER_BUFFERS, State, code
from .step_blocks import covers, needs_cover_slot, needs_fresh_slot, shared_block
from .step_kernels import BatchLayout, kernel_buffers, launch_grid, snapshot, sync_trackers
from .step_plan import RowPlan

PUBLISH_IN_EVERY_GROUP = "a publish happens in every group or in none"
"""The check that a row's postprocess publishes (materializes) in every cache group or in none."""


@dataclass
class KernelPhase:
    """What a phase's kernel launches left: the buffers after them, the
    launch (name, input snapshot, launch size), the postprocess traces, the
    phase's checks and the table memory's symbolic fault conditions."""

    bufs: Buffers
    launch: tuple[str, Buffers, Value]
    faults: list[Named]
    checks: list[Named] = field(default_factory=list)
    traces: list[PostprocessTrace] = field(default_factory=list)


def allocate(st: State, out: State, k: StepPicks, rows: list[RowPlan]) -> None:
    """Phase 1, on ``out``: a scheduled request's live column gets a fresh
    block in every group where it has none (or a null block when the
    scheduler says so); a live block shared with another table is copied
    first (copy-on-write: state, ring and trackers travel with the copy).
    Each null column a row covers before its live one gets a fresh block in
    every group, or stays null where the pool says so (:func:`needs_cover_slot`)."""
    p = st.p
    for row in rows:
        for c in range(p.num_cols - 1):
            alloc = needs_cover_slot(st, k, row, c)
            if alloc is False:  # on ints: nothing to allocate
                continue
            for g in range(p.groups):
                fresh = k.rows[row.r].cover_slot[c][g]
                out.set("table", (g, row.r, c), fresh, alloc)
                out.set("ref", (g, fresh), out.get("ref", g, fresh) + 1, alloc)
                out.set("reg", (g, fresh), -1, alloc)  # evicted from the prefix cache
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


def copy_slot(out: State, src_state: State, g: int, src: Value, dst: Value, guard: Cond) -> None:
    """A scheduler block copy: state, ring and trackers of ``src`` onto ``dst``."""
    R = int(out.p.geo.ring_len)
    for name in ("ck", "rs", "nc"):
        out.set(name, (g, dst), src_state.get(name, g, src), guard)
    for i in range(R):
        out.set("ring", (g, dst, i), src_state.get("ring", g, src, i), guard)


def move_live_columns(out: State, rows: list[RowPlan], layout: BatchLayout, src_cols: list[Value],
                      live_cols: list[Value]) -> KernelPhase:
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
    bufs = kernel_buffers(out, rows, layout, live_cols, src_cols)
    record = ("migrate", snapshot(bufs), layout.launch)
    mem = TableMemory(bufs, max(p.num_cols, max(p.layers)))
    launch_grid(p, mem, layout.launch, lambda b, g: migrate_program(mem, pad, p.conv.has_idx_mapping, b, g))
    sync_trackers(out, bufs)
    return KernelPhase(bufs, record, list(mem.faults))


def forward_pass(out: State, rows: list[RowPlan]) -> tuple[State, list[Named]]:
    """Phase 3: the forward pass, group by group, on each scheduled row's
    live slot (a row the caller scheduled in no group is not run at all).
    A prefill chunk starts from the checkpoint alone (or from zeros at
    position 0) and leaves the state after the chunk in it, and each block
    before it the chunk covers whole (in all mode: every block it covers)
    at that block's boundary; a decode row
    follows FlashInfer's checkpoint rule and appends its rows to the ring.
    Returns the state after it and its checks."""
    p = out.p
    pad, R, W, bs = p.geo.pad_slot, int(p.geo.ring_len), int(p.geo.window), p.geo.block_size
    checks: list[Named] = []
    fwd = out.copy()
    for row in rows:
        r, N, stream = row.r, out.get("N", row.r), out.get("stream", row.r)
        every = prefill_writes_every_boundary(p.mode)
        whole = {c: conj(row.prefill, covers(out, row.r, row.sched, row.live_col, c), True if every else c * bs >= N)
                 for c in range(p.num_cols - 1)}
        for g in range(p.groups):
            slot = out.get("table", g, r, row.live_col)
            real = conj(row.sched, slot != pad)
            pnat, start, ck = out.get("nc", g, slot), out.get("rs", g, slot), out.get("ck", g, slot)
            pre = conj(real, row.prefill)
            start_ok = disj(N == 0, conj(ck == code(p, stream, N), pnat == 0))
            checks.append(("forward reads the request's prefix", implies(pre, start_ok)))
            # the chunked scan leaves each block it covers whole (all mode: each it covers) at its boundary
            # (model choices prefill_writes_covered_block_states, all_mode_prefill_writes_every_boundary),
            # then the chunk's end in the live slot
            for c, covered_whole in whole.items():
                if covered_whole is False:  # on ints: the chunk covers no block whole there
                    continue
                covered = out.get("table", g, r, c)
                fwd.set("ck", (g, covered), ite(start_ok, code(p, stream, (c + 1) * bs), GARBAGE),
                        conj(pre, covered_whole, covered != pad))
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


def postprocess_and_compact(out: State, rows: list[RowPlan], layout: BatchLayout, src_cols: list[Value],
                            live_cols: list[Value]) -> KernelPhase:
    """Phase 4, on ``out``: the postprocess kernel (commit and plan) on every
    launched row and group, then in align mode the compaction of the plan's
    work list; the trackers and plan buffers take what the kernels left.
    Checks that a publish happens in every group of a row or in none."""
    p = out.p
    geo, G = p.geo, p.groups
    launch = layout.launch
    bufs = kernel_buffers(out, rows, layout, live_cols, src_cols)
    record = ("postprocess", snapshot(bufs), launch)
    mem = TableMemory(bufs, max(p.num_cols, max(p.layers)))
    traces = launch_grid(p, mem, launch, lambda b, g: postprocess_program(mem, geo, p.conv, b, g))
    checks: list[Named] = []
    for b in range(p.num_reqs):
        first = traces[b * G].materialize
        checks += [(PUBLISH_IN_EVERY_GROUP, implies(b < launch, tr.materialize == first))
                   for tr in traces[b * G + 1:(b + 1) * G]]
    if p.conv.materialize_prefixes:
        lanes = next_power_of_2(p.num_reqs)
        with mem.masked(launch > 0):
            compact_program(mem, geo.max_num_reqs, launch, lanes)
    sync_trackers(out, bufs)
    for name in WORKER_BUFFERS:
        out.v[name] = list(bufs[name][1])
    return KernelPhase(bufs, record, list(mem.faults), checks, traces)


def materialize(out: State, bufs: Buffers, launch: Value) -> list[Named]:
    """Phase 5, on ``out``: FlashInfer's ``replayssm_materialize`` on the ghost. The work list is
    the compaction's output; the check ``work list is the active rows`` ties
    it to the rows whose plan is active (``plan_flush_count >= 0``, row below
    the launch size), in increasing order, so the pairs below are taken row by
    row. For each such row and each layer the destination's state becomes the
    source's checkpoint advanced by the plan's rows. Every layer of a group
    holds the same slots, so the group's ghost takes layer 0's pair and the
    check demands the other layers agree. All sources are read before any
    destination is written (one launch); a destination another pair reads,
    or writes with a different result, is a race."""
    p = out.p
    geo, NR, pad = p.geo, p.num_reqs, p.geo.pad_slot
    R, W = int(geo.ring_len), int(geo.window)
    before = out.copy()
    checks: list[Named] = []
    work = bufs["active_request_indices"][1]
    src_t, dst_t = bufs["src_slots"][1], bufs["dst_slots"][1]
    starts, flushes = bufs["plan_ring_start"][1], bufs["plan_flush_count"][1]
    rows_active = [conj(b < launch, flushes[b] >= 0) for b in range(NR)]
    position: Value = 0
    for b in range(NR):
        checks.append(("work list is the active rows", implies(rows_active[b], select(work, position, -2) == b)))
        position = ite(rows_active[b], position + 1, position)
    for v in range(NR):
        checks.append(("work list is the active rows", implies(v >= position, work[v] == -1)))
    pairs = []
    for b in range(NR):
        start, flush = starts[b], flushes[b]
        for g in range(p.groups):
            base = sum(p.layers[:g]) * NR
            src, dst = src_t[base + b], dst_t[base + b]
            run = conj(rows_active[b], src != pad, dst != pad)
            for layer in range(1, p.layers[g]):
                e = base + layer * NR + b
                checks.append(("layers of a group publish the same pair", implies(rows_active[b], conj(
                    src_t[e] == src, dst_t[e] == dst))))
            checks.append(("materialize contract", implies(run, conj(
                start >= 0, start < R, flush >= 0, flush <= W, start + flush <= 2 * R))))
            value = replay(before, g, src, start, flush, W)
            pairs.append((g, run, src, dst, value))
            out.set("ck", (g, dst), value, run)
    for i, (g, run, src, dst, value) in enumerate(pairs):
        for j, (g2, run2, src2, dst2, value2) in enumerate(pairs):
            if i < j and g == g2:
                checks.append(("materialize pairs do not race", implies(conj(run, run2, dst == dst2), value == value2)))
            if i != j and g == g2:
                checks.append(("materialize pairs do not race", negate(conj(run, run2, dst == src2, src != dst))))
    return checks


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
        if has_prefix_cache(out.p.mode):
            register_filled_blocks(out, after, r, row.sched, N, new_n)
    return after


def register_filled_blocks(out: State, after: State, r: int, sched: Cond, before: Value, now: Value) -> None:
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
