"""Every rejected input raises ValueError naming the field and the allowed range."""

from __future__ import annotations

import re

import pytest
import torch

from impl_builders import i32, make_layer, make_model
from replayssm.impl.replayssm_utils import (
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
    ReplaySSMModelContext,
    initialize_replayssm_ring_trackers,
)


def bound_layers(device: torch.device, count: int, **kwargs) -> list:
    names = [f"model.layers.{i}.mixer" for i in range(count)]
    ctx = {n: make_layer(device, 8, **kwargs) for n in names}
    initialize_replayssm_ring_trackers(KVCacheConfig([KVCacheGroupSpec(names)]), ctx)
    return [ctx[n] for n in names]


def table(device: torch.device, rows: int = 2, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    return torch.ones(rows, 3, dtype=dtype, device=device)


SPEC = MambaSpec(block_size=4)


def expect(field: str, grouped, max_num_reqs: int = 2, allowed: str | None = None) -> None:
    with pytest.raises(ValueError, match=re.escape(field)) as info:
        ReplaySSMModelContext.create(grouped, max_num_reqs)
    assert "must be" in str(info.value)
    if allowed is not None:
        assert allowed in str(info.value)


def test_create_accepts_good_input(device: torch.device) -> None:
    ctx = ReplaySSMModelContext.create([(bound_layers(device, 2), SPEC, table(device))], 2)
    assert ctx.num_layers.tolist() == [2] and ctx.src_slots.shape == (2, 2)


def test_create_rejections(device: torch.device) -> None:
    layers = bound_layers(device, 2)
    good = (layers, SPEC, table(device))
    expect("max_num_reqs", [good], 0, "[1, inf]")
    expect("grouped", [])
    expect("grouped[0] mixers", [([], SPEC, table(device))])
    expect("grouped[1] spec", [good, (bound_layers(device, 1), MambaSpec(8), table(device))])
    expect("spec.mamba_cache_mode", [(layers, MambaSpec(4, "all"), table(device))], allowed="align")
    expect("spec.block_size", [(layers, MambaSpec(0), table(device))], allowed="[1, inf]")
    expect("block_table", [(layers, SPEC, table(device, dtype=torch.int64))], allowed="int32")
    expect("block_table rows", [(layers, SPEC, table(device, rows=1))], allowed=">= max_num_reqs")
    expect("block_table", [(layers, SPEC, torch.ones(3, dtype=torch.int32, device=device))])
    expect("replayssm_buffer_len", [(bound_layers(device, 1, window=17, ring=20), SPEC, table(device))],
           allowed="[1, 16]")
    expect("replayssm_buffer_len", [(bound_layers(device, 1, window=0, ring=20), SPEC, table(device))])
    expect("ring length", [(bound_layers(device, 1, window=16, ring=16), SPEC, table(device))],
           allowed=">= replayssm_buffer_len + 1")
    # geometry differs across groups (another state dtype, another head count)
    expect("grouped[1] mixers[0] geometry",
           [good, (bound_layers(device, 1, state_dtype=torch.bfloat16), SPEC, table(device))])
    expect("grouped[0] mixers[1] geometry",
           [(bound_layers(device, 1) + bound_layers(device, 1, heads=4), SPEC, table(device))])


def test_create_rejects_bad_layers(device: torch.device) -> None:
    def one(mutate) -> list:
        layer = bound_layers(device, 1)
        mutate(layer[0])
        return [(layer, SPEC, table(device))]

    expect("kv_cache[3] dtype", one(lambda m: m.kv_cache.__setitem__(3, m.kv_cache[3].double())))
    expect("kv_cache[2] and [4] dtype", one(lambda m: m.kv_cache.__setitem__(2, m.kv_cache[2].half())))
    expect("kv_cache[4] (B cache)", one(lambda m: m.kv_cache.__setitem__(4, m.kv_cache[4][:, :, :5])))
    expect("kv_cache[1] (state)", one(lambda m: m.kv_cache.__setitem__(1, m.kv_cache[1].transpose(2, 3))))
    expect(".A", one(lambda m: setattr(m, "A", m.A[:1])))
    expect("kv_cache", one(lambda m: setattr(m, "kv_cache", m.kv_cache[:3])))
    expect("_replayssm_ring_start", one(lambda m: setattr(m, "_replayssm_ring_start", m._replayssm_ring_start[:3])))
    expect("_replayssm_prev_num_accepted",
           one(lambda m: setattr(m, "_replayssm_prev_num_accepted", m._replayssm_prev_num_accepted.long())))
    pair = bound_layers(device, 2)
    pair[1]._replayssm_ring_start = pair[1]._replayssm_ring_start.clone()
    expect("grouped[0] mixers[1]._replayssm_ring_start", [(pair, SPEC, table(device))], allowed="shared")


def test_create_rejects_mixed_devices(device: torch.device) -> None:
    other = torch.device("meta")
    layers = bound_layers(device, 1)
    expect("block_table", [(layers, SPEC, table(device).to(other))], allowed="on device")
    layers[0].A = layers[0].A.to(other)
    expect(".A", [(layers, SPEC, table(device))])
    layers = bound_layers(device, 1)
    layers[0].kv_cache[2] = layers[0].kv_cache[2].to(other)
    expect("kv_cache[2] (x cache)", [(layers, SPEC, table(device))], allowed="on device")


def step(device: torch.device, **override) -> dict:
    args = dict(
        idx_mapping=None, query_metadata=i32([1, 1], device), query_metadata_is_cumulative=False,
        num_computed_tokens=i32([4, 4], device), num_computed_is_post_step=False,
        num_accepted_tokens=i32([1, 1], device),
        is_prefilling=torch.tensor([False, False], device=device),
        live_cols=i32([1, 1], device), num_reqs=2,
    )
    args.update(override)
    return args


@pytest.mark.parametrize(
    "override,field,allowed",
    [
        (dict(num_reqs=4), "num_reqs", "[0, 3]"),
        (dict(num_reqs=-1), "num_reqs", "[0, 3]"),
        (dict(num_reqs=True), "num_reqs", "int"),
        (dict(query_metadata_is_cumulative=1), "query_metadata_is_cumulative", "bool"),
        (dict(query_metadata_is_cumulative=True), "query_metadata", "at least 3"),
        (dict(num_computed_tokens="x"), "num_computed_tokens", "torch.Tensor"),
        (dict(num_computed_tokens=torch.ones(2)), "num_computed_tokens", "dtype"),
        (dict(num_accepted_tokens=torch.ones(1, dtype=torch.int32)), "num_accepted_tokens", "at least 2"),
        (dict(is_prefilling=torch.ones(2)), "is_prefilling", "dtype"),
        (dict(live_cols=torch.ones(2, 1, dtype=torch.int32)), "live_cols", "1-D"),
        (dict(idx_mapping=torch.ones(2, dtype=torch.int32)), "num_computed_tokens", "at least 3"),
        (dict(idx_mapping=torch.ones(1, dtype=torch.int32)), "idx_mapping", "at least 2"),
    ],
)
def test_postprocess_rejections(device: torch.device, override: dict, field: str, allowed: str) -> None:
    model = make_model(device, [[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], max_num_reqs=3)
    args = step(device)
    for key, value in override.items():
        args[key] = value.to(device) if isinstance(value, torch.Tensor) else value
    with pytest.raises(ValueError, match=re.escape(field)) as info:
        model.ctx.postprocess(**args)
    assert allowed in str(info.value)


def test_postprocess_rejects_other_device(device: torch.device) -> None:
    model = make_model(device, [[[1, 2, 3], [4, 5, 6]]], max_num_reqs=2)
    with pytest.raises(ValueError, match="query_metadata: must be on device"):
        model.ctx.postprocess(**step(device, query_metadata=torch.ones(2, dtype=torch.int32, device="meta")))


@pytest.mark.parametrize(
    "override,field",
    [
        (dict(num_reqs=5), "num_reqs"),
        (dict(src_cols=torch.ones(2, dtype=torch.float32)), "src_cols"),
        (dict(dst_cols=torch.ones(1, dtype=torch.int32)), "dst_cols"),
        (dict(idx_mapping=torch.ones(2, dtype=torch.int16)), "idx_mapping"),
    ],
)
def test_reset_rejections(device: torch.device, override: dict, field: str) -> None:
    model = make_model(device, [[[1, 2, 3], [4, 5, 6]]], max_num_reqs=2)
    args = dict(idx_mapping=None, src_cols=i32([0, 0], device), dst_cols=i32([1, 1], device), num_reqs=2)
    for key, value in override.items():
        args[key] = value.to(device) if isinstance(value, torch.Tensor) else value
    with pytest.raises(ValueError, match=re.escape(field)):
        model.ctx.reset_new_slots(**args)


def test_compact_rejects_bad_count(device: torch.device) -> None:
    model = make_model(device, [[[1, 2, 3], [4, 5, 6]]], max_num_reqs=2)
    with pytest.raises(ValueError, match=r"num_reqs: must be an int in \[0, 2\]"):
        model.ctx.compact(3)
