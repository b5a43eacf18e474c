"""``ReplaySSMModelContext``: the per-model ReplaySSM plan and its launches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import triton

from .kernels import (
    _compact_replayssm_requests_kernel,
    _postprocess_replayssm_kernel,
    _reset_new_replayssm_slots_kernel,
)
from .layers import MambaSpec
from .materialize import _load_replayssm_materialize
from .pointers import i64_ptrs, i64_slot_strides
from .validation import check_create, check_int_range, check_postprocess, check_reset

# vLLM's null block: a real physical index that the kernels treat as "no slot".
NULL_BLOCK_ID = 0


class _ReplaySSMMaterializeTables(NamedTuple):
    """Per-layer address and slot-stride tables, in materialize-argument order."""

    state_ptrs: torch.Tensor
    state_slot_strides: torch.Tensor
    x_cache_ptrs: torch.Tensor
    x_cache_slot_strides: torch.Tensor
    B_cache_ptrs: torch.Tensor
    B_cache_slot_strides: torch.Tensor
    dt_cache_ptrs: torch.Tensor
    dt_cache_slot_strides: torch.Tensor
    A_ptrs: torch.Tensor
    state_scale_ptrs: torch.Tensor
    state_scale_slot_strides: torch.Tensor


class StepInputs(NamedTuple):
    """One step's postprocess inputs, checked (the parameters of :meth:`ReplaySSMModelContext.postprocess`)."""

    idx_mapping: torch.Tensor | None
    query_metadata: torch.Tensor
    query_metadata_is_cumulative: bool
    num_computed_tokens: torch.Tensor
    num_computed_is_post_step: bool
    num_accepted_tokens: torch.Tensor
    is_prefilling: torch.Tensor
    live_cols: torch.Tensor | None
    num_reqs: int


