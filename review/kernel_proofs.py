"""Kernel-source proofs of a version under review, where the project has them.

Two kinds apply: the spec-program obligations (``replayssm-verify prove``),
which hold for the reference API's kernels and say nothing about another API,
and the source-level proofs of any Triton kernel (memory safety, int32
ranges, write conflicts) in ``replayssm.verify.kernels`` when that package is
present. :func:`kernel_proofs` returns what applies to a version, each entry
with its status, so the verdict says which proofs ran and which do not exist.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from .adapters import Api


def kernel_proofs(module: ModuleType, api: Api) -> dict[str, Any]:
    """What the project can prove about ``module``'s kernels (see the module docstring)."""
    out: dict[str, Any] = {}
    out["spec_program"] = ("the reference API: `replayssm-verify prove` and `fuzz --impl` compare it with the "
                           "spec program buffer by buffer" if api.name == "reference" else
                           f"no spec program for API {api.name}: judged at the lifecycle level")
    try:
        kernels = importlib.import_module("replayssm.verify.kernels")
    except ImportError:
        out["source_proofs"] = "not available in this tree (replayssm.verify.kernels)"
        return out
    prove = getattr(kernels, "prove_module", None)
    if prove is None:
        out["source_proofs"] = "replayssm.verify.kernels has no prove_module(module, kernels) entry point"
        return out
    out["source_proofs"] = prove(module, api.kernels(module))
    return out
