"""``ReplaySSMModelContext`` whose postprocess runs the row-blocked kernel.

Same contract and buffers as :class:`replayssm.impl.context.ReplaySSMModelContext`;
only the postprocess launch differs: ``rows_per_program`` batch rows per
program (``kernels_blocked``), and in align mode the compaction in the same
launch (one launch per step instead of two).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from .context import NULL_BLOCK_ID, ReplaySSMModelContext
from .kernels_blocked import DEFAULT_ROWS_PER_PROGRAM, _postprocess_replayssm_blocked_kernel, num_warps_for
from .validation import check_int_range, check_postprocess


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

    def postprocess(
        self,
        *,
        idx_mapping: torch.Tensor | None,
        query_metadata: torch.Tensor,
        query_metadata_is_cumulative: bool,
        num_computed_tokens: torch.Tensor,
        num_computed_is_post_step: bool,
        num_accepted_tokens: torch.Tensor,
        is_prefilling: torch.Tensor,
        live_cols: torch.Tensor | None,
        num_reqs: int,
    ) -> None:
        """As :meth:`ReplaySSMModelContext.postprocess`; the commit, the plan
        and (align mode) the work list in one launch."""
        check_postprocess(
            self.device, self.max_num_reqs,
            idx_mapping=idx_mapping, query_metadata=query_metadata,
            query_metadata_is_cumulative=query_metadata_is_cumulative,
            num_computed_tokens=num_computed_tokens,
            num_computed_is_post_step=num_computed_is_post_step,
            num_accepted_tokens=num_accepted_tokens, is_prefilling=is_prefilling,
            live_cols=live_cols, num_reqs=num_reqs,
        )
        if num_reqs == 0:
            return
        rows = self.rows_block
        compact = self.materialize_prefixes
        grid = (triton.cdiv(num_reqs, rows) + compact, len(self.block_tables))
        _postprocess_replayssm_blocked_kernel[grid](
            idx_mapping, query_metadata, num_computed_tokens, num_accepted_tokens,
            is_prefilling, live_cols,
            self.block_table_ptrs, self.ring_start_ptrs, self.num_committed_ptrs,
            self.src_slots_ptrs, self.dst_slots_ptrs,
            self.plan_ring_start, self.plan_flush_count, self.active_request_indices,
            self.block_table_strides, self.num_layers, num_reqs,
            MAX_NUM_REQS=self.max_num_reqs, MAMBA_BLOCK_SIZE=self.mamba_block_size,
            LOGICAL_WINDOW=self.logical_window, RING_BUFFER_LEN=self.ring_buffer_len,
            PAD_SLOT_ID=NULL_BLOCK_ID,
            QUERY_METADATA_IS_CUMULATIVE=query_metadata_is_cumulative,
            NUM_COMPUTED_IS_POST_STEP=num_computed_is_post_step,
            HAS_IDX_MAPPING=idx_mapping is not None,
            MATERIALIZE_PREFIXES=self.materialize_prefixes, LIVE_COL_IS_ZERO=live_cols is None,
            ROWS_PER_PROGRAM=rows, COMPACT=compact,
            COMPACT_BLOCK=triton.next_power_of_2(self.max_num_reqs), num_warps=num_warps_for(rows),
        )
        if self.materialize_prefixes:
            self._materialize()
