"""Tracker binding and the block-copy tensor list."""

from __future__ import annotations

import pytest
import torch

from impl_builders import make_layer
from replayssm.impl.replayssm_utils import (
    KVCacheConfig,
    KVCacheGroupSpec,
    extract_layer_index,
    get_replayssm_block_copy_tensors,
    initialize_replayssm_ring_trackers,
)


def context(device: torch.device, names: list[str], slots: int = 6) -> dict:
    return {name: make_layer(device, slots) for name in names}


def test_binding_shares_sizes_and_picks_lowest_index_planner(device: torch.device) -> None:
    g0 = ["model.layers.7.mixer", "model.layers.2.mixer", "model.layers.11.mixer"]
    g1 = ["model.layers.3.mixer", "model.layers.1.attn"]
    ctx = context(device, g0 + ["model.layers.3.mixer"], slots=6)
    ctx["model.layers.1.attn"] = object()  # not a Mamba layer: ignored
    ctx["model.layers.5.mixer"] = make_layer(device, 6)
    ctx["model.layers.5.mixer"].use_replayssm = False
    config = KVCacheConfig([KVCacheGroupSpec(g0), KVCacheGroupSpec(g1 + ["model.layers.5.mixer"]),
                            KVCacheGroupSpec(["model.layers.99.mixer"])])
    initialize_replayssm_ring_trackers(config, ctx)
    first = ctx[g0[0]]
    for name in g0:
        layer = ctx[name]
        assert layer._replayssm_ring_start is first._replayssm_ring_start
        assert layer._replayssm_prev_num_accepted is first._replayssm_prev_num_accepted
    assert first._replayssm_ring_start.shape == (6,)
    assert first._replayssm_ring_start.dtype == torch.int32
    assert first._replayssm_ring_start.device.type == device.type
    assert first._replayssm_ring_start.tolist() == [0] * 6
    assert [ctx[n]._plans_replayssm_decode for n in g0] == [False, True, False]
    other = ctx["model.layers.3.mixer"]
    assert other._plans_replayssm_decode is True
    assert other._replayssm_ring_start.data_ptr() != first._replayssm_ring_start.data_ptr()
    assert other._replayssm_ring_start.data_ptr() != other._replayssm_prev_num_accepted.data_ptr()
    assert ctx["model.layers.5.mixer"]._replayssm_ring_start.numel() == 0


def test_rebinding_keeps_addresses_and_values(device: torch.device) -> None:
    names = ["model.layers.0.mixer", "model.layers.1.mixer"]
    ctx = context(device, names, slots=6)
    config = KVCacheConfig([KVCacheGroupSpec(names)])
    initialize_replayssm_ring_trackers(config, ctx)
    start = ctx[names[0]]._replayssm_ring_start
    start[4] = 9
    address = start.data_ptr()
    for name in names:  # the cache shrinks: the trackers become prefixes
        ctx[name].kv_cache[0] = ctx[name].kv_cache[0][:5]
    initialize_replayssm_ring_trackers(config, ctx)
    again = ctx[names[1]]._replayssm_ring_start
    assert again.data_ptr() == address and again.numel() == 5 and int(again[4]) == 9
    for name in names:  # the cache grows past the trackers: fresh zeros
        ctx[name].kv_cache[0] = torch.zeros(8, 2, 4, device=device)
    initialize_replayssm_ring_trackers(config, ctx)
    grown = ctx[names[0]]._replayssm_ring_start
    assert grown.numel() == 8 and grown.tolist() == [0] * 8
    assert ctx[names[1]]._replayssm_ring_start is grown


def test_unshared_trackers_are_reallocated(device: torch.device) -> None:
    names = ["model.layers.0.mixer", "model.layers.1.mixer"]
    ctx = context(device, names, slots=4)
    ctx[names[0]]._replayssm_ring_start = torch.full((4,), 5, dtype=torch.int32, device=device)
    ctx[names[0]]._replayssm_prev_num_accepted = torch.full((4,), 5, dtype=torch.int32, device=device)
    initialize_replayssm_ring_trackers(KVCacheConfig([KVCacheGroupSpec(names)]), ctx)
    assert ctx[names[1]]._replayssm_ring_start.tolist() == [0] * 4


def test_block_copy_tensors(device: torch.device) -> None:
    names = ["model.layers.0.mixer", "model.layers.1.mixer", "model.layers.2.mixer"]
    ctx = context(device, names)
    ctx["model.layers.1.mixer"].use_flashinfer_replayssm = False
    ctx["lm_head"] = object()
    initialize_replayssm_ring_trackers(KVCacheConfig([KVCacheGroupSpec(names)]), ctx)
    tensors = get_replayssm_block_copy_tensors(ctx)
    pair = (ctx[names[0]]._replayssm_ring_start, ctx[names[0]]._replayssm_prev_num_accepted)
    assert len(tensors) == 4
    assert all(t is pair[i % 2] for i, t in enumerate(tensors))


def test_layer_index_parsing() -> None:
    assert extract_layer_index("model.layers.12.mixer") == 12
    for bad in ("model.mixer", "model.layers.1.experts.2"):
        with pytest.raises(ValueError, match="layer_name"):
            extract_layer_index(bad)


def test_binding_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="kv_cache_config.kv_cache_groups"):
        initialize_replayssm_ring_trackers(object(), {})
    with pytest.raises(ValueError, match="forward_context"):
        initialize_replayssm_ring_trackers(KVCacheConfig([]), [])
    with pytest.raises(ValueError, match=r"kv_cache_groups\[0\].layer_names"):
        initialize_replayssm_ring_trackers(KVCacheConfig([KVCacheGroupSpec([3])]), {})
    with pytest.raises(ValueError, match="forward_context"):
        get_replayssm_block_copy_tensors(None)
