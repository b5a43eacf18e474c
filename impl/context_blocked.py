"""``ReplaySSMModelContext`` whose postprocess runs the row-blocked kernel.

Same contract and buffers as :class:`replayssm.impl.context.ReplaySSMModelContext`;
only the postprocess launch differs: ``rows_per_program`` batch rows per
program (``kernels_blocked``), and, when one program holds every row, the
compaction inside the same launch (one launch per step instead of two).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from .context import NULL_BLOCK_ID, ReplaySSMModelContext
from .kernels_blocked import (
    _postprocess_replayssm_blocked_kernel,
    default_rows_per_program,
    num_warps_for,
)
from .validation import check_int_range, check_postprocess


@dataclass
class RowBlockedModelContext(ReplaySSMModelContext):
    """``rows_per_program``: a power of two, or None for
    :func:`default_rows_per_program` of ``max_num_reqs``."""

    rows_per_program: int | None = None

    @property
    def rows_block(self) -> int:
        """The row block of each program (a power of two)."""
        rows = self.rows_per_program or default_rows_per_program(self.max_num_reqs)
        check_int_range("rows_per_program", rows, 1)
        if rows & (rows - 1):
            raise ValueError(f"rows_per_program: must be a power of two, got {rows}")
        return rows

    @property
    def fuses_compaction(self) -> bool:
        """Whether one program holds every row, so the launch also compacts."""
        return self.rows_block >= self.max_num_reqs

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
        """As :meth:`ReplaySSMModelContext.postprocess`, in one launch when
        :attr:`fuses_compaction`."""
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
        compact = self.materialize_prefixes and self.fuses_compaction
        grid = (triton.cdiv(num_reqs, rows), len(self.block_tables))
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
            ROWS_PER_PROGRAM=rows, COMPACT=compact, num_warps=num_warps_for(rows),
        )
        if self.materialize_prefixes:
            if not compact:
                self.compact(num_reqs)
            self._materialize()
