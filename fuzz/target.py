"""Loading the implementation under test.

A target is any module exposing the reference's entry points: the four kernels,
``ReplaySSMModelContext``, ``initialize_replayssm_ring_trackers`` and
``get_replayssm_block_copy_tensors`` (ours: ``replayssm.impl.replayssm_utils``;
vLLM's ``replayssm_utils.py`` file works too). Without CUDA its FlashInfer
loader is pointed at our torch materialize backend.
"""

from __future__ import annotations

from types import ModuleType

from replayssm.base import targets
from replayssm.base.targets import DEFAULT_TARGET

KERNELS = (
    "_postprocess_replayssm_kernel",
    "_compact_replayssm_requests_kernel",
    "_reset_new_replayssm_slots_kernel",
)
ENTRY_POINTS = {"kernel": KERNELS, "context": ("ReplaySSMModelContext",)}
"""What each harness level calls on the target."""


def load_target(name: str | None = None, *, cuda: bool = False, level: str = "kernel") -> ModuleType:
    """Import ``name`` (a module name or a ``.py`` path) and check the entry
    points the harness ``level`` calls."""
    if level not in ENTRY_POINTS:
        raise ValueError(f"--level must be one of {sorted(ENTRY_POINTS)}, got {level!r}")
    if name is None:
        name = DEFAULT_TARGET
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"--impl must name a module or a .py file, got {name!r}")
    module = targets.load_target(name, label="--impl")  # a .py file loads with the vLLM stub injected
    missing = [k for k in ENTRY_POINTS[level] if not hasattr(module, k)]
    if missing:
        raise ValueError(f"--impl {name!r} lacks the reference entry points {missing} ({level} level); "
                         f"a vLLM version of another launch API is reviewed with: replayssm-verify review {name}")
    if not cuda and hasattr(module, "_load_replayssm_materialize"):
        from replayssm.impl.materialize import torch_replayssm_materialize

        module._load_replayssm_materialize = lambda *a, **k: torch_replayssm_materialize
    return module
