"""Kernel-source proofs of a version under review, for every launch API.

Each generation's adapter declares its kernels' roles (``review/adapters``:
the reference API's beside their spec programs, the others' launch contracts
bound by parameter name over the reference caller's row,
``verify/kernels/named.py``). :func:`kernel_proofs` registers the version's
obligations for those roles and proves them: memory safety per buffer and
block-table row, int32, no conflict between programs, the frame, and
equivalence where the role has a spec program. A failed obligation names its
case and the violated part; ``prove --kernels --impl FILE`` explains it and
writes the launch that ``replay`` runs on the real kernel.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType
from typing import Any

from .adapters import Api, kernel_roles


def kernel_proofs(module: ModuleType, api: Api, source: str) -> dict[str, Any]:
    """Every kernel obligation of ``module`` under ``api``'s roles, proved: per
    obligation its status, cases and first violated part; with the command
    that explains and replays a failure."""
    from replayssm.verify.kernels.obligations import register
    from replayssm.verify.obligation import REGISTRY, prove

    roles = kernel_roles(api)
    label = Path(source).stem if source.endswith((".py", ".txt")) else source
    start = time.perf_counter()
    names = register(module, label, roles)
    results = []
    for name in names:
        r = prove(REGISTRY[name])
        results.append({"obligation": name, "status": r.status, "cases": r.cases,
                        "case": (r.counterexample or {}).get("case"),
                        "violated": ((r.counterexample or {}).get("violated") or [None])[0]})
    if not names:
        return {"applies": False, "why": f"the target defines none of the {api.name} API's kernels "
                                         f"({', '.join(sorted({j for r in roles for j in r.jits}))})"}
    return {"applies": True, "api": api.name, "roles": [r.name for r in roles if r.jit(module)],
            "results": results, "seconds": time.perf_counter() - start,
            "command": f"replayssm-verify prove --kernels --impl {source}"}


def summary(kp: dict[str, Any]) -> str:
    """One line: how many obligations were proved, and each failure by name."""
    if not kp["applies"]:
        return f"none apply ({kp['why']})"
    res = kp["results"]
    proved = sum(r["status"] == "proved" for r in res)
    bad = [f"{r['obligation']} {r['status']} ({r['case']}: {r['violated']})" for r in res if r["status"] != "proved"]
    line = f"{proved}/{len(res)} proved in {kp['seconds']:.1f} s"
    return line + ("; " + "; ".join(bad) + f"; explain with {kp['command']}" if bad else "")


def target_roles(impl: str) -> tuple[ModuleType, tuple]:
    """``impl``'s kernels (read from its source, never run), and the kernel
    roles of its launch API (the reference API's and our row-blocked one when
    no generation matches)."""
    from replayssm.verify.kernels.registry import ROLES

    from replayssm.verify.kernels.source_module import kernel_module

    from .adapters import detect
    from .target import ReviewInputError

    module = kernel_module(impl, "--impl")  # its kernels read from its source: the file is not run
    try:
        return module, kernel_roles(detect(module))
    except ReviewInputError:
        return module, ROLES


def every_role() -> tuple:
    """The roles of every launch API and ours (a kernel-proof trace names one)."""
    from replayssm.verify.kernels.registry import ROLES

    from . import adapters

    out = {r.name: r for r in ROLES}
    for api in adapters.registry().values():
        out.update({r.name: r for r in kernel_roles(api)})
    return tuple(out.values())
