"""The engine step, top to bottom: its picks, guard, caller assumptions and effect, phase by phase.

One step schedules a row for some running requests. Per request it picks
whether it runs, its query length, accepted count, live column and
``is_prefilling`` flag, whether a prompt tail runs as a decode, per cache
group the fresh slot the pool hands out and whether the scheduler keeps a
column null, and what the pool gives each null column the row covers
before its live one; per step the batch order, a permutation of the
scheduled rows (the record ``spec.system.picks.StepPicks``, one ``RowPick``
per request and the order).

The module reads in the order of the :class:`~.action.Action` it ends with:

1. the picks' domains (:func:`step_specs`) and each request's plan for the
   step (:class:`RowPlan`);
2. the guard (:func:`step_guard`): what the scheduler guarantees;
3. the caller assumptions (:func:`step_assumptions`, every one in
   :data:`SYSTEM_ASSUMPTIONS`);
4. the effect (:func:`step_apply`), one function per phase, in vLLM's order:

   1. :func:`allocate`: a scheduled request's live column gets a fresh block
      (copy-on-write of a shared one), and so does every null column it
      covers before it (or the null block: :func:`covers`);
   2. :func:`move_live_columns`: block copies of moved live columns, then the
      migration kernel;
   3. :func:`forward_pass`: FlashInfer's prefill reset or checkpoint rule and
      ring append on each scheduled row's live slot, group by group (a
      prefill chunk also leaves each block it covers whole at its boundary);
   4. :func:`postprocess_and_compact`: the postprocess kernel (commit and plan)
      and, in align mode, compaction;
   5. :func:`materialize`: FlashInfer's materialize of the planned pairs;
   6. :func:`bookkeeping`: positions, live columns and the prefix cache;

5. the worker's side of phases 2 and 4: the kernel inputs laid out from the
   state (:func:`batch_layout`, :func:`kernel_buffers`) and the launches
   (:func:`launch_grid`).

The kernels are never re-implemented here: phases 2 and 4 run
``spec.migration.migrate_program``, ``spec.postprocess.postprocess_program``
and ``spec.compaction.compact_program`` on the buffers :func:`kernel_buffers`
lays out with ``spec.assumptions.encode_row``, in a
:class:`~replayssm.spec.table_memory.TableMemory`; FlashInfer's side comes
from ``spec.flashinfer``. Between phases the state is *checkpointed*
(``State.checkpoint``: proofs name every symbolic entry afresh, keeping Z3
terms small).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from ..arrays import select
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
    encode_row,
)
from ..compaction import compact_program
from ..flashinfer import kernel_checkpoints, materialize_ring_row
from ..geometry import has_prefix_cache, moves_live_column, prefill_writes_every_boundary
from ..launch import next_power_of_2
from ..migration import migrate_program
from ..postprocess import PostprocessTrace, postprocess_program
from ..table_memory import Buffers, TableMemory
from ..vocab import Cond, Value, conj, disj, implies, ite, negate, within
from .action import Action, Named, Outcome
from .ghost import replay, represents
from .picks import PickSpec, StepPicks
from .state import GARBAGE, WORKER_BUFFERS, State, SystemParams, code

T = TypeVar("T")

# -- 1. the picks, and each request's plan -----------------------------------------------------------

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

# -- 2. the guard ----------------------------------------------------------------------------------

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

# -- 3. the caller assumptions ---------------------------------------------------------------------

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

# -- 4. the effect, phase by phase -----------------------------------------------------------------

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
    layout = batch_layout(st.p, k, rows)
    migration = move_live_columns(out, rows, layout, src_cols, live_cols)
    out = out.checkpoint("move")
    out, checks = forward_pass(out, rows)
    out = out.checkpoint("forward")
    post = postprocess_and_compact(out, rows, layout, src_cols, live_cols)
    checks += post.checks
    checks += [(name, negate(fault)) for name, fault in migration.faults + post.faults]
    out = out.checkpoint("postprocess")
    if st.p.conv.materialize_prefixes:
        checks += materialize(out, post.bufs, layout.launch)
    out = out.checkpoint("materialize")
    after = bookkeeping(out, rows)
    return Outcome(after, checks, {"traces": post.traces, "launches": [migration.launch, post.launch]})


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

# -- 5. the worker's side: kernel inputs laid out from the state, launches ------------------------

@dataclass(frozen=True)
class BatchLayout:
    """Where a step's scheduled requests sit in the batch (:func:`batch_layout`)."""

    row: dict[int, Value]
    """The batch row of each request (meaningful where it is scheduled)."""
    cum_base: dict[int, Value]
    """Each request's first token in the batch: the query lengths of the scheduled rows before it."""
    n: Value
    """The rows scheduled."""
    tokens: Value
    """The tokens scheduled, over every row."""
    launch: Value
    """The launch size: ``n`` in v1, ``MAX_NUM_REQS`` in v2."""


def ahead_in_order(order: tuple[Value, ...], s: int, r: int) -> Cond:
    """Request ``s`` comes before request ``r`` in the batch ``order`` (a permutation of the requests)."""
    if all(type(x) is int for x in order):
        return order.index(s) < order.index(r)
    return disj(*[conj(order[i] == s, order[j] == r) for i in range(len(order)) for j in range(i + 1, len(order))])


