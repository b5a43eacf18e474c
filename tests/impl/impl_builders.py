"""Builders shared by the implementation tests: small models on any device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from replayssm.impl.layers import KVCacheConfig, KVCacheGroupSpec, MambaBase, MambaSpec
from replayssm.impl.replayssm_utils import ReplaySSMModelContext, initialize_replayssm_ring_trackers


def make_layer(
    device: torch.device,
    num_slots: int,
    *,
    heads: int = 2,
    dim: int = 3,
    dstate: int = 5,
    groups: int = 1,
    window: int = 16,
    ring: int = 20,
    state_dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> MambaBase:
    """A ReplaySSM layer with random caches (distinct H, D, N by default)."""
    gen = torch.Generator().manual_seed(seed)
    conv = torch.zeros(num_slots, 2, 4)
    state = torch.randn(num_slots, heads, dim, dstate, generator=gen).to(state_dtype)
    x = torch.randn(num_slots, heads, ring, dim, generator=gen).to(torch.bfloat16)
    dt = torch.rand(num_slots, heads, ring, generator=gen) * 0.5 + 0.05
    b = torch.randn(num_slots, groups, ring, dstate, generator=gen).to(torch.bfloat16)
    a = -(torch.rand(heads, generator=gen) * 2 + 0.1)
    caches = [t.to(device) for t in (conv, state, x, dt, b)]
    return MambaBase(caches, a.to(device), window)


@dataclass
class Model:
    """A context plus the objects it was built from."""

    ctx: ReplaySSMModelContext
    groups: list[list[MambaBase]]
    tables: list[torch.Tensor]
    names: list[list[str]]

    def trackers(self, group: int) -> tuple[torch.Tensor, torch.Tensor]:
        first = self.groups[group][0]
        return first._replayssm_ring_start, first._replayssm_prev_num_accepted


def make_model(
    device: torch.device,
    tables: list[list[list[int]]],
    *,
    layers_per_group: list[int] | None = None,
    num_slots: list[int] | None = None,
    max_num_reqs: int = 4,
    block_size: int = 4,
    mode: str = "align",
    window: int = 16,
    ring: int = 20,
    **layer_kwargs: object,
) -> Model:
    """Groups of fresh layers with bound trackers, one block table per group."""
    layers_per_group = layers_per_group or [1] * len(tables)
    num_slots = num_slots or [64] * len(tables)
    groups, names, block_tables = [], [], []
    forward_context: dict[str, MambaBase] = {}
    index = 0
    kv_groups = []
    for g, (count, table) in enumerate(zip(layers_per_group, tables)):
        layers, layer_names = [], []
        for _ in range(count):
            layer = make_layer(device, num_slots[g], window=window, ring=ring, seed=index, **layer_kwargs)
            name = f"model.layers.{index}.mixer"
            index += 1
            layers.append(layer)
            layer_names.append(name)
            forward_context[name] = layer
        groups.append(layers)
        names.append(layer_names)
        kv_groups.append(KVCacheGroupSpec(layer_names))
        block_tables.append(torch.tensor(table, dtype=torch.int32, device=device))
    initialize_replayssm_ring_trackers(KVCacheConfig(kv_groups), forward_context)
    spec = MambaSpec(block_size=block_size, mamba_cache_mode=mode)
    ctx = ReplaySSMModelContext.create(
        [(layers, spec, table) for layers, table in zip(groups, block_tables)], max_num_reqs
    )
    ctx.materialize_backend = "torch"
    return Model(ctx, groups, block_tables, names)


def i32(values: list[int], device: torch.device) -> torch.Tensor:
    """An int32 vector on ``device``."""
    return torch.tensor(values, dtype=torch.int32, device=device)
