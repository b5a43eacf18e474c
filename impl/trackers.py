"""Binding of the per-group ReplaySSM trackers, and their block-copy list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .layers import KVCacheConfig, MambaBase, extract_layer_index
from .validation import check_forward_context, check_kv_cache_config


def initialize_replayssm_ring_trackers(
    kv_cache_config: KVCacheConfig,
    forward_context: Mapping[str, Any],
) -> None:
    """Give every ReplaySSM cache group one shared, slot-sized tracker pair.

    For each group of ``kv_cache_config`` with at least one ReplaySSM layer in
    ``forward_context``: all of its ReplaySSM layers end up holding the same two
    int32 tensors (``_replayssm_ring_start``, ``_replayssm_prev_num_accepted``)
    with one entry per slot of the group's first such layer, on that layer's
    device. When the layers already share trackers at least that large on that
    device, the new ones are prefixes of the old ones (same addresses, values
    kept: captured CUDA graphs stay valid); otherwise they are fresh zeros.
    Exactly one layer per group, the one with the lowest layer index, has
    ``_plans_replayssm_decode`` set. Layers that are not ReplaySSM layers and
    names missing from ``forward_context`` are ignored.
    """
    check_kv_cache_config(kv_cache_config)
    check_forward_context(forward_context)
    for group_spec in kv_cache_config.kv_cache_groups:
        names = [
            name
            for name in group_spec.layer_names
            if isinstance(forward_context.get(name), MambaBase)
            and forward_context[name].use_replayssm
        ]
        if not names:
            continue
        layers = [forward_context[n] for n in names]
        conv_state = layers[0].kv_cache[0]
        num_slots, device = conv_state.shape[0], conv_state.device
        old_start = layers[0]._replayssm_ring_start
        old_committed = layers[0]._replayssm_prev_num_accepted
        reusable = all(
            t.numel() >= num_slots and t.device == device for t in (old_start, old_committed)
        ) and all(
            layer._replayssm_ring_start is old_start
            and layer._replayssm_prev_num_accepted is old_committed
            for layer in layers
        )
        if reusable:
            ring_start, committed = old_start[:num_slots], old_committed[:num_slots]
        else:
            ring_start = torch.zeros(num_slots, dtype=torch.int32, device=device)
            committed = torch.zeros_like(ring_start)
        # The layer that runs first in a step (lowest index) plans the group's decode.
        planner = min(names, key=extract_layer_index)
        for name, layer in zip(names, layers):
            layer._replayssm_ring_start, layer._replayssm_prev_num_accepted = ring_start, committed
            layer._plans_replayssm_decode = name == planner


def get_replayssm_block_copy_tensors(
    forward_context: Mapping[str, Any],
) -> list[torch.Tensor]:
    """Tracker tensors the scheduler's block copies must also copy.

    One ``(ring_start, prev_num_accepted)`` pair per FlashInfer ReplaySSM layer,
    in ``forward_context`` order; layers of one group repeat the same shared pair.
    """
    check_forward_context(forward_context)
    return [
        tracker
        for layer in forward_context.values()
        if isinstance(layer, MambaBase) and layer.use_flashinfer_replayssm
        for tracker in (layer._replayssm_ring_start, layer._replayssm_prev_num_accepted)
    ]
