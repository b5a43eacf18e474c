"""Row-blocked postprocess: many batch rows per program, compaction fused.

``_postprocess_replayssm_blocked_kernel`` computes what
``_postprocess_replayssm_kernel`` computes (same parameters and constexprs,
same final memory), but one program handles ``ROWS_PER_PROGRAM`` consecutive
batch rows of one cache group as vector lanes, statement by statement in the
spec's order (``spec/postprocess.py``, which the spec's numpy lanes run the
same way). With ``COMPACT`` the program of group 0 also writes
``active_request_indices`` from the plan it holds in registers, which is what
``_compact_replayssm_requests_kernel`` would read after the launch: only
group 0 writes the plan, so this is exact when one program holds every row
(``ROWS_PER_PROGRAM >= MAX_NUM_REQS``, a single row block).

Each plan entry is stored once with its final value (the reference clears it
first and may overwrite it); the final memory is the same.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .kernels import _i32_table, mamba_state_copy_boundary


@triton.jit(do_not_specialize=["num_reqs"])
def _postprocess_replayssm_blocked_kernel(
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
) -> None:
    """Record one finished step of rows ``[b * ROWS_PER_PROGRAM, (b + 1) * ROWS_PER_PROGRAM)``
    below ``num_reqs`` (``b = program_id(0)``) in group ``program_id(1)``.

    Postconditions: those of ``_postprocess_replayssm_kernel`` for every such
    row; with ``COMPACT`` (requires ``ROWS_PER_PROGRAM >= MAX_NUM_REQS``, a
    power of two, and a grid of one row block), also those of
    ``_compact_replayssm_requests_kernel`` run after the launch.
    """
    group = tl.program_id(1)
    rows = tl.program_id(0) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    launched = rows < num_reqs
    table = _i32_table(block_table_ptrs, group)
    ring_start_of = _i32_table(tracker_start_ptrs, group)
    committed_of = _i32_table(tracker_committed_ptrs, group)
    table_rows = table + rows * tl.load(block_table_strides + group)

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
    target_slot = tl.load(table_rows + target_col, mask=publish_wanted, other=PAD_SLOT_ID)
    publish = publish_wanted & (target_slot != PAD_SLOT_ID)

    if MATERIALIZE_PREFIXES:
        layer_src = _i32_table(src_slots_ptrs, group)
        layer_dst = _i32_table(dst_slots_ptrs, group)
        src_value = tl.where(publish, live_slot, PAD_SLOT_ID)
        dst_value = tl.where(publish, target_slot, PAD_SLOT_ID)
        for layer in range(tl.load(num_layers + group)):
            entry = layer * MAX_NUM_REQS + rows
            tl.store(layer_src + entry, src_value, mask=real)
            tl.store(layer_dst + entry, dst_value, mask=real)

    prefill = real & is_prefill
    decode = real & ~is_prefill & has_live
    # The decode reads come before the prefill resets, as in the spec.
    start_prev = tl.load(ring_start_of + live_slot, mask=decode, other=0)
    committed_prev = tl.load(committed_of + live_slot, mask=decode, other=0)

    if MATERIALIZE_PREFIXES:
        # Every block a prefill chunk touched restarts its trackers; the loop
        # runs to the widest chunk of the block, each row masked to its own.
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

    # The plan is shared by all groups (equal specs give equal transitions),
    # so exactly one group writes it.
    if group == 0:
        tl.store(plan_ring_start + rows, tl.where(decode_publish, start_new, 0), mask=launched)
        tl.store(plan_flush_count + rows, flush, mask=launched)
        if COMPACT:
            selected = (launched & (flush >= 0)).to(tl.int32)
            position = tl.cumsum(selected, axis=0) - selected
            total = tl.sum(selected, axis=0)
            inside = rows < MAX_NUM_REQS
            tl.store(active_request_indices + position, rows, mask=inside & (selected != 0))
            tl.store(active_request_indices + rows, -1, mask=inside & (rows >= total))


MAX_FUSED_ROWS = 1024
"""Largest row block the context puts in one program (and so fuses compaction for)."""


def default_rows_per_program(max_num_reqs: int) -> int:
    """One row block holding every row (compaction fused) up to
    ``MAX_FUSED_ROWS`` rows, else blocks of ``MAX_FUSED_ROWS``."""
    return min(triton.next_power_of_2(max_num_reqs), MAX_FUSED_ROWS)


def num_warps_for(rows_per_program: int) -> int:
    """Warps per program: one per 128 rows, between 1 and 8."""
    return max(1, min(8, rows_per_program // 128))
