"""Loading the implementation under test.

A target is any module exposing the reference's entry points: the four kernels,
``ReplaySSMModelContext``, ``initialize_replayssm_ring_trackers`` and
``get_replayssm_block_copy_tensors`` (ours: ``replayssm.impl.replayssm_utils``;
vLLM's ``replayssm_utils.py`` file works too). Without CUDA its FlashInfer
loader is pointed at our torch materialize backend.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from replayssm.review import vllm_stub

DEFAULT_TARGET = "replayssm.impl.replayssm_utils"
KERNELS = (
    "_postprocess_replayssm_kernel",
    "_compact_replayssm_requests_kernel",
    "_reset_new_replayssm_slots_kernel",
)
ENTRY_POINTS = {"kernel": KERNELS, "context": ("ReplaySSMModelContext",)}
"""What each harness level calls on the target."""


def _why(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"it called sys.exit({error.code!r}) while being imported"
    return f"{type(error).__name__}: {error}"


def load_target(name: str | None = None, *, cuda: bool = False, level: str = "kernel") -> ModuleType:
    """Import ``name`` (a module name or a ``.py`` path) and check the entry
    points the harness ``level`` calls."""
    if level not in ENTRY_POINTS:
        raise ValueError(f"--level must be one of {sorted(ENTRY_POINTS)}, got {level!r}")
    if name is None:
        name = DEFAULT_TARGET
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"--impl must name a module or a .py file, got {name!r}")
    path = Path(name)
    if path.suffix == ".py":
        if not path.is_file():
            raise ValueError(f"--impl file {name!r} does not exist")
        mod_name = f"replayssm_target_{abs(hash(path.resolve()))}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"--impl file {name!r} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            with vllm_stub.injected():  # a file from a vLLM checkout imports vllm.* names
                spec.loader.exec_module(module)
        except (Exception, SystemExit) as e:  # the target's own error, reported as a bad --impl
            del sys.modules[mod_name]
            raise ValueError(f"--impl file {name!r} cannot be imported: {_why(e)}") from e
    elif path.suffix == ".txt":  # a documentation page printing the module (the reference's)
        from replayssm.review.target import load_docs_page

        module = load_docs_page(path)
    else:
        try:
            module = importlib.import_module(name)
        except (Exception, SystemExit) as e:  # ImportError, or the module's own SyntaxError, sys.exit and the like
            raise ValueError(f"--impl module {name!r} cannot be imported: {_why(e)}") from e
    missing = [k for k in ENTRY_POINTS[level] if not hasattr(module, k)]
    if missing:
        raise ValueError(f"--impl {name!r} lacks the reference entry points {missing} ({level} level); "
                         f"a vLLM version of another launch API is reviewed with: replayssm-verify review {name}")
    if not cuda and hasattr(module, "_load_replayssm_materialize"):
        from replayssm.impl.materialize import torch_replayssm_materialize

        module._load_replayssm_materialize = lambda *a, **k: torch_replayssm_materialize
    return module