def batch_layout(p: SystemParams, k: StepPicks, rows: list[RowPlan]) -> BatchLayout:
    """Where each scheduled request sits in the batch: the scheduled requests
    take rows ``0..n-1`` in the step's batch order ``k.order``, a permutation
    of the requests picked per step (model choice
    ``batch_order_picked_per_step``): a request's row is the number of
    scheduled requests before it in that order, its first token the tokens
    they schedule. v1 launches ``n`` programs per group; v2 launches
    ``MAX_NUM_REQS`` rows, the ones past ``n`` being padding rows (CUDA-graph
    padding, ``idx_mapping = -1``)."""
    row: dict[int, Value] = {}
    cum_base: dict[int, Value] = {}
    if all(type(x) is int for x in k.order) and all(type(x.sched) is bool for x in rows):  # on ints
        n = tokens = 0
        for r in k.order:
            if rows[r].sched:
                row[r], cum_base[r] = n, tokens
                n, tokens = n + 1, tokens + rows[r].q
        for x in rows:
            row.setdefault(x.r, n)
            cum_base.setdefault(x.r, tokens)
        return BatchLayout(row, cum_base, n, tokens, p.num_reqs if p.conv.has_idx_mapping else n)
    for mine in rows:
        before = [(conj(other.sched, ahead_in_order(k.order, other.r, mine.r)), other.q)
                  for other in rows if other.r != mine.r]
        row[mine.r] = sum(ite(ahead, 1, 0) for ahead, _ in before)
        cum_base[mine.r] = sum(ite(ahead, q, 0) for ahead, q in before)
    n = sum(ite(x.sched, 1, 0) for x in rows)
    tokens = sum(ite(x.sched, x.q, 0) for x in rows)
    return BatchLayout(row, cum_base, n, tokens, p.num_reqs if p.conv.has_idx_mapping else n)


def kernel_buffers(st: State, rows: list[RowPlan], layout: BatchLayout, live_cols: list[Value],
                   src_cols: list[Value]) -> Buffers:
    """The worker's inputs in the kernels' layout, laid out by ``encode_row``
    at each scheduled request's batch row (:func:`batch_layout`)."""
    p = st.p
    NR, G, C, S = p.num_reqs, p.groups, p.num_cols, p.num_slots
    conv = p.conv
    shapes = p.shapes()
    bufs: Buffers = {
        "idx_mapping": ((NR,), [-1] * NR),
        "query_metadata": ((NR + 1,) if conv.cumulative else (NR,), [0] * (NR + 1 if conv.cumulative else NR)),
        "num_computed_tokens": ((NR,), [0] * NR),
        "num_accepted_tokens": ((NR,), [0] * NR),
        "is_prefilling": ((NR,), [0] * NR),
        "live_cols": ((NR,), [0] * NR),
        "src_cols": ((NR,), [-1] * NR),
        "dst_cols": ((NR,), [-1] * NR),
        "block_table": ((G, NR, C), [p.geo.pad_slot] * (G * NR * C)),
        "ring_start": ((G, S), list(st.v["rs"])),
        "num_committed": ((G, S), list(st.v["nc"])),
        "packed_base": ((G,), [sum(p.layers[:g]) * NR for g in range(G)]),
        "num_layers": ((G,), list(p.layers)),
    }
    for name in WORKER_BUFFERS:
        bufs[name] = (shapes[name], list(st.v[name]))
    mem = TableMemory(bufs, max(C, max(p.layers)))
    for row in rows:
        b = layout.row[row.r]
        kreq = row.r if conv.has_idx_mapping else b
        ghost = replace(row.ghost, req=kreq, cum_base=layout.cum_base[row.r])
        with mem.masked(row.sched):
            for buf, idx, value in encode_row(conv, b, ghost):
                mem.store(buf, idx, value)
            mem.store("live_cols", (kreq,), live_cols[row.r])
            mem.store("src_cols", (kreq,), src_cols[row.r])
            mem.store("dst_cols", (kreq,), live_cols[row.r])
            for g in range(G):
                for c in range(C):
                    mem.store("block_table", (g, b, c), st.get("table", g, row.r, c))
    if conv.cumulative:
        # padding rows past the scheduled ones have empty queries
        for b in range(NR + 1):
            mem.store("query_metadata", (b,), layout.tokens, b > layout.n)
    return bufs


def snapshot(bufs: Buffers) -> Buffers:
    """The kernel inputs and state buffers as a launch found them."""
    return {name: (shape, list(values)) for name, (shape, values) in bufs.items()}


def launch_grid(p: SystemParams, mem: TableMemory, launch: Value, program: Callable[[int, int], T]) -> list[T]:
    """Run ``program(batch, group)`` over the grid ``(launch, groups)``."""
    out: list[T] = []
    for b in range(p.num_reqs):
        with mem.masked(b < launch):
            for g in range(p.groups):
                out.append(program(b, g))
    return out


def sync_trackers(out: State, bufs: Buffers) -> None:
    """The trackers of ``out`` take the values the kernels left in ``bufs``."""
    out.v["rs"] = list(bufs["ring_start"][1])
    out.v["nc"] = list(bufs["num_committed"][1])


STEP = Action("step", StepPicks, step_specs, step_guard, step_assumptions, step_apply)
