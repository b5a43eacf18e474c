"""Loading the implementation under test.

A target is any module exposing the reference's entry points: the four kernels,
``ReplaySSMModelContext``, ``initialize_replayssm_ring_trackers`` and
``get_replayssm_block_copy_tensors`` (ours: ``replayssm.impl.replayssm_utils``;
vLLM's ``replayssm_utils.py`` file works too). Without CUDA its FlashInfer
loader is pointed at our torch materialize backend.
"""

from __future__ import annotations

from typing import Any

from replayssm.base.isolation import ImportRef, load_isolated
from replayssm.base.reports import tool_command
from replayssm.base.targets import DEFAULT_TARGET

KERNELS = (
    "_postprocess_replayssm_kernel",
    "_compact_replayssm_requests_kernel",
    "_reset_new_replayssm_slots_kernel",
)
ENTRY_POINTS = {"kernel": KERNELS, "context": ("ReplaySSMModelContext",)}
"""What each harness level calls on the target."""


def torch_materialize_loader(*args: Any, **kwargs: Any) -> Any:
    """The target's ``_load_replayssm_materialize`` without CUDA: our torch materialize backend, whatever is asked."""
    from replayssm.impl.materialize import torch_replayssm_materialize

    return torch_replayssm_materialize


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


def load_target(name: str | None = None, *, cuda: bool = False, level: str = "kernel",
                launch_seconds: float | None = None, forked: bool = False) -> Any:
    """Import ``name`` (a module name or a ``.py`` path) in a process of its
    own (:func:`replayssm.base.isolation.load_isolated`; its misbehaviour is a
    :class:`~replayssm.base.isolation.TargetFault`) and check the entry points
    the harness ``level`` calls; the result stands for it. ``launch_seconds``:
    the watchdog of each launch or call there (None: none, the caller's
    supervisor has one). ``forked``: its process a fork of this one
    (``base/forked_host.py``: only in a process that has done nothing but import)."""
    if level not in ENTRY_POINTS:
        raise ValueError(f"--level must be one of {sorted(ENTRY_POINTS)}, got {level!r}")
    if name is None:
        name = DEFAULT_TARGET
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"--impl must name a module or a .py file, got {name!r}")
    module = load_isolated(name, "--impl", cuda=cuda, launch_seconds=launch_seconds, forked=forked)
    missing = [k for k in ENTRY_POINTS[level] if not hasattr(module, k)]
    other = other_signatures(module) if level == "kernel" and not missing else []
    if missing or other:
        module.close()
        what = (f"lacks the reference entry points {missing} ({level} level)" if missing else
                f"has kernels of another launch API: {'; '.join(other)}")
        raise ValueError(f"--impl {name!r} {what}; a vLLM version of another launch API is reviewed with: "
                         f"{tool_command('review', name)}")
    if not cuda and level == "context" and hasattr(module, "_load_replayssm_materialize"):
        module._load_replayssm_materialize = ImportRef(f"{__name__}:torch_materialize_loader")  # set there
    return module
