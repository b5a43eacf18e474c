"""The released vLLM 0.33.0's ReplaySSM kernels, loaded in the target's own process.

This module is a *target* (``base/isolation.py`` imports it in a process of its
own; the judge never imports it): at import it executes, unchanged, two files
of the corpus (``../shared/reference/vllm-0.33.0``, found through
``spec/corpus.py``):

- ``ops/selective_state_update_replayssm_output_only.py``: the Triton decode
  kernel and its host wrapper ``selective_state_update_replayssm_output_only``;
- ``ops/ssu_dispatch.py``: the tracker kernels (reset, advance, the delayed
  MTP commit), ``selective_state_update_replayssm_flashinfer`` and
  ``initialize_mamba_ssu_backend``.

They import ``vllm.*`` names: those of ``base/vllm_stub`` and, for the decode
file, more given here while they execute (:data:`EXTRA`): ``vllm.logger`` with vLLM's
``info_once``,
``vllm.platforms.current_platform`` (CUDA, not ROCm, not Blackwell unless the
device says so), the corpus's own ``ops/replayssm_config.py`` (executed
unchanged) and ``ops/mamba_ssm``'s ``softplus`` and ``convert_rs_fp16x2``,
which the corpus does not hold: ``softplus`` is vLLM's definition
(``log(exp(dt) + 1)`` below 20, the kernel's own ``tl.where`` above), a
stand-in whose float32 error the campaign's bound covers
(``fuzz/release_numeric_math.py``); ``convert_rs_fp16x2`` (Blackwell's
stochastic rounding) is never traced, since the campaigns run without
``enable_stochastic_rounding``.

:func:`use_flashinfer` sets FlashInfer's ``checkpointing_ssu`` up through the
release's own ``initialize_mamba_ssu_backend`` (a FlashInfer backend with
``use_replayssm``), or, without CUDA, a float32 torch stand-in of its
semantics named by an import path.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import triton
import triton.language as tl

from replayssm.base import vllm_stub
from replayssm.spec import corpus

OPS = "vllm/model_executor/layers/mamba/ops"
DECODE_FILE = f"{OPS}/selective_state_update_replayssm_output_only.py"
DISPATCH_FILE = f"{OPS}/ssu_dispatch.py"
CONFIG_FILE = f"{OPS}/replayssm_config.py"


@triton.jit
def softplus(dt):  # type: ignore[no-untyped-def]
    """vLLM's ``mamba_ssm.softplus`` (not in the corpus): ``log(exp(dt) + 1)``."""
    dt = tl.where(dt <= 20.0, tl.math.log(tl.math.exp(dt) + 1), dt)
    return dt


@triton.jit
def convert_rs_fp16x2(x, rand):  # type: ignore[no-untyped-def]
    """Stands for vLLM's Blackwell stochastic rounding; never traced here (see the module docstring)."""
    tl.static_assert(False, "stochastic rounding is not part of these campaigns")
    return x.to(tl.float16)


class _Platform:
    """``vllm.platforms.current_platform`` as the decode file asks it: CUDA, not ROCm."""

    def is_rocm(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return False

    def is_device_capability_family(self, family: int) -> bool:
        import torch

        return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] * 10 == family


class _Logger(logging.LoggerAdapter):
    """``vllm.logger.init_logger``'s logger: a standard one with vLLM's ``info_once``."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.getLogger(name), {})

    def info_once(self, msg: str, *args: Any) -> None:
        self.info(msg, *args)


def _release() -> Any:
    return corpus.root() / "vllm-0.33.0"


def _exec(path: Any, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton reads a jit function's source through its module
    spec.loader.exec_module(module)
    return module


def _load() -> tuple[Any, Any]:
    root = _release()
    if not (root / DECODE_FILE).is_file():
        raise ImportError(f"the released vLLM 0.33.0 files are not at {root} ({corpus.missing()})")
    with vllm_stub.injected():
        sys.modules["vllm.logger"] = SimpleNamespace(init_logger=_Logger)  # type: ignore[assignment]
        sys.modules["vllm.platforms"] = SimpleNamespace(current_platform=_Platform())  # type: ignore[assignment]
        sys.modules["vllm.model_executor.layers.mamba.ops.mamba_ssm"] = SimpleNamespace(  # type: ignore[assignment]
            softplus=softplus, convert_rs_fp16x2=convert_rs_fp16x2)
        sys.modules["vllm.model_executor.layers.mamba.ops.replayssm_config"] = _exec(
            root / CONFIG_FILE, "replayssm_release_replayssm_config")
        decode = _exec(root / DECODE_FILE, "replayssm_release_output_only")
        dispatch = _exec(root / DISPATCH_FILE, "replayssm_release_ssu_dispatch")
    return decode, dispatch


_decode, _dispatch = _load()
EXTRA = ("vllm.logger", "vllm.platforms", "vllm.model_executor.layers.mamba.ops.mamba_ssm",
         "vllm.model_executor.layers.mamba.ops.replayssm_config")
"""The ``vllm`` modules given here beyond ``base/vllm_stub`` while the decode file executes."""

selective_state_update_replayssm_output_only = _decode.selective_state_update_replayssm_output_only
reset_replayssm_ring_trackers = _dispatch.reset_replayssm_ring_trackers
update_replayssm_ring_trackers = _dispatch.update_replayssm_ring_trackers
commit_replayssm_ring_trackers = _dispatch.commit_replayssm_ring_trackers
selective_state_update_replayssm_flashinfer = _dispatch.selective_state_update_replayssm_flashinfer


def use_flashinfer(stand_in: str | None = None) -> str:
    """Make the release's FlashInfer ReplaySSM callable: through its own
    ``initialize_mamba_ssu_backend`` (``mamba_config.backend`` FlashInfer, one
    Mamba2 cache group, ``use_replayssm``), which imports FlashInfer's
    ``checkpointing_ssu``; or, with ``stand_in`` (``module:function``), that
    function in its place (CPU runs). Returns the kernel's qualified name."""
    if stand_in is not None:
        module, _, attr = stand_in.partition(":")
        kernel = getattr(importlib.import_module(module), attr)
        _dispatch._flashinfer_replayssm_kernel = kernel
    else:
        spec = vllm_stub.MambaSpec()
        spec.mamba_type = vllm_stub.MambaAttentionBackendEnum.MAMBA2  # type: ignore[attr-defined]
        config = SimpleNamespace(backend=vllm_stub.MambaBackendEnum.FLASHINFER, ssu_algorithm=None,
                                 enable_stochastic_rounding=False, stochastic_rounding_philox_rounds=0)
        groups = SimpleNamespace(kv_cache_groups=[SimpleNamespace(kv_cache_spec=spec)])
        _dispatch.initialize_mamba_ssu_backend(config, groups, use_replayssm=True)
        kernel = _dispatch._flashinfer_replayssm_kernel
    return f"{kernel.__module__}.{getattr(kernel, '__qualname__', kernel)}"


def allocate_scratch(batch: int, heads: int, query_len: int, window: int, dtype: str, device: str) -> Any:
    """FlashInfer's two-kernel scratch as the release's metadata builder allocates it (``dtype``: the
    model dtype's torch name), or None where FlashInfer is not importable (a stand-in's CPU run)."""
    import torch

    try:
        from flashinfer.mamba.checkpointing_ssu import allocate_checkpointing_ssu_scratch
    except ImportError:
        return None
    return allocate_checkpointing_ssu_scratch(batch_size=batch, num_heads=heads, num_predicted_tokens=query_len,
                                              max_window=window, dtype=getattr(torch, dtype), device=device)
