"""Kernel-source proofs of a version under review, where the project has them.

``verify/kernels`` proves memory safety, int32 ranges and write conflicts of
Triton kernel source under launch contracts (``verify/kernels/contracts.py``),
today those of the reference API's three kernels, beside their spec programs.
:func:`kernel_proofs` says, per version, which proofs apply and the command
that runs them (they take minutes of Z3, more than a review's budget); for
another launch API there is no contract yet, and the verdict says so: its
kernels are judged at the lifecycle level only.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .adapters import Api


def kernel_proofs(module: ModuleType, api: Api, source: str) -> dict[str, Any]:
    """What the project can prove about ``module``'s kernels, and how."""
    if api.name != "reference":
        return {"applies": False,
                "why": f"verify/kernels has launch contracts for the reference API's kernels only, not API {api.name}"}
    from replayssm.verify.kernels.registry import REFERENCE

    return {"applies": True, "kernels": sorted(r.kernel_name(module) for r in REFERENCE if r.jit(module)),
            "command": f"replayssm-verify prove --kernels --impl {source}"}