@dataclass
class ReplaySSMModelContext:
    """One replay plan shared by all cache groups, each with its own slots and trackers.

    Layers are numbered group by group (all layers of group 0 first); row ``l``
    of ``src_slots``/``dst_slots`` belongs to layer ``l``. ``plan_ring_start``,
    ``plan_flush_count`` (replay length, ``-1`` = no publish) and
    ``active_request_indices`` are per batch row and shared by all layers.
    ``materialize_backend`` overrides the materialize choice (see
    :func:`_load_replayssm_materialize`).
    """

    mixers: list[Any]
    block_tables: list[torch.Tensor]
    block_table_ptrs: torch.Tensor
    block_table_strides: torch.Tensor
    ring_start_ptrs: torch.Tensor
    num_committed_ptrs: torch.Tensor
    src_slots_ptrs: torch.Tensor
    dst_slots_ptrs: torch.Tensor
    num_layers: torch.Tensor
    materialize_tables: _ReplaySSMMaterializeTables
    src_slots: torch.Tensor
    dst_slots: torch.Tensor
    plan_ring_start: torch.Tensor
    plan_flush_count: torch.Tensor
    active_request_indices: torch.Tensor
    max_num_reqs: int
    mamba_block_size: int
    logical_window: int
    ring_buffer_len: int
    materialize_prefixes: bool
    materialize_backend: str | None = None

    @classmethod
    def create(
        cls,
        grouped: Sequence[tuple[list[Any], MambaSpec, torch.Tensor]],
        max_num_reqs: int,
    ) -> "ReplaySSMModelContext":
        """Build the context for ``(layers, spec, block_table)`` cache groups.

        Requires (``ValueError`` otherwise): at least one group, each with at
        least one layer; equal specs; equal materialization geometry (inner
        cache shapes and dtypes, A dtype, window) on one device; window in
        ``[1, 16]`` and ring length at least window + 1; bf16 x/B caches and a
        float32 dt cache; each group's layers sharing one int32 tracker pair
        with an entry per slot; int32 block tables with at least
        ``max_num_reqs >= 1`` rows. The returned plan arrays start empty
        (pad slots, no active request).
        """
        check_create(grouped, max_num_reqs)
        mixers = [mixer for layers, _, _ in grouped for mixer in layers]
        lead = mixers[0]
        spec = grouped[0][1]
        state0 = lead.kv_cache[1]
        device = state0.device
        block_tables = [entry[2] for entry in grouped]
        i32 = dict(dtype=torch.int32, device=device)
        src_slots = torch.full((len(mixers), max_num_reqs), NULL_BLOCK_ID, **i32)
        dst_slots = src_slots.clone()
        # Row of the first layer of each group inside the flat [layer, row] tables.
        group_first_layer = []
        seen = 0
        for layers, _, _ in grouped:
            group_first_layer.append(seen)
            seen += len(layers)
        no_scales = torch.zeros(len(mixers), dtype=torch.int64, device=device)
        caches = [m.kv_cache for m in mixers]
        return cls(
            mixers=mixers,
            block_tables=block_tables,
            block_table_ptrs=i64_ptrs(block_tables, device),
            block_table_strides=i64_slot_strides(block_tables, device),
            ring_start_ptrs=i64_ptrs([g[0]._replayssm_ring_start for g, _, _ in grouped], device),
            num_committed_ptrs=i64_ptrs(
                [g[0]._replayssm_prev_num_accepted for g, _, _ in grouped], device
            ),
            src_slots_ptrs=i64_ptrs([src_slots[i] for i in group_first_layer], device),
            dst_slots_ptrs=i64_ptrs([dst_slots[i] for i in group_first_layer], device),
            num_layers=torch.tensor([len(entry[0]) for entry in grouped], **i32),
            materialize_tables=_ReplaySSMMaterializeTables(
                state_ptrs=i64_ptrs([c[1] for c in caches], device),
                state_slot_strides=i64_slot_strides([c[1] for c in caches], device),
                x_cache_ptrs=i64_ptrs([c[2] for c in caches], device),
                x_cache_slot_strides=i64_slot_strides([c[2] for c in caches], device),
                B_cache_ptrs=i64_ptrs([c[4] for c in caches], device),
                B_cache_slot_strides=i64_slot_strides([c[4] for c in caches], device),
                dt_cache_ptrs=i64_ptrs([c[3] for c in caches], device),
                dt_cache_slot_strides=i64_slot_strides([c[3] for c in caches], device),
                A_ptrs=i64_ptrs([m.A for m in mixers], device),
                state_scale_ptrs=no_scales,
                state_scale_slot_strides=no_scales,
            ),
            src_slots=src_slots,
            dst_slots=dst_slots,
            plan_ring_start=torch.zeros(max_num_reqs, **i32),
            plan_flush_count=torch.full((max_num_reqs,), -1, **i32),
            active_request_indices=torch.full((max_num_reqs,), -1, **i32),
            max_num_reqs=max_num_reqs,
            mamba_block_size=spec.block_size,
            logical_window=int(lead.replayssm_buffer_len),
            ring_buffer_len=lead.kv_cache[2].shape[2],
            materialize_prefixes=spec.mamba_cache_mode == "align",
        )

    @property
    def device(self) -> torch.device:
        """Device of every table of this context."""
        return self.src_slots.device

    def materialize(self, backend: str | None = None) -> None:
        """Publish every active plan entry (all layers of all groups) in one call.

        Uses the current ``src_slots``, ``dst_slots`` and plan arrays; the
        backend is ``backend``, else ``materialize_backend``, else the automatic
        choice of :func:`_load_replayssm_materialize`.
        """
        lead = self.mixers[0]
        state, x_cache, b_cache = lead.kv_cache[1], lead.kv_cache[2], lead.kv_cache[4]
        heads = state.shape[1]
        seed, rounds = None, 0
        if lead.mamba_config.enable_stochastic_rounding:
            seed = torch.randint(0, 2**32, (1,), dtype=torch.int64, device=self.device)
            rounds = lead.mamba_config.stochastic_rounding_philox_rounds or 10
        run = _load_replayssm_materialize(backend or self.materialize_backend)
        run(
            *self.materialize_tables,
            self.src_slots, self.dst_slots,
            self.plan_ring_start, self.plan_flush_count, self.active_request_indices,
            state_dtype=state.dtype, input_dtype=x_cache.dtype, matrixA_dtype=lead.A.dtype,
            dim=state.shape[2], dstate=state.shape[3], num_heads=heads,
            heads_per_group=heads // b_cache.shape[1],
            max_window=self.logical_window, ring_buffer_len=self.ring_buffer_len,
            pad_slot_id=NULL_BLOCK_ID, rand_seed=seed, philox_rounds=rounds,
        )

    def _materialize(self) -> None:
        """Publish every active plan entry with the configured backend."""
        self.materialize()

    def reset_new_slots(
        self,
        *,
        idx_mapping: torch.Tensor | None,
        src_cols: torch.Tensor,
        dst_cols: torch.Tensor,
        num_reqs: int,
    ) -> None:
        """Move each request's trackers to its new live column, in every group.

        ``src_cols``/``dst_cols`` are block-table columns indexed by request
        (``idx_mapping[row]`` when given, else the row); see
        ``_reset_new_replayssm_slots_kernel`` for the effect.
        """
        check_reset(
            self.device, self.max_num_reqs,
            idx_mapping=idx_mapping, src_cols=src_cols, dst_cols=dst_cols, num_reqs=num_reqs,
        )
        if num_reqs == 0:
            return
        grid = (num_reqs, len(self.block_tables))
        _reset_new_replayssm_slots_kernel[grid](
            idx_mapping, src_cols, dst_cols,
            self.block_table_ptrs, self.ring_start_ptrs, self.num_committed_ptrs,
            self.block_table_strides,
            PAD_SLOT_ID=NULL_BLOCK_ID, HAS_IDX_MAPPING=idx_mapping is not None,
        )

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
        """Commit the step in every group, then (align mode) publish its boundary states.

        ``query_metadata`` holds per-row lengths, or cumulative starts when
        ``query_metadata_is_cumulative``; ``num_computed_tokens`` counts before
        the step, or after it when ``num_computed_is_post_step``; request-indexed
        inputs are read at ``idx_mapping[row]`` when it is given (negative =
        padding row); ``live_cols`` None means live column 0.
        """
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
        self._commit_and_plan(StepInputs(
            idx_mapping, query_metadata, query_metadata_is_cumulative, num_computed_tokens,
            num_computed_is_post_step, num_accepted_tokens, is_prefilling, live_cols, num_reqs,
        ))
        if self.materialize_prefixes:
            self._materialize()

    def _commit_and_plan(self, step: StepInputs) -> None:
        """The launches of :meth:`postprocess` on checked inputs (``num_reqs > 0``): the commit
        and the plan, then (align mode) the work list; the materialize is the caller's."""
        grid = (step.num_reqs, len(self.block_tables))
        has_mapping = step.idx_mapping is not None
        _postprocess_replayssm_kernel[grid](
            step.idx_mapping, step.query_metadata, step.num_computed_tokens, step.num_accepted_tokens,
            step.is_prefilling, step.live_cols,
            self.block_table_ptrs, self.ring_start_ptrs, self.num_committed_ptrs,
            self.src_slots_ptrs, self.dst_slots_ptrs,
            self.plan_ring_start, self.plan_flush_count,
            self.block_table_strides, self.num_layers,
            MAX_NUM_REQS=self.max_num_reqs, MAMBA_BLOCK_SIZE=self.mamba_block_size,
            LOGICAL_WINDOW=self.logical_window, RING_BUFFER_LEN=self.ring_buffer_len,
            PAD_SLOT_ID=NULL_BLOCK_ID,
            QUERY_METADATA_IS_CUMULATIVE=step.query_metadata_is_cumulative, HAS_IDX_MAPPING=has_mapping,
            NUM_COMPUTED_IS_POST_STEP=step.num_computed_is_post_step, LIVE_COL_IS_ZERO=step.live_cols is None,
            MATERIALIZE_PREFIXES=self.materialize_prefixes,
        )
        if self.materialize_prefixes:
            self.compact(step.num_reqs)

    def compact(self, num_reqs: int) -> None:
        """Rebuild ``active_request_indices`` from ``plan_flush_count`` for rows below ``num_reqs``."""
        check_int_range("num_reqs", num_reqs, 0, self.max_num_reqs)
        _compact_replayssm_requests_kernel[(1,)](
            self.plan_flush_count, self.active_request_indices, num_reqs,
            MAX_NUM_REQS=self.max_num_reqs, BLOCK_SIZE=triton.next_power_of_2(self.max_num_reqs),
        )
