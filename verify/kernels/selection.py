"""Which kernel obligations ``prove --kernels [--impl MODULE_OR_FILE]`` runs,
and what it prints and saves when one fails."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from replayssm.base.reports import replay_command

from ..obligation import REGISTRY, Result
from .obligations import register
from .registry import ROLES
from .roles import Registry


def target_label(impl: str) -> str:
    """The suffix of a target's obligation names: its file stem or module name."""
    return Path(impl).stem if impl.endswith(".py") else impl


def kernel_obligations(impl: str | None, only: str | None = None, roles: Registry | None = None,
                       module: ModuleType | None = None) -> list[str]:
    """Names of the kernel obligations of ``impl`` (ours when None), those
    containing ``only`` when given; ``roles``: the registry the target is
    proved for (default the reference API's and ours), ``module``: the
    target already loaded. A target that cannot be loaded, or an ``only``
    that matches nothing, is a ``ValueError`` naming it."""
    roles = ROLES if roles is None else roles
    if impl is None:
        names = [n for n in REGISTRY if n.startswith("kernel.") and "@" not in n]
    else:
        if module is None:
            from .source_module import kernel_module

            module = kernel_module(impl, "--impl")  # its source, not run
        names = register(module, target_label(impl), roles)
        if not names:
            known = sorted({j for r in roles for j in r.jits})
            raise ValueError(f"--impl {impl!r} has none of the kernels the proofs know ({', '.join(known)})")
    chosen = [n for n in names if only is None or only in n]
    if not chosen:
        raise ValueError(f"--only {only!r} matches no kernel obligation; known: {', '.join(names)}")
    return chosen


def describe_failure(result: Result, folder: Path, impl: str | None) -> list[str]:
    """For a failed kernel obligation: the report lines (kernel, line, programs,
    buffer, index, extent, inputs, verdict) and where its trace was saved."""
    from .report import explain, save_trace

    case = (result.counterexample or {}).get("case")
    if case is None:
        return []
    finding = explain(result.name, case, impl, ((result.counterexample or {}).get("violated") or [None])[0])
    lines = [finding.text]
    scenario = folder / f"{result.name}.json"
    if scenario.exists():
        saved = json.loads(scenario.read_text())
        saved.update({"kernel_report": finding.details, "verdict": finding.verdict})
        scenario.write_text(json.dumps(saved, indent=2, default=str))
    path = save_trace(finding, folder, result.name)
    if path is not None:
        lines.append(f"    its launch saved to {path} ({replay_command(str(path), impl)} runs it on the real kernel)")
    return lines
