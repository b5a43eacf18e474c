"""List the class names defined in more than one module of the packages.

    python3 scripts/class_names.py   # prints each shared name and its modules; exit 1 if any is not allowed

One name, one concept (issue 42): a class name defined at the top of two
modules of ``spec base verify fuzz review replayssm impl`` means two things to
a reader who meets it unqualified. The only names allowed twice are in
:data:`ALLOWED`, each with why; ``tests/test_names.py`` runs :func:`shared`
on the tree and on a planted duplicate.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "base", "verify", "fuzz", "review", "replayssm", "impl")

VLLM_STUB = frozenset({"base/vllm_stub/__init__.py", "impl/layers.py"})
ALLOWED: dict[str, frozenset[str]] = {
    name: VLLM_STUB for name in ("KVCacheConfig", "MambaBase", "MambaConfig", "MambaSpec")
}
"""Shared on purpose: vLLM's own class names. ``impl/layers.py`` (the target's
stand-ins for the vLLM types its worker code reads) and ``base/vllm_stub``
(the stand-in ``vllm`` package a real vLLM file is imported against) both
mirror vLLM's types, so both keep vLLM's spelling."""


def defined(root: Path) -> dict[str, list[str]]:
    """Every top-level class name of the packages under ``root``, with the modules that define it."""
    where: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    where.setdefault(node.name, []).append(path.relative_to(root).as_posix())
    return where


def shared(root: Path = ROOT, allowed: dict[str, frozenset[str]] = ALLOWED) -> dict[str, list[str]]:
    """The class names defined in two or more modules, less the allowed ones
    (allowed only in exactly the modules :data:`ALLOWED` names)."""
    return {name: modules for name, modules in defined(root).items()
            if len(modules) > 1 and frozenset(modules) != allowed.get(name)}


def main() -> int:
    for name, modules in sorted(defined(ROOT).items()):
        if len(modules) > 1:
            why = " (allowed: vLLM's name)" if frozenset(modules) == ALLOWED.get(name) else ""
            print(f"{name}: {', '.join(modules)}{why}")
    bad = shared()
    print(f"{len(bad)} class names defined in more than one module, not allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
