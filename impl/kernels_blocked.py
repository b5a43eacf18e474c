"""Row-blocked postprocess: many batch rows per program, compaction in the same launch.

``postprocess_replayssm_blocked_kernel`` computes what
``_postprocess_replayssm_kernel`` computes (same parameters and constexprs,
same final memory), but one program handles ``ROWS_PER_PROGRAM`` consecutive
batch rows of one cache group as vector lanes, statement by statement in the
spec's order (``spec/postprocess.py``, which the spec's numpy lanes run the
same way). Each plan entry is stored once with its final value (the
reference clears it first and may overwrite it); the final memory is the same.

With ``COMPACT`` the grid has one more row block, whose group-0 program
writes ``active_request_indices`` as ``_compact_replayssm_requests_kernel``
would after the launch. It does not read the plan (other programs are writing
it): a row is active exactly when its plan publishes, and whether it publishes
depends only on the step's inputs and the block table, never on the trackers,
as long as the trackers are in range (``num_committed >= 0``, the range
invariant the system proofs establish): a decode publish replays
``bias + 1 + committed >= 1`` rows, a prefill publish 0. So the active list is
computed from read-only data, in parallel with the commits.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .kernels import _i32_table, mamba_state_copy_boundary


@triton.jit
def _decode_rows(
    rows,
    launched,
    idx_mapping,
    query_metadata,
    num_computed_tokens,
    num_accepted_tokens,
    is_prefilling,
    live_cols,
    table_rows,
    MAMBA_BLOCK_SIZE: tl.constexpr,
    PAD_SLOT_ID: tl.constexpr,
    QUERY_METADATA_IS_CUMULATIVE: tl.constexpr,
    NUM_COMPUTED_IS_POST_STEP: tl.constexpr,
    HAS_IDX_MAPPING: tl.constexpr,
    MATERIALIZE_PREFIXES: tl.constexpr,
    LIVE_COL_IS_ZERO: tl.constexpr,
):
    """What the step's inputs and the block table say about each row, read
    only: ``(real, step_len, pos_before, pos_after, n_accepted, is_prefill,
    live_col, live_slot, has_live, bias, target_col, publish_wanted)``."""
    request = rows
    real = launched
    if HAS_IDX_MAPPING:
        request = tl.load(idx_mapping + rows, mask=launched, other=-1)
        real = launched & (request >= 0)

    if not QUERY_METADATA_IS_CUMULATIVE:
        step_len = tl.load(query_metadata + rows, mask=real, other=0)
    else:
        step_len = tl.load(query_metadata + rows + 1, mask=real, other=0) - tl.load(
            query_metadata + rows, mask=real, other=0
        )
    computed_in = tl.load(num_computed_tokens + request, mask=real, other=0)
    if NUM_COMPUTED_IS_POST_STEP:
        pos_before = computed_in - step_len
    else:
        pos_before = computed_in
    is_prefill = tl.load(is_prefilling + rows, mask=real, other=0) != 0
    n_accepted = tl.maximum(tl.load(num_accepted_tokens + request, mask=real, other=0), 1)
    if NUM_COMPUTED_IS_POST_STEP:
        decode_after = computed_in
    else:
        decode_after = pos_before + n_accepted
    pos_after = tl.where(is_prefill, pos_before + step_len, decode_after)
    running_pos = tl.where(is_prefill, pos_after, pos_after - n_accepted + 1)
    at_boundary, bias, target_col = mamba_state_copy_boundary(
        running_pos, pos_after, MAMBA_BLOCK_SIZE
    )

    if LIVE_COL_IS_ZERO:
        live_col = tl.zeros_like(rows)
    else:
        live_col = tl.load(live_cols + request, mask=real, other=-1)
    live_col_ok = real & (live_col >= 0)
    live_slot = tl.load(table_rows + live_col, mask=live_col_ok, other=PAD_SLOT_ID)
    has_live = live_col_ok & (live_slot != PAD_SLOT_ID)
    publish_wanted = MATERIALIZE_PREFIXES & has_live & at_boundary & (target_col >= 0)
    return (real, step_len, pos_before, pos_after, n_accepted, is_prefill,
            live_col, live_slot, has_live, bias, target_col, publish_wanted)


@triton.jit(do_not_specialize=["num_reqs"])
def postprocess_replayssm_blocked_kernel(
    idx_mapping,
    query_metadata,
    num_computed_tokens,
    num_accepted_tokens,
    is_prefilling,
    live_cols,
    block_table_ptrs,
    tracker_start_ptrs,
    tracker_committed_ptrs,
    src_slots_ptrs,
    dst_slots_ptrs,
    plan_ring_start,
    plan_flush_count,
    active_request_indices,
    block_table_strides,
    num_layers,
    num_reqs,
    MAX_NUM_REQS: tl.constexpr,
    MAMBA_BLOCK_SIZE: tl.constexpr,
    LOGICAL_WINDOW: tl.constexpr,
    RING_BUFFER_LEN: tl.constexpr,
    PAD_SLOT_ID: tl.constexpr,
    QUERY_METADATA_IS_CUMULATIVE: tl.constexpr,
    NUM_COMPUTED_IS_POST_STEP: tl.constexpr,
    HAS_IDX_MAPPING: tl.constexpr,
    MATERIALIZE_PREFIXES: tl.constexpr,
    LIVE_COL_IS_ZERO: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
    COMPACT: tl.constexpr,
    COMPACT_BLOCK: tl.constexpr,
) -> None:
    """Record one finished step of rows ``[b * ROWS_PER_PROGRAM, (b + 1) * ROWS_PER_PROGRAM)``
    below ``num_reqs`` (``b = program_id(0)``) in group ``program_id(1)``.

    Grid: ``(cdiv(num_reqs, ROWS_PER_PROGRAM) + COMPACT, groups)``.
    Postconditions: those of ``_postprocess_replayssm_kernel`` for every row
    below ``num_reqs``; with ``COMPACT`` (``COMPACT_BLOCK`` a power of two not
    below ``MAX_NUM_REQS``, trackers in range), also those of
    ``_compact_replayssm_requests_kernel`` run after the launch.
    """
    group = tl.program_id(1)
    first_row = tl.program_id(0) * ROWS_PER_PROGRAM
    table = _i32_table(block_table_ptrs, group)
    stride = tl.load(block_table_strides + group)
    if first_row < num_reqs:
        rows = first_row + tl.arange(0, ROWS_PER_PROGRAM)
        launched = rows < num_reqs
        table_rows = table + rows * stride
        ring_start_of = _i32_table(tracker_start_ptrs, group)
        committed_of = _i32_table(tracker_committed_ptrs, group)
        (real, step_len, pos_before, pos_after, n_accepted, is_prefill, live_col, live_slot,
         has_live, bias, target_col, publish_wanted) = _decode_rows(
            rows, launched, idx_mapping, query_metadata, num_computed_tokens,
            num_accepted_tokens, is_prefilling, live_cols, table_rows,
            MAMBA_BLOCK_SIZE, PAD_SLOT_ID, QUERY_METADATA_IS_CUMULATIVE,
            NUM_COMPUTED_IS_POST_STEP, HAS_IDX_MAPPING, MATERIALIZE_PREFIXES, LIVE_COL_IS_ZERO,
        )
        target_slot = tl.load(table_rows + target_col, mask=publish_wanted, other=PAD_SLOT_ID)
        publish = publish_wanted & (target_slot != PAD_SLOT_ID)

        if MATERIALIZE_PREFIXES:
            layer_src = _i32_table(src_slots_ptrs, group)
            layer_dst = _i32_table(dst_slots_ptrs, group)
            src_value = tl.where(publish, live_slot, PAD_SLOT_ID)
            dst_value = tl.where(publish, target_slot, PAD_SLOT_ID)
            for layer in range(tl.load(num_layers + group)):
                entry = layer * MAX_NUM_REQS + tl.where(launched, rows, 0)
                tl.store(layer_src + entry, src_value, mask=real)
                tl.store(layer_dst + entry, dst_value, mask=real)

        prefill = real & is_prefill
        decode = real & ~is_prefill & has_live
        # The decode reads come before the prefill resets, as in the spec.
        start_prev = tl.load(ring_start_of + live_slot, mask=decode, other=0)
        committed_prev = tl.load(committed_of + live_slot, mask=decode, other=0)

        if MATERIALIZE_PREFIXES:
            # Every block a prefill chunk touched restarts its trackers; the
            # loop runs to the widest chunk of the block, each row masked to its own.
            col_lo = pos_before // MAMBA_BLOCK_SIZE
            col_hi = tl.maximum(tl.cdiv(pos_after, MAMBA_BLOCK_SIZE) - 1, 0)
            span = tl.where(prefill, col_hi - col_lo + 1, 0)
            for k in tl.range(0, tl.max(span, axis=0)):
                touched = k < span
                written = tl.load(table_rows + col_lo + k, mask=touched, other=PAD_SLOT_ID)
                resets = touched & (written != PAD_SLOT_ID)
                tl.store(ring_start_of + written, 0, mask=resets)
                tl.store(committed_of + written, 0, mask=resets)
        else:
            tl.store(ring_start_of + live_slot, 0, mask=prefill & has_live)
            tl.store(committed_of + live_slot, 0, mask=prefill & has_live)

        folds = committed_prev + step_len > LOGICAL_WINDOW
        start_new = tl.where(folds, (start_prev + committed_prev) % RING_BUFFER_LEN, start_prev)
        committed_new = tl.where(folds, n_accepted, committed_prev + n_accepted)
        tl.store(ring_start_of + live_slot, start_new, mask=decode)
        tl.store(committed_of + live_slot, committed_new, mask=decode)

        decode_publish = decode & publish_wanted
        copy_publish = prefill & publish_wanted & (live_col != target_col)
        replay_rows = bias + 1 + tl.where(folds, 0, committed_prev)
        flush = tl.where(decode_publish, replay_rows, tl.where(copy_publish, 0, -1))

        # Publishing makes the destination canonical, after the live update.
        tl.store(ring_start_of + target_slot, 0, mask=publish)
        tl.store(committed_of + target_slot, 0, mask=publish)

        # The plan is shared by all groups (equal specs give equal
        # transitions), so exactly one group writes it.
        if group == 0:
            tl.store(plan_ring_start + rows, tl.where(decode_publish, start_new, 0), mask=launched)
            tl.store(plan_flush_count + rows, flush, mask=launched)
    elif COMPACT:
        if group == 0:
            # The extra row block: the work list, from read-only data.
            rows = tl.arange(0, COMPACT_BLOCK)
            launched = rows < num_reqs
            (real, step_len, pos_before, pos_after, n_accepted, is_prefill, live_col, live_slot,
             has_live, bias, target_col, publish_wanted) = _decode_rows(
                rows, launched, idx_mapping, query_metadata, num_computed_tokens,
                num_accepted_tokens, is_prefilling, live_cols, table + rows * stride,
                MAMBA_BLOCK_SIZE, PAD_SLOT_ID, QUERY_METADATA_IS_CUMULATIVE,
                NUM_COMPUTED_IS_POST_STEP, HAS_IDX_MAPPING, MATERIALIZE_PREFIXES, LIVE_COL_IS_ZERO,
            )
            publishes = publish_wanted & (~is_prefill | (live_col != target_col))
            selected = publishes.to(tl.int32)
            position = tl.cumsum(selected, axis=0) - selected
            total = tl.sum(selected, axis=0)
            inside = rows < MAX_NUM_REQS
            tl.store(active_request_indices + position, rows, mask=inside & publishes)
            tl.store(active_request_indices + rows, -1, mask=inside & (rows >= total))


DEFAULT_ROWS_PER_PROGRAM = 128
"""Rows per program unless the context is told otherwise: the fastest of the
measured choices at every size on the H200 (``docs/gpu.md``; with 4 warps the
work-list program's scan over 1024 rows stays short)."""


def num_warps_for(rows_per_program: int) -> int:
    """Warps per program: one per 32 rows, between 1 and 8."""
    return max(1, min(8, rows_per_program // 32))
