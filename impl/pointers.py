"""Int64 address tables and the registry that maps addresses back to tensors.

The kernels (Triton and FlashInfer) receive per-layer and per-group tensors as
int64 address tables. Building a table here also records each tensor in a
process-wide registry, which lets the torch materialize backend turn the same
tables back into tensors on any device (see ``materialize.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import torch

# (device, address) -> the most recently registered tensor starting there.
_REGISTRY: dict[tuple[torch.device, int], weakref.ReferenceType[torch.Tensor]] = {}


def as_signed_i64(address: int) -> int:
    """Return ``address`` (a uint64 bit pattern) as the int64 with the same bits."""
    return address - (1 << 64) if address >= (1 << 63) else address


def register_tensor(tensor: torch.Tensor) -> None:
    """Make ``tensor`` resolvable from its data address on its device while it lives."""
    key = (tensor.device, tensor.data_ptr())

    def forget(dead: weakref.ReferenceType[torch.Tensor]) -> None:
        # A newer tensor registered at the same address keeps its entry.
        if _REGISTRY.get(key) is dead:
            del _REGISTRY[key]

    _REGISTRY[key] = weakref.ref(tensor, forget)


def resolve_address(address: int, device: torch.device) -> torch.Tensor | None:
    """Return the live registered tensor that starts at ``address`` on ``device``, if any."""
    ref = _REGISTRY.get((device, address & ((1 << 64) - 1)))
    return None if ref is None else ref()


def i64_ptrs(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Int64 table of the data addresses of ``tensors``, on ``device``; registers each tensor."""
    for tensor in tensors:
        register_tensor(tensor)
    return torch.tensor(
        [as_signed_i64(t.data_ptr()) for t in tensors], dtype=torch.int64, device=device
    )


def i64_slot_strides(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Int64 table of the outermost (slot or row) stride of ``tensors``, in elements."""
    return torch.tensor([t.stride(0) for t in tensors], dtype=torch.int64, device=device)
