"""The per-(row, group) postprocess program (`_postprocess_replayssm_kernel`).

One program commits one batch row's step in one cache group:

1. **decode the conventions** into the row's positions (:func:`decode_row`);
2. **checkpoint and commit**: mirror FlashInfer's checkpoint decision into the
   live slot's trackers (:func:`commit_trackers`), decode rows only;
3. **prefill resets**: align mode resets every block the chunk touched, mode
   none the live slot;
4. **the plan**: group 0 writes the shared per-row plan (ring start, replay
   length, or -1 for none); every group writes its own source and destination
   slot for each of its layers in the packed ``[layer, batch]`` tables;
5. **the canonical publish**: the destination slot's trackers become (0, 0).

Buffers (index tuples): ``idx_mapping[b]``, ``query_metadata[b]``,
``num_computed_tokens[r]``, ``num_accepted_tokens[r]``, ``is_prefilling[b]``,
``live_cols[r]``, ``block_table[g, b, col]``, ``ring_start[g, slot]``,
``num_committed[g, slot]``, ``plan_ring_start[b]``, ``plan_flush_count[b]``,
``packed_base[g]`` (where group g's first layer starts in the packed tables:
``row0 * MAX_NUM_REQS``, the pointer the host hands the kernel), ``num_layers[g]``,
and the flat packed tables ``src_slots[i]``, ``dst_slots[i]`` of
``total_layers * MAX_NUM_REQS`` entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from .boundary import Boundary, mamba_state_copy_boundary
from .geometry import Conventions, Geometry
from .memory import Memory
from .vocab import Cond, Value, cdiv, cmod, conj, imax, ite, negate, pointer_add


@dataclass(frozen=True)
class RowStep:
    """What a row's kernel inputs say about its step."""

    req: Value
    is_padding: Cond
    query_len: Value
    computed_before: Value
    computed_after: Value
    accepted: Value
    prefilling: Cond
    running_pos: Value


@dataclass(frozen=True)
class Commit:
    """The live slot's trackers before and after a decode step."""

    old_start: Value
    old_committed: Value
    checkpointed: Cond
    next_start: Value
    next_committed: Value


@dataclass(frozen=True)
class PostprocessTrace:
    """Every decision one program made, for proofs and statistics."""

    batch: Value
    group: Value
    row: RowStep
    boundary: Boundary
    live_col: Value
    live_slot: Value
    valid_live: Cond
    wants_materialize: Cond
    dst_slot: Value
    materialize: Cond
    commit: Commit
    decode: Cond
    prefill: Cond
    first_col: Value
    last_col: Value
    plan_flush: Value


def decode_row(mem: Memory, conv: Conventions, batch: Value) -> RowStep:
    """Positions of the row's step under the caller's conventions.

    A negative ``idx_mapping`` entry marks a padding row: nothing else is read.
    Decode rows advance by ``accepted`` (at least 1), prefill rows by the whole
    query; the running state of a decode row covers all but its last accepted
    token.
    """
    req, is_padding = batch, False
    if conv.has_idx_mapping:
        req = mem.load("idx_mapping", (batch,))
        is_padding = req < 0
    real = negate(is_padding)
    if conv.cumulative:
        query_len = mem.load("query_metadata", (batch + 1,), real) - mem.load(
            "query_metadata", (batch,), real
        )
    else:
        query_len = mem.load("query_metadata", (batch,), real)
    computed = mem.load("num_computed_tokens", (req,), real)
    computed_before = computed - query_len if conv.post_step else computed
    prefilling = mem.load("is_prefilling", (batch,), real) != 0
    accepted = imax(mem.load("num_accepted_tokens", (req,), real), 1)
    decoded_after = computed if conv.post_step else computed_before + accepted
    computed_after = ite(prefilling, computed_before + query_len, decoded_after)
    running_pos = running_position(prefilling, computed_after, accepted)
    return RowStep(
        req, is_padding, query_len, computed_before, computed_after, accepted, prefilling, running_pos
    )


def running_position(prefilling: Cond, computed_after: Value, accepted: Value) -> Value:
    """The position the running state stands for after the step: a prefill
    row's whole chunk; a decode row's tokens up to its first accepted one."""
    return ite(prefilling, computed_after, computed_after - accepted + 1)


def checkpoint_decision(committed: Value, query_len: Value, window: Value) -> Cond:
    """The host's mirror of FlashInfer's rule: checkpoint when the window would overflow."""
    return committed + query_len > window


def commit_trackers(
    old_start: Value, old_committed: Value, query_len: Value, accepted: Value, geo: Geometry
) -> Commit:
    """A checkpoint folds the committed rows into the state, so the live ring
    restarts just past them and holds only this step's accepted tokens;
    otherwise the accepted tokens extend the committed rows."""
    checkpointed = checkpoint_decision(old_committed, query_len, geo.window)
    next_start = ite(checkpointed, cmod(old_start + old_committed, geo.ring_len), old_start)
    next_committed = ite(checkpointed, accepted, old_committed + accepted)
    return Commit(old_start, old_committed, checkpointed, next_start, next_committed)


