"""Minimal stand-ins for the vLLM types the ReplaySSM worker code reads.

Only the attributes that ``replayssm_utils`` touches exist here, under vLLM's
names, so that a harness can build the same objects for this implementation
and for vLLM's module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import torch


@dataclass
class MambaConfig:
    """The Mamba settings ReplaySSM reads (stochastic rounding of the state)."""

    enable_stochastic_rounding: bool = False
    stochastic_rounding_philox_rounds: int = 0


class MambaBase:
    """A Mamba2 mixer as ReplaySSM sees it.

    ``kv_cache`` holds, per physical slot: ``[0]`` conv state, ``[1]`` SSM
    state ``(slot, heads, dim, dstate)``, ``[2]`` x ring
    ``(slot, heads, ring_len, dim)``, ``[3]`` processed-dt ring
    ``(slot, heads, ring_len)`` float32, ``[4]`` B ring
    ``(slot, groups, ring_len, dstate)``. ``A`` has one value per head.
    ``_replayssm_ring_start`` and ``_replayssm_prev_num_accepted`` are the
    int32 trackers (one entry per slot) shared by the layers of a cache group.
    """

    def __init__(
        self,
        kv_cache: list[torch.Tensor],
        A: torch.Tensor,
        replayssm_buffer_len: int,
        mamba_config: MambaConfig | None = None,
        use_replayssm: bool = True,
        use_flashinfer_replayssm: bool = True,
    ) -> None:
        self.kv_cache = kv_cache
        self.A = A
        self.replayssm_buffer_len = replayssm_buffer_len
        self.mamba_config = mamba_config if mamba_config is not None else MambaConfig()
        self.use_replayssm = use_replayssm
        self.use_flashinfer_replayssm = use_flashinfer_replayssm
        empty = torch.zeros(0, dtype=torch.int32, device=kv_cache[0].device)
        self._replayssm_ring_start = empty
        self._replayssm_prev_num_accepted = empty.clone()
        self._plans_replayssm_decode = False


@dataclass(frozen=True)
class MambaSpec:
    """Cache spec of a Mamba cache group; equal specs compare equal."""

    block_size: int
    mamba_cache_mode: Literal["align", "none"] = "align"


@dataclass
class KVCacheGroupSpec:
    """One cache group: the layers that share a block table."""

    layer_names: list[str]
    kv_cache_spec: MambaSpec | None = None


@dataclass
class KVCacheConfig:
    """The cache groups of a model."""

    kv_cache_groups: list[KVCacheGroupSpec] = field(default_factory=list)
    num_blocks: int = 0


_INDEX_PART = re.compile(r"^\d+$")


def extract_layer_index(layer_name: str) -> int:
    """The layer index in a dotted name such as ``model.layers.12.mixer``.

    Raises ``ValueError`` unless exactly one dotted component is an integer.
    """
    numbers = [int(part) for part in layer_name.split(".") if _INDEX_PART.match(part)]
    if len(numbers) != 1:
        raise ValueError(
            f"layer_name {layer_name!r} must contain exactly one integer component, "
            f"found {len(numbers)}"
        )
    return numbers[0]
