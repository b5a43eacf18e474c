"""A stand-in ``vllm`` package: what a real ``ssu_dispatch.py`` imports at import time.

A file from a vLLM checkout starts with ``from vllm... import ...`` lines. To
load it unmodified without vLLM, :func:`injected` puts the modules of
:data:`PROVIDED` into ``sys.modules`` for the duration of the import only (and
puts back whatever was there before). A name the stub does not provide is an
:class:`ImportError` naming the module and the name; a module it does not
provide is a ``ModuleNotFoundError`` naming the module (the stub's packages
have an empty search path, so no real vLLM is half-imported behind it).

The provided values are placeholders with the members the kernels' host code
names; only ``NULL_BLOCK_ID``, ``PAD_SLOT_ID``, ``triton``/``tl`` and
``_reinterpret_u64_as_i64`` carry behaviour, and theirs are vLLM's.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any


class KVCacheConfig:
    """Placeholder for ``vllm.v1.kv_cache_interface.KVCacheConfig`` (annotations only)."""


@dataclass
class MambaSpec:
    """Placeholder for ``vllm.v1.kv_cache_interface.MambaSpec``: the fields the host code reads."""

    block_size: int = 0
    shapes: tuple = ()
    dtypes: tuple = ()
    mamba_cache_mode: str = "none"


class MambaBackendEnum(enum.Enum):
    """Placeholder for ``vllm.config.mamba.MambaBackendEnum`` (values are not vLLM's)."""

    TRITON = "triton"
    FLASHINFER = "flashinfer"
    CPU = "cpu"


class MambaConfig:
    """Placeholder for ``vllm.config.mamba.MambaConfig`` (annotations only; 0.33.0's ``ssu_dispatch.py``)."""


class MambaSSUAlgorithm(enum.Enum):
    """Placeholder for ``vllm.config.mamba.MambaSSUAlgorithm`` (values are not vLLM's)."""

    DEFAULT = "default"


class MambaAttentionBackendEnum(enum.Enum):
    """Placeholder for ``vllm.v1.attention.backends.registry.MambaAttentionBackendEnum``."""

    MAMBA1 = "mamba1"
    MAMBA2 = "mamba2"
    GDN_ATTN = "gdn_attn"


def reinterpret_u64_as_i64(value: int) -> int:
    """A uint64 pointer's bit pattern as the int64 a torch tensor stores."""
    return value - (1 << 64) if value >= (1 << 63) else value


class MambaBase:
    """Placeholder for ``vllm.model_executor.layers.mamba.abstract.MambaBase`` (isinstance checks only)."""


def extract_layer_index(layer_name: str) -> int:
    """The one integer among a layer name's dot-separated parts (``model.layers.3.mixer`` -> 3)."""
    numbers = [int(part) for part in layer_name.split(".") if part.isdigit()]
    if len(numbers) != 1:
        raise ValueError(f"layer name {layer_name!r} must contain exactly one integer part")
    return numbers[0]


def _triton_names() -> dict[str, Any]:
    import triton
    import triton.language as tl

    return {"triton": triton, "tl": tl}


PROVIDED: dict[str, Callable[[], dict[str, Any]]] = {
    "vllm.triton_utils": _triton_names,
    "vllm.logger": lambda: {"init_logger": logging.getLogger},
    "vllm.v1.kv_cache_interface": lambda: {"KVCacheConfig": KVCacheConfig, "MambaSpec": MambaSpec},
    "vllm.config.mamba": lambda: {"MambaBackendEnum": MambaBackendEnum, "MambaConfig": MambaConfig,
                                  "MambaSSUAlgorithm": MambaSSUAlgorithm},
    "vllm.v1.attention.backends.utils": lambda: {"NULL_BLOCK_ID": 0, "PAD_SLOT_ID": -1},
    "vllm.v1.attention.backends.registry": lambda: {"MambaAttentionBackendEnum": MambaAttentionBackendEnum},
    "vllm.model_executor.layers.mamba.mamba_utils": lambda: {"_reinterpret_u64_as_i64": reinterpret_u64_as_i64},
    "vllm.model_executor.layers.mamba.abstract": lambda: {"MambaBase": MambaBase},
    "vllm.model_executor.models.utils": lambda: {"extract_layer_index": extract_layer_index},
}
"""Module name -> the names it provides (built lazily: triton is imported only when a target loads)."""


def _stub_module(name: str, names: dict[str, Any]) -> ModuleType:
    module = ModuleType(name, f"replayssm's stand-in for {name}")
    module.__path__ = []  # a package with no search path: unknown submodules are not found
    module.__dict__.update(names)

    def missing(attr: str) -> Any:
        raise AttributeError(f"the replayssm vllm stub lacks {name}.{attr}")

    module.__getattr__ = missing  # type: ignore[attr-defined]
    return module


def _modules() -> dict[str, ModuleType]:
    out: dict[str, ModuleType] = {}
    for name, names in PROVIDED.items():
        parts = name.split(".")
        for i in range(1, len(parts)):
            out.setdefault(".".join(parts[:i]), _stub_module(".".join(parts[:i]), {}))
        out[name] = _stub_module(name, names())
    for name, module in out.items():
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(out[parent], leaf, module)
    return out


@contextmanager
def injected() -> Iterator[None]:
    """The stub ``vllm`` modules in ``sys.modules`` while the block runs; any
    ``vllm`` modules present before are restored afterwards."""
    stubs = _modules()
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)
