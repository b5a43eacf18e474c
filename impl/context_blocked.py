"""``ReplaySSMModelContext`` whose postprocess runs the row-blocked kernel.

Same contract and buffers as :class:`replayssm.impl.context.ReplaySSMModelContext`;
only the postprocess launch differs: ``rows_per_program`` batch rows per
program (``kernels_blocked``), and in align mode the compaction in the same
launch (one launch per step instead of two).
"""

from __future__ import annotations

from dataclasses import dataclass

import triton

from .context import NULL_BLOCK_ID, ReplaySSMModelContext, StepInputs
from .kernels_blocked import DEFAULT_ROWS_PER_PROGRAM, postprocess_replayssm_blocked_kernel, num_warps_for
from .validation import check_int_range


@dataclass
class RowBlockedModelContext(ReplaySSMModelContext):
    """``rows_per_program``: the batch rows of each program, a power of two."""

    rows_per_program: int = DEFAULT_ROWS_PER_PROGRAM

    @property
    def rows_block(self) -> int:
        """``rows_per_program``, checked."""
        rows = check_int_range("rows_per_program", self.rows_per_program, 1)
        if rows & (rows - 1):
            raise ValueError(f"rows_per_program: must be a power of two, got {rows}")
        return rows

    def _commit_and_plan(self, step: StepInputs) -> None:
        """The commit, the plan and (align mode) the work list in one launch."""
        rows = self.rows_block
        compact = self.materialize_prefixes
        grid = (triton.cdiv(step.num_reqs, rows) + compact, len(self.block_tables))
        postprocess_replayssm_blocked_kernel[grid](
            step.idx_mapping, step.query_metadata, step.num_computed_tokens, step.num_accepted_tokens,
            step.is_prefilling, step.live_cols,
            self.block_table_ptrs, self.ring_start_ptrs, self.num_committed_ptrs,
            self.src_slots_ptrs, self.dst_slots_ptrs,
            self.plan_ring_start, self.plan_flush_count, self.active_request_indices,
            self.block_table_strides, self.num_layers, step.num_reqs,
            MAX_NUM_REQS=self.max_num_reqs, MAMBA_BLOCK_SIZE=self.mamba_block_size,
            LOGICAL_WINDOW=self.logical_window, RING_BUFFER_LEN=self.ring_buffer_len,
            PAD_SLOT_ID=NULL_BLOCK_ID,
            QUERY_METADATA_IS_CUMULATIVE=step.query_metadata_is_cumulative,
            NUM_COMPUTED_IS_POST_STEP=step.num_computed_is_post_step,
            HAS_IDX_MAPPING=step.idx_mapping is not None,
            MATERIALIZE_PREFIXES=self.materialize_prefixes, LIVE_COL_IS_ZERO=step.live_cols is None,
            ROWS_PER_PROGRAM=rows, COMPACT=compact,
            COMPACT_BLOCK=triton.next_power_of_2(self.max_num_reqs), num_warps=num_warps_for(rows),
        )