def prefill_columns(row: RowStep, block_size: Value) -> tuple[Value, Value]:
    """First and last block column a prefill chunk touched (inclusive)."""
    first_col = cdiv(row.computed_before, block_size)
    last_col = imax(cdiv(row.computed_after + block_size - 1, block_size) - 1, 0)
    return first_col, last_col


def packed_offset(layer: Value, batch: Value, geo: Geometry) -> Value:
    """Where row ``batch`` of a group's ``layer`` sits in the packed source and
    destination tables, from the group's ``packed_base``: one row block of
    ``MAX_NUM_REQS`` entries per layer."""
    return layer * geo.max_num_reqs + batch


def postprocess_program(
    mem: Memory, geo: Geometry, conv: Conventions, batch: Value, group: Value
) -> PostprocessTrace:
    """One program of the postprocess launch; its stores go through ``mem``."""
    pad = geo.pad_slot
    writes_plan = group == 0
    mem.store("plan_ring_start", (batch,), 0, writes_plan)
    mem.store("plan_flush_count", (batch,), -1, writes_plan)

    row = decode_row(mem, conv, batch)
    real = negate(row.is_padding)
    boundary = mamba_state_copy_boundary(row.running_pos, row.computed_after, geo.block_size)

    live_col = 0 if conv.live_col_is_zero else mem.load("live_cols", (row.req,), real)
    valid_live_col = conj(real, live_col >= 0)
    live_slot = mem.load("block_table", (group, batch, live_col), valid_live_col, other=pad)
    valid_live = conj(valid_live_col, live_slot != pad)
    wants_materialize = conj(conv.materialize_prefixes, valid_live, boundary.needs_copy, boundary.dst_col >= 0)
    dst_slot = mem.load("block_table", (group, batch, boundary.dst_col), wants_materialize, other=pad)
    materialize = conj(wants_materialize, dst_slot != pad)

    if conv.materialize_prefixes:
        base = mem.load("packed_base", (group,), real)
        layers = mem.load("num_layers", (group,), real)
        for layer in mem.each(0, layers, real):
            entry = pointer_add(base, packed_offset(layer, batch, geo))
            mem.store("src_slots", (entry,), ite(materialize, live_slot, pad))
            mem.store("dst_slots", (entry,), ite(materialize, dst_slot, pad))

    prefill = conj(real, row.prefilling)
    decode = conj(real, negate(row.prefilling), valid_live)
    # The decode branch's reads come before the prefill resets (which never
    # run for the same program); reading before the reset loop's stores keeps
    # the symbolic memory free of quantifiers.
    commit = commit_trackers(
        mem.load("ring_start", (group, live_slot), decode),
        mem.load("num_committed", (group, live_slot), decode),
        row.query_len,
        row.accepted,
        geo,
    )

    first_col, last_col = prefill_columns(row, geo.block_size)
    if conv.materialize_prefixes:
        for col in mem.each(first_col, last_col + 1, prefill):
            slot = mem.load("block_table", (group, batch, col))
            mem.store("ring_start", (group, slot), 0, slot != pad)
            mem.store("num_committed", (group, slot), 0, slot != pad)
    else:
        mem.store("ring_start", (group, live_slot), 0, conj(prefill, valid_live))
        mem.store("num_committed", (group, live_slot), 0, conj(prefill, valid_live))
    # A prefill chunk ending on the boundary leaves the live slot canonical:
    # only a different destination needs a copy, with nothing to replay.
    mem.store("plan_flush_count", (batch,), 0, conj(prefill, wants_materialize, live_col != boundary.dst_col, writes_plan))

    mem.store("ring_start", (group, live_slot), commit.next_start, decode)
    mem.store("num_committed", (group, live_slot), commit.next_committed, decode)
    plan_flush = boundary.bias + 1 + ite(commit.checkpointed, 0, commit.old_committed)
    mem.store("plan_ring_start", (batch,), commit.next_start, conj(decode, wants_materialize, writes_plan))
    mem.store("plan_flush_count", (batch,), plan_flush, conj(decode, wants_materialize, writes_plan))

    # Publishing makes the destination canonical; when it is the live slot this
    # supersedes the commit above.
    mem.store("ring_start", (group, dst_slot), 0, materialize)
    mem.store("num_committed", (group, dst_slot), 0, materialize)

    return PostprocessTrace(
        batch, group, row, boundary, live_col, live_slot, valid_live, wants_materialize, dst_slot,
        materialize, commit, decode, prefill, first_col, last_col, plan_flush,
    )
