"""Every obligation of the project, registered by importing its module."""

from __future__ import annotations

from . import (  # noqa: F401
    binding_proofs,
    bmc,
    boundary_proofs,
    compaction_proofs,
    migration_proofs,
    postprocess_proofs,
    release_proofs,
    system_proofs,
)
from .kernels import obligations as kernel_obligations  # noqa: F401  (ours: kernel.*, proofs of the Triton source)
from .obligation import REGISTRY, Obligation



def obligations(only: str | None = None) -> list[Obligation]:
    """The registered obligations, optionally those whose name contains ``only``."""
    chosen = [ob for ob in REGISTRY.values() if only is None or only in ob.name]
    if only is not None and not chosen:
        raise ValueError(f"--only {only!r} matches no obligation; known: {', '.join(REGISTRY)}")
    return chosen
