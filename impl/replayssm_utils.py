"""Facade with the public names of vLLM's ``vllm.v1.worker.replayssm_utils``.

A harness can drive this module and vLLM's file through the same names.
"""

from __future__ import annotations

from .context import NULL_BLOCK_ID, ReplaySSMModelContext, _ReplaySSMMaterializeTables
from .kernels import (
    _compact_replayssm_requests_kernel,
    _postprocess_replayssm_kernel,
    _reset_new_replayssm_slots_kernel,
    mamba_state_copy_boundary,
)
from .layers import KVCacheConfig, KVCacheGroupSpec, MambaBase, MambaConfig, MambaSpec, extract_layer_index
from .materialize import _load_replayssm_materialize
from .pointers import as_signed_i64 as _reinterpret_u64_as_i64
from .trackers import get_replayssm_block_copy_tensors, initialize_replayssm_ring_trackers

__all__ = [
    "NULL_BLOCK_ID",
    "KVCacheConfig",
    "KVCacheGroupSpec",
    "MambaBase",
    "MambaConfig",
    "MambaSpec",
    "ReplaySSMModelContext",
    "_ReplaySSMMaterializeTables",
    "_compact_replayssm_requests_kernel",
    "_load_replayssm_materialize",
    "_postprocess_replayssm_kernel",
    "_reinterpret_u64_as_i64",
    "_reset_new_replayssm_slots_kernel",
    "extract_layer_index",
    "get_replayssm_block_copy_tensors",
    "initialize_replayssm_ring_trackers",
    "mamba_state_copy_boundary",
]
