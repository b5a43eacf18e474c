"""Loading the implementation under test.

A target is any module exposing the reference's entry points: the four kernels,
``ReplaySSMModelContext``, ``initialize_replayssm_ring_trackers`` and
``get_replayssm_block_copy_tensors`` (ours: ``replayssm.impl.replayssm_utils``;
vLLM's ``replayssm_utils.py`` file works too). Without CUDA its FlashInfer
loader is pointed at our torch materialize backend.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from replayssm.base import targets
from replayssm.base.isolation import RemoteModule, load_isolated
from replayssm.base.targets import DEFAULT_TARGET

KERNELS = (
    "_postprocess_replayssm_kernel",
    "_compact_replayssm_requests_kernel",
    "_reset_new_replayssm_slots_kernel",
)
ENTRY_POINTS = {"kernel": KERNELS, "context": ("ReplaySSMModelContext",)}
"""What each harness level calls on the target."""


def isolates(level: str) -> bool:
    """Whether the target of a ``level`` harness runs in a process of its own
    (:mod:`replayssm.base.isolation`): at kernel level, where only buffers
    cross; the context level calls the target's own Python objects, in this
    process."""
    return level == "kernel"


def other_signatures(module: Any) -> list[str]:
    """The kernels of ``module`` whose parameters are not the reference's (ours
    keep the reference API's), each as ``name takes ... where the reference's
    takes ...``; a launchable object that is no Triton function is taken as it is."""
    from replayssm.impl import replayssm_utils as ours

    out = []
    for k in KERNELS:
        theirs, mine = getattr(getattr(module, k), "arg_names", None), list(getattr(ours, k).arg_names)
        if theirs is not None and list(theirs) != mine:
            extra = [p for p in theirs if p not in mine][:4]
            missing = [p for p in mine if p not in theirs][:4]
            out.append(f"{k} takes {', '.join(extra) or 'the same names'} where the reference's takes "
                       f"{', '.join(missing) or 'them in another order'}")
    return out


def load_target(name: str | None = None, *, cuda: bool = False, level: str = "kernel") -> Any:
    """Import ``name`` (a module name or a ``.py`` path) and check the entry
    points the harness ``level`` calls. At kernel level it is imported in a
    process of its own (:func:`replayssm.base.isolation.load_isolated`; its
    misbehaviour is a :class:`~replayssm.base.isolation.TargetFault`) and the
    result stands for it."""
    if level not in ENTRY_POINTS:
        raise ValueError(f"--level must be one of {sorted(ENTRY_POINTS)}, got {level!r}")
    if name is None:
        name = DEFAULT_TARGET
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"--impl must name a module or a .py file, got {name!r}")
    module: ModuleType | RemoteModule
    if isolates(level):
        module = load_isolated(name, "--impl", cuda=cuda)
    else:
        module = targets.load_target(name, label="--impl")  # a .py file loads with the vLLM stub injected
    missing = [k for k in ENTRY_POINTS[level] if not hasattr(module, k)]
    other = other_signatures(module) if level == "kernel" and not missing else []
    if missing or other:
        if isolates(level):
            module.close()
        what = (f"lacks the reference entry points {missing} ({level} level)" if missing else
                f"has kernels of another launch API: {'; '.join(other)}")
        raise ValueError(f"--impl {name!r} {what}; a vLLM version of another launch API is reviewed with: "
                         f"replayssm-verify review {name}")
    if not cuda and hasattr(module, "_load_replayssm_materialize"):
        from replayssm.impl.materialize import torch_replayssm_materialize

        setattr(module, "_load_replayssm_materialize", lambda *a, **k: torch_replayssm_materialize)
    return module
