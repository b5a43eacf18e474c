"""Where a module's source file is, found by the import system's finders without running any of it.

A judging process never imports the code it judges (only the target's own
process does, ``base/isolation.py``): where it needs a module-named target's
file (a SARIF or HTML location, the kernels read from source), it asks the
finders of ``sys.meta_path`` for the module's spec package by package, which
reads directories and never executes a module (``importlib.util.find_spec``
would import a dotted name's packages, running their ``__init__``).
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from pathlib import Path


def _find(name: str, path: list[str] | None) -> ModuleSpec | None:
    """The spec of ``name`` from the first meta-path finder that knows it (``path``: its package's locations)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path) if find is not None else None
        if spec is not None:
            return spec
    return None


def module_spec(name: str) -> ModuleSpec | None:
    """The spec of module ``name`` (dotted), found package by package, none of
    its packages imported; None when it is not there."""
    spec: ModuleSpec | None = None
    parts = name.split(".")
    for n in range(1, len(parts) + 1):
        if n > 1 and (spec is None or spec.submodule_search_locations is None):
            return None
        spec = _find(".".join(parts[:n]), None if spec is None else list(spec.submodule_search_locations or ()))
        if spec is None:
            return None
    return spec


def module_source(name: str) -> Path | None:
    """The Python source file of module ``name``, or None (not found, or not a ``.py`` file)."""
    spec = module_spec(name)
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and origin.endswith(".py") else None
