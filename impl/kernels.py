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
    """Publishing decision for one step (``spec/boundary.py``, where the
    parameters are ``running_pos`` and ``new_computed``; these are the
    reference design's names).

    Returns ``(needs_copy, bias, dst_col)`` where, with ``aligned`` the last
    block boundary at or below ``new_num_computed``: ``needs_copy`` is
    ``aligned >= num_tokens_running_state``, ``bias`` is
    ``aligned - num_tokens_running_state`` and ``dst_col`` is the block-table
    column that ends at ``aligned`` (``-1`` when ``aligned`` is 0).
    """
    aligned = (new_num_computed // block_size) * block_size
    return (
        aligned >= num_tokens_running_state,
        aligned - num_tokens_running_state,
        aligned // block_size - 1,
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

    Postconditions, per row and group (``spec/postprocess.py`` states them
    with the same names, line by line):

    * group 0 owns the shared per-row plan (``plan_ring_start``,
      ``plan_flush_count``); it is first cleared to ``(0, -1)``, also for
      padding rows (``idx_mapping`` entry below zero), which stop there;
    * a decode row's live slot trackers advance exactly as the FlashInfer
      decode kernel advanced its ring (checkpoint when committed rows plus this
      step's query length exceed ``LOGICAL_WINDOW``);
    * a prefill row resets the trackers of every slot it wrote (align mode) or
      of its live slot (mode none);
    * in align mode, when the step reached a block boundary with a valid live
      slot, every layer of the group gets ``(live slot, destination slot)`` in
      its src/dst row (pad ids otherwise), the plan gives the ring start and
      the number of rows to replay (``plan_flush``), and the destination's
      trackers become ``(0, 0)`` (canonical), overriding any live update to
      the same slot.
    """
    batch = tl.program_id(0)
    group = tl.program_id(1)
    block_table = _i32_table(block_table_ptrs, group)
    ring_start = _i32_table(tracker_start_ptrs, group)
    num_committed = _i32_table(tracker_committed_ptrs, group)
    src_slots = _i32_table(src_slots_ptrs, group)
    dst_slots = _i32_table(dst_slots_ptrs, group)
    block_table_row = block_table + batch * tl.load(block_table_strides + group)

    # The plan is shared by all groups (equal specs give equal transitions),
    # so exactly one group clears and fills it.
    writes_plan = group == 0
    tl.store(plan_ring_start + batch, 0, mask=writes_plan)
    tl.store(plan_flush_count + batch, -1, mask=writes_plan)

    req = batch
    if HAS_IDX_MAPPING:
        req = tl.load(idx_mapping + batch)
        if req < 0:
            return

    if QUERY_METADATA_IS_CUMULATIVE:
        query_len = tl.load(query_metadata + batch + 1) - tl.load(query_metadata + batch)
    else:
        query_len = tl.load(query_metadata + batch)

    computed = tl.load(num_computed_tokens + req)
    if NUM_COMPUTED_IS_POST_STEP:
        computed_before = computed - query_len
    else:
        computed_before = computed
    prefilling = tl.load(is_prefilling + batch) != 0
    accepted = tl.maximum(tl.load(num_accepted_tokens + req), 1)
    if NUM_COMPUTED_IS_POST_STEP:
        decoded_after = computed
    else:
        decoded_after = computed_before + accepted
    computed_after = tl.where(prefilling, computed_before + query_len, decoded_after)
    # First position this step may publish at: a prefill only at its end, a
    # decode anywhere after the pre-step position.
    running_pos = tl.where(prefilling, computed_after, computed_after - accepted + 1)
    needs_copy, bias, dst_col = mamba_state_copy_boundary(
        running_pos, computed_after, MAMBA_BLOCK_SIZE
    )

    if LIVE_COL_IS_ZERO:
        live_col = 0
    else:
        live_col = tl.load(live_cols + req)
    valid_live_col = live_col >= 0
    live_slot = tl.load(block_table_row + live_col, mask=valid_live_col, other=PAD_SLOT_ID)
    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)
    wants_materialize = MATERIALIZE_PREFIXES & valid_live & needs_copy & (dst_col >= 0)
    dst_slot = tl.load(block_table_row + dst_col, mask=wants_materialize, other=PAD_SLOT_ID)
    # A null destination column means "no slot here": nothing to publish.
    materialize = wants_materialize & (dst_slot != PAD_SLOT_ID)

    if MATERIALIZE_PREFIXES:
        # One (src, dst) entry per layer of this group; the entries of layer
        # ``k`` for this row sit ``k * MAX_NUM_REQS`` past the group's row.
        for layer in range(tl.load(num_layers + group)):
            entry = layer * MAX_NUM_REQS + batch
            tl.store(src_slots + entry, tl.where(materialize, live_slot, PAD_SLOT_ID))
            tl.store(dst_slots + entry, tl.where(materialize, dst_slot, PAD_SLOT_ID))

    if prefilling:
        if MATERIALIZE_PREFIXES:
            # Every block this chunk touched now holds a prefill-written state
            # with an empty ring and may later be another request's live
            # source, so the trackers of all of them restart.
            first_col = computed_before // MAMBA_BLOCK_SIZE
            last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)
            for col in tl.range(first_col, last_col + 1):
                slot = tl.load(block_table_row + col)
                tl.store(ring_start + slot, 0, mask=slot != PAD_SLOT_ID)
                tl.store(num_committed + slot, 0, mask=slot != PAD_SLOT_ID)
        else:
            # Without prefix caching a request only ever owns its live column.
            tl.store(ring_start + live_slot, 0, mask=valid_live)
            tl.store(num_committed + live_slot, 0, mask=valid_live)
        if wants_materialize & (live_col != dst_col):
            # The chunk ended on the boundary: the live state is exact, so the
            # plan is a plain copy (zero replayed rows) into the other slot.
            tl.store(plan_flush_count + batch, 0, mask=writes_plan)
    elif valid_live:
        old_start = tl.load(ring_start + live_slot)
        old_committed = tl.load(num_committed + live_slot)
        # Mirror of the decode kernel: the step checkpoints when its rows no
        # longer fit behind the committed ones inside the logical window.
        checkpointed = old_committed + query_len > LOGICAL_WINDOW
        next_start = tl.where(
            checkpointed, (old_start + old_committed) % RING_BUFFER_LEN, old_start
        )
        next_committed = tl.where(checkpointed, accepted, old_committed + accepted)
        tl.store(ring_start + live_slot, next_start)
        tl.store(num_committed + live_slot, next_committed)
        if wants_materialize:
            plan_flush = bias + 1 + tl.where(checkpointed, 0, old_committed)
            tl.store(plan_ring_start + batch, next_start, mask=writes_plan)
            tl.store(plan_flush_count + batch, plan_flush, mask=writes_plan)

    # Runs last on purpose: when the destination is the live slot itself, the
    # canonical (0, 0) replaces the live update made above.
    tl.store(ring_start + dst_slot, 0, mask=materialize)
    tl.store(num_committed + dst_slot, 0, mask=materialize)


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
    entry up to ``MAX_NUM_REQS`` is ``-1`` (``spec/compaction.py``).
    ``BLOCK_SIZE`` is a power of two not below ``MAX_NUM_REQS``.
    """
    lane = tl.arange(0, BLOCK_SIZE)
    in_capacity = lane < MAX_NUM_REQS
    flush = tl.load(plan_flush_count + lane, mask=in_capacity, other=-1)
    is_active = in_capacity & (lane < num_reqs) & (flush >= 0)
    # Inclusive running count of active lanes: an active lane lands at count - 1.
    running_count = tl.cumsum(is_active.to(tl.int32), axis=0)
    count = tl.sum(is_active.to(tl.int32), axis=0)
    tl.store(active_request_indices + running_count - 1, lane, mask=is_active)
    tl.store(active_request_indices + lane, -1, mask=in_capacity & (lane >= count))


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
    padding row, a negative or null destination, or equal slots change nothing
    (``spec/migration.py``).
    """
    batch = tl.program_id(0)
    group = tl.program_id(1)
    block_table_row = _i32_table(block_table_ptrs, group) + batch * tl.load(
        block_table_strides + group
    )
    ring_start = _i32_table(tracker_start_ptrs, group)
    num_committed = _i32_table(tracker_committed_ptrs, group)

    if HAS_IDX_MAPPING:
        req = tl.load(idx_mapping + batch)
    else:
        req = batch
    valid_req = req >= 0

    dst_col = tl.load(dst_cols + req, mask=valid_req, other=-1)
    valid_dst = valid_req & (dst_col >= 0)
    dst_slot = tl.load(block_table_row + dst_col, mask=valid_dst, other=PAD_SLOT_ID)
    valid_dst = valid_dst & (dst_slot != PAD_SLOT_ID)

    src_col = tl.load(src_cols + req, mask=valid_req, other=-1)
    valid_src = valid_req & (src_col >= 0)
    src_slot = tl.load(block_table_row + src_col, mask=valid_src, other=PAD_SLOT_ID)
    valid_src = valid_src & (src_slot != PAD_SLOT_ID)

    changed = valid_dst & (~valid_src | (src_slot != dst_slot))
    start = tl.load(ring_start + src_slot, mask=valid_src, other=0)
    committed = tl.load(num_committed + src_slot, mask=valid_src, other=0)
    tl.store(ring_start + dst_slot, start, mask=changed)
    tl.store(num_committed + dst_slot, committed, mask=changed)
