"""The facade mirrors the reference module's public names and kernel signatures."""

from __future__ import annotations

import inspect

from replayssm.impl import replayssm_utils as facade

# Parameter lists as they appear in the reference design (vLLM's replayssm_utils).
REFERENCE_PARAMS = {
    "mamba_state_copy_boundary": ["num_tokens_running_state", "new_num_computed", "block_size"],
    "_compact_replayssm_requests_kernel": [
        "plan_flush_count", "active_request_indices", "num_reqs", "MAX_NUM_REQS", "BLOCK_SIZE"],
    "_reset_new_replayssm_slots_kernel": [
        "idx_mapping", "src_cols", "dst_cols", "block_table_ptrs", "tracker_start_ptrs",
        "tracker_committed_ptrs", "block_table_strides", "PAD_SLOT_ID", "HAS_IDX_MAPPING"],
    "_postprocess_replayssm_kernel": [
        "idx_mapping", "query_metadata", "num_computed_tokens", "num_accepted_tokens",
        "is_prefilling", "live_cols", "block_table_ptrs", "tracker_start_ptrs",
        "tracker_committed_ptrs", "src_slots_ptrs", "dst_slots_ptrs", "plan_ring_start",
        "plan_flush_count", "block_table_strides", "num_layers", "MAX_NUM_REQS",
        "MAMBA_BLOCK_SIZE", "LOGICAL_WINDOW", "RING_BUFFER_LEN", "PAD_SLOT_ID",
        "QUERY_METADATA_IS_CUMULATIVE", "NUM_COMPUTED_IS_POST_STEP", "HAS_IDX_MAPPING",
        "MATERIALIZE_PREFIXES", "LIVE_COL_IS_ZERO"],
}


def test_public_names() -> None:
    for name in ("ReplaySSMModelContext", "initialize_replayssm_ring_trackers",
                 "get_replayssm_block_copy_tensors", "mamba_state_copy_boundary",
                 "_postprocess_replayssm_kernel", "_compact_replayssm_requests_kernel",
                 "_reset_new_replayssm_slots_kernel", "NULL_BLOCK_ID", "_load_replayssm_materialize"):
        assert hasattr(facade, name), name
    assert facade.NULL_BLOCK_ID == 0
    assert facade._reinterpret_u64_as_i64((1 << 64) - 8) == -8


def test_kernel_signatures_match_reference() -> None:
    for name, params in REFERENCE_PARAMS.items():
        kernel = getattr(facade, name)
        assert list(kernel.arg_names) == params, name
        constexprs = [p for p in params if p.isupper() or p == "block_size"]
        signature = inspect.signature(kernel.fn)
        for p in constexprs:
            assert "constexpr" in str(signature.parameters[p].annotation), (name, p)
    # The interpreter keeps the decorator's keyword arguments, the compiler
    # the resolved parameter list.
    compact = facade._compact_replayssm_requests_kernel
    if hasattr(compact, "do_not_specialize"):
        assert list(compact.do_not_specialize) in (["num_reqs"], [2])
    else:
        assert compact.kwargs["do_not_specialize"] == ["num_reqs"]


def test_context_entry_point_signatures() -> None:
    ctx = facade.ReplaySSMModelContext
    assert list(inspect.signature(ctx.create).parameters) == ["grouped", "max_num_reqs"]
    assert list(inspect.signature(ctx.reset_new_slots).parameters) == [
        "self", "idx_mapping", "src_cols", "dst_cols", "num_reqs"]
    assert list(inspect.signature(ctx.postprocess).parameters) == [
        "self", "idx_mapping", "query_metadata", "query_metadata_is_cumulative",
        "num_computed_tokens", "num_computed_is_post_step", "num_accepted_tokens",
        "is_prefilling", "live_cols", "num_reqs"]
    fields = list(facade._ReplaySSMMaterializeTables._fields)
    assert fields[0] == "state_ptrs" and fields[-1] == "state_scale_slot_strides" and len(fields) == 11
