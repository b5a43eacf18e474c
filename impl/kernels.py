"""Triton kernels of the ReplaySSM worker-side state lifecycle.

Four kernels with the reference design's names, parameter order and
compile-time parameters:

* ``mamba_state_copy_boundary`` -- the block-boundary arithmetic (a helper).
* ``_postprocess_replayssm_kernel`` -- commit one step into the trackers and
  write the materialization plan, one program per (batch row, cache group).
* ``_compact_replayssm_requests_kernel`` -- list the rows with an active plan.
* ``_reset_new_replayssm_slots_kernel`` -- move a request's trackers when its
  live block-table column changes.

Every per-group table (block table, trackers, plan slot tables) reaches the
kernels as an int64 address in a pointer table, so the same source runs
compiled on CUDA and, under ``TRITON_INTERPRET=1``, on CPU tensors whose tables
hold host addresses.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _i32_table(address_table, group):
    """Return the int32 table whose address is entry ``group`` of ``address_table``."""
    return tl.load(address_table + group).to(tl.pointer_type(tl.int32))


@triton.jit
def mamba_state_copy_boundary(
    num_tokens_running_state,
    new_num_computed,
    block_size: tl.constexpr,
):
    """Publishing decision for one step.

    Returns ``(needs_copy, accept_token_bias, dest_block_idx)`` where, with
    ``aligned`` the last block boundary at or below ``new_num_computed``:
    ``needs_copy`` is ``aligned >= num_tokens_running_state``,
    ``accept_token_bias`` is ``aligned - num_tokens_running_state`` and
    ``dest_block_idx`` is the block-table column that ends at ``aligned``
    (``-1`` when ``aligned`` is 0).
    """
    num_full_blocks = new_num_computed // block_size
    boundary_pos = num_full_blocks * block_size
    return (
        boundary_pos >= num_tokens_running_state,
        boundary_pos - num_tokens_running_state,
        num_full_blocks - 1,
    )


@triton.jit
def _postprocess_replayssm_kernel(
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
    block_table_strides,
    num_layers,
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
) -> None:
    """Record one finished step of batch row ``program_id(0)`` in group ``program_id(1)``.

    Postconditions, per row and group:

    * group 0 owns the shared per-row plan (``plan_ring_start``,
      ``plan_flush_count``); it is first cleared to ``(0, -1)``, also for
      padding rows (``idx_mapping`` entry below zero), which stop there;
    * a decode row's live slot trackers advance exactly as the FlashInfer
      decode kernel advanced its ring (checkpoint when committed rows plus this
      step's length exceed ``LOGICAL_WINDOW``);
    * a prefill row resets the trackers of every slot it wrote (align mode) or
      of its live slot (mode none);
    * in align mode, when the step reached a block boundary with a valid live
      slot, every layer of the group gets ``(live slot, destination slot)`` in
      its src/dst row (pad ids otherwise), the plan gives the ring start and
      the number of rows to replay, and the destination's trackers become
      ``(0, 0)`` (canonical), overriding any live update to the same slot.
    """
    row = tl.program_id(0)
    group = tl.program_id(1)
    table = _i32_table(block_table_ptrs, group)
    ring_start_of = _i32_table(tracker_start_ptrs, group)
    committed_of = _i32_table(tracker_committed_ptrs, group)
    layer_src = _i32_table(src_slots_ptrs, group)
    layer_dst = _i32_table(dst_slots_ptrs, group)
    table_row = table + row * tl.load(block_table_strides + group)

    # The plan is shared by all groups (equal specs give equal transitions),
    # so exactly one group clears and fills it.
    owns_plan = group == 0
    tl.store(plan_ring_start + row, 0, mask=owns_plan)
    tl.store(plan_flush_count + row, -1, mask=owns_plan)

    request = row
    if HAS_IDX_MAPPING:
        request = tl.load(idx_mapping + row)
        if request < 0:
            return

    if not QUERY_METADATA_IS_CUMULATIVE:
        step_len = tl.load(query_metadata + row)
    else:
        step_len = tl.load(query_metadata + row + 1) - tl.load(query_metadata + row)

    computed_in = tl.load(num_computed_tokens + request)
    if NUM_COMPUTED_IS_POST_STEP:
        pos_before = computed_in - step_len
    else:
        pos_before = computed_in
    is_prefill = tl.load(is_prefilling + row)
    n_accepted = tl.maximum(tl.load(num_accepted_tokens + request), 1)

    if NUM_COMPUTED_IS_POST_STEP:
        decode_after = computed_in
    else:
        decode_after = pos_before + n_accepted
    pos_after = tl.where(is_prefill, pos_before + step_len, decode_after)
    # First position this step may publish at: a prefill only at its end, a
    # decode anywhere after the pre-step position.
    running_pos = tl.where(is_prefill, pos_after, pos_after - n_accepted + 1)
    at_boundary, bias, target_col = mamba_state_copy_boundary(
        running_pos, pos_after, MAMBA_BLOCK_SIZE
    )

    if LIVE_COL_IS_ZERO:
        live_col = 0
    else:
        live_col = tl.load(live_cols + request)
    live_col_ok = live_col >= 0
    live_slot = tl.load(table_row + live_col, mask=live_col_ok, other=PAD_SLOT_ID)
    has_live = live_col_ok & (live_slot != PAD_SLOT_ID)
    publish_wanted = MATERIALIZE_PREFIXES & has_live & at_boundary & (target_col >= 0)
    target_slot = tl.load(table_row + target_col, mask=publish_wanted, other=PAD_SLOT_ID)
    # A null destination column means "no slot here": nothing to publish.
    publish = publish_wanted & (target_slot != PAD_SLOT_ID)

    if MATERIALIZE_PREFIXES:
        # One (src, dst) entry per layer of this group; the entries of layer
        # ``k`` for this row sit ``k * MAX_NUM_REQS`` past the group's row.
        src_value = tl.where(publish, live_slot, PAD_SLOT_ID)
        dst_value = tl.where(publish, target_slot, PAD_SLOT_ID)
        for layer in range(tl.load(num_layers + group)):
            entry = layer * MAX_NUM_REQS + row
            tl.store(layer_src + entry, src_value)
            tl.store(layer_dst + entry, dst_value)

    if is_prefill:
        if MATERIALIZE_PREFIXES:
            # Every block this chunk touched now holds a prefill-written state
            # with an empty ring and may later be another request's live
            # source, so the trackers of all of them restart.
            col_lo = pos_before // MAMBA_BLOCK_SIZE
            col_hi = tl.maximum(tl.cdiv(pos_after, MAMBA_BLOCK_SIZE) - 1, 0)
            for col in tl.range(col_lo, col_hi + 1):
                written = tl.load(table_row + col)
                real = written != PAD_SLOT_ID
                tl.store(ring_start_of + written, 0, mask=real)
                tl.store(committed_of + written, 0, mask=real)
        else:
            # Without prefix caching a request only ever owns its live column.
            tl.store(ring_start_of + live_slot, 0, mask=has_live)
            tl.store(committed_of + live_slot, 0, mask=has_live)
        if publish_wanted & (live_col != target_col):
            # The chunk ended on the boundary: the live state is exact, so the
            # plan is a plain copy (zero replayed rows) into the other slot.
            tl.store(plan_flush_count + row, 0, mask=owns_plan)
    elif has_live:
        start_prev = tl.load(ring_start_of + live_slot)
        committed_prev = tl.load(committed_of + live_slot)
        # Mirror of the decode kernel: the step checkpoints when its rows no
        # longer fit behind the committed ones inside the logical window.
        folds = committed_prev + step_len > LOGICAL_WINDOW
        start_new = tl.where(folds, (start_prev + committed_prev) % RING_BUFFER_LEN, start_prev)
        committed_new = tl.where(folds, n_accepted, committed_prev + n_accepted)
        tl.store(ring_start_of + live_slot, start_new)
        tl.store(committed_of + live_slot, committed_new)
        if publish_wanted:
            replay_rows = bias + 1 + tl.where(folds, 0, committed_prev)
            tl.store(plan_ring_start + row, start_new, mask=owns_plan)
            tl.store(plan_flush_count + row, replay_rows, mask=owns_plan)

    # Runs last on purpose: when the destination is the live slot itself, the
    # canonical (0, 0) replaces the live update made above.
    tl.store(ring_start_of + target_slot, 0, mask=publish)
    tl.store(committed_of + target_slot, 0, mask=publish)


@triton.jit(do_not_specialize=["num_reqs"])
def _compact_replayssm_requests_kernel(
    plan_flush_count,
    active_request_indices,
    num_reqs,
    MAX_NUM_REQS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
) -> None:
    """Fill ``active_request_indices`` for the materialize call (one program).

    Afterwards its first entries are, in increasing order, the rows below
    ``num_reqs`` whose ``plan_flush_count`` is non-negative, and every other
    entry up to ``MAX_NUM_REQS`` is ``-1``. ``BLOCK_SIZE`` is a power of two
    not below ``MAX_NUM_REQS``.
    """
    lanes = tl.arange(0, BLOCK_SIZE)
    inside = lanes < MAX_NUM_REQS
    flush = tl.load(plan_flush_count + lanes, mask=inside, other=-1)
    selected = ((lanes < num_reqs) & (flush >= 0)).to(tl.int32)
    # Exclusive prefix count = output position of each selected row.
    position = tl.cumsum(selected, axis=0) - selected
    total = tl.sum(selected, axis=0)
    tl.store(active_request_indices + position, lanes, mask=inside & (selected != 0))
    tl.store(active_request_indices + lanes, -1, mask=inside & (lanes >= total))


@triton.jit
def _reset_new_replayssm_slots_kernel(
    idx_mapping,
    src_cols,
    dst_cols,
    block_table_ptrs,
    tracker_start_ptrs,
    tracker_committed_ptrs,
    block_table_strides,
    PAD_SLOT_ID: tl.constexpr,
    HAS_IDX_MAPPING: tl.constexpr,
) -> None:
    """Carry trackers from a request's old live column to its new one.

    For batch row ``program_id(0)`` in group ``program_id(1)``: when the
    destination column holds a real slot that differs from the source column's
    slot, the destination's trackers become the source slot's trackers, or
    ``(0, 0)`` when the source column is negative or holds the pad id. A
    padding row, a negative or null destination, or equal slots change nothing.
    """
    row = tl.program_id(0)
    group = tl.program_id(1)
    table_row = _i32_table(block_table_ptrs, group) + row * tl.load(
        block_table_strides + group
    )
    ring_start_of = _i32_table(tracker_start_ptrs, group)
    committed_of = _i32_table(tracker_committed_ptrs, group)

    if HAS_IDX_MAPPING:
        request = tl.load(idx_mapping + row)
    else:
        request = row
    real_row = request >= 0

    to_col = tl.load(dst_cols + request, mask=real_row, other=-1)
    to_ok = real_row & (to_col >= 0)
    to_slot = tl.load(table_row + to_col, mask=to_ok, other=PAD_SLOT_ID)
    to_ok = to_ok & (to_slot != PAD_SLOT_ID)

    from_col = tl.load(src_cols + request, mask=real_row, other=-1)
    from_ok = real_row & (from_col >= 0)
    from_slot = tl.load(table_row + from_col, mask=from_ok, other=PAD_SLOT_ID)
    from_ok = from_ok & (from_slot != PAD_SLOT_ID)

    moves = to_ok & ((from_slot != to_slot) | ~from_ok)
    carried_start = tl.load(ring_start_of + from_slot, mask=from_ok, other=0)
    carried_committed = tl.load(committed_of + from_slot, mask=from_ok, other=0)
    tl.store(ring_start_of + to_slot, carried_start, mask=moves)
    tl.store(committed_of + to_slot, carried_committed, mask=moves)
