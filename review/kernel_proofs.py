"""Kernel-source proofs of a version under review, for every launch API.

Each generation's adapter declares its kernels' roles (``spec/generations``:
the reference API's beside their spec programs, the others' launch contracts
bound by parameter name over the reference caller's row,
``verify/kernels/named.py``, read through ``verify/kernels/generation_roles.py``). :func:`kernel_proofs` registers the version's
obligations for those roles and proves them: memory safety per buffer and
block-table row, int32, no conflict between programs, the frame, and
equivalence where the role has a spec program. A failed obligation names its
case and the violated part; ``prove --kernels --impl FILE`` explains it and
writes the launch that ``replay`` runs on the real kernel.

Given a ``traces`` folder, each failure is explained here too: its
counterexample's launch is saved there and replayed on the real kernel under
Triton's interpreter, in the version's own process (the ``remote`` module of
:mod:`replayssm.base.isolation`, its launch under the review's watchdog:
nothing of the version runs here) and judged here (``replayed``:
``reproduced``, ``shows another failure`` when the launch misbehaves
otherwise, e.g. a store past the extent that the frame predicted, ``not
reproduced``, ``no small launch``, or ``target fault`` when the version
ends, hangs, raises or changes its process in the launch: ``fault`` names
it, a finding with the trace kept). The
obligations assume the role's whole caller contract (the guaranteed
assumptions and the ones vLLM does not guarantee), so a counterexample
satisfies every guaranteed one: a failure that replays is a finding
(:attr:`.verdicts.Verdict.kernel_findings`); the proofs cannot tell a latent
reliance on a caller assumption (they are not run with it dropped). The
generation's launch contract (``spec/generations/contract.py``) is the
version's own: its variants are those its host launches, and an obligation
proved under a launch clause vLLM does not guarantee is proved again
without it: one that then fails ``relies_on`` that clause (a latent
reliance, no finding).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from replayssm.base.reports import replay_command, tool_command
from replayssm.spec.generations import Api
from replayssm.verify.kernels.generation_roles import roles_of


def kernel_proofs(module: ModuleType, api: Api, source: str, traces: Path | None = None,
                  remote: Any = None) -> dict[str, Any]:
    """Every kernel obligation of ``module`` (the version's kernels read from
    its source) under ``api``'s roles, proved: per obligation its status,
    cases and first violated part; with the command that explains and
    replays a failure (and, with ``traces`` and ``remote``, the version in its
    own process: each failure's saved launch and how it replayed there,
    :func:`replay_failure`)."""
    from replayssm.verify.kernels.obligations import register
    from replayssm.verify.obligation import REGISTRY, prove

    from .host_modes import version_publishing_modes

    publishing = version_publishing_modes(source)
    roles = roles_of(api, publishing)
    label = Path(source).stem if source.endswith((".py", ".txt")) else source
    start = time.perf_counter()
    names = register(module, label, roles)
    results = []
    for name in names:
        r = prove(REGISTRY[name])
        results.append({"obligation": name, "status": r.status, "cases": r.cases,
                        "case": (r.counterexample or {}).get("case"),
                        "violated": ((r.counterexample or {}).get("violated") or [None])[0]})
        if r.status == "failed" and traces is not None and remote is not None and results[-1]["case"]:
            results[-1].update(replay_failure(module, remote, roles, name, results[-1]["case"], source, traces,
                                              results[-1]["violated"]))
            if _stores_to_the_null_block(results[-1]):
                again = beside_the_null_block(module, remote, roles, name, label, source, traces)
                if "case" in again:  # its counterexample replaces the null block's
                    for key in ("trace", "replay", "fault", "cell"):
                        results[-1].pop(key, None)
                results[-1].update(again)
    for clause in api.contract.unguaranteed():
        without = register(module, f"{label} without {clause.name}", roles_of(api, publishing, frozenset({clause.name})))
        for entry, name in zip(results, without):
            if entry["status"] == "proved" and prove(REGISTRY[name]).status != "proved":
                entry.setdefault("relies_on", []).append(clause.name)
    if not names:
        return {"applies": False, "why": f"the target defines none of the {api.name} API's kernels "
                                         f"({', '.join(sorted({j for r in roles for j in r.jits}))})"}
    return {"applies": True, "api": api.name, "roles": [r.name for r in roles if r.jit(module)],
            "results": results, "seconds": time.perf_counter() - start,
            "command": tool_command("prove", "--kernels", "--impl", source)}


def replay_failure(module: ModuleType, remote: Any, roles: tuple, name: str, case: str, source: str,
                   traces: Path, violated: str | None = None) -> dict:
    """Obligation ``name``'s failure at ``case`` (its first violated part
    ``violated``) explained, its launch saved under ``traces`` and replayed on
    the version's kernel in its own process (``remote``; ``module``, its
    source's kernels, binds the parameters): ``replayed``, and
    ``trace``/``replay`` where a small launch shows it; a fault of the
    version in that launch is ``replayed: "target fault"`` with ``fault``
    (its kind and report)."""
    from replayssm.base.isolation import TargetFault, TargetGone
    from replayssm.verify.kernels.obligations import KERNEL_OBLIGATIONS
    from replayssm.verify.kernels.playback import EXPECTED, fault_of, playback
    from replayssm.verify.kernels.report import explain, save_trace

    finding = explain(name, case, source, violated)
    path = save_trace(finding, traces, f"kernel-{name.removeprefix('kernel.').replace('@', '-')}")
    if path is None or finding.trace is None:
        return {"replayed": "no small launch", "explanation": finding.text}
    saved = {"trace": str(path), "replay": replay_command(str(path), source),
             "explanation": finding.text, "cell": finding.details.get("index")}
    try:
        seen = playback(finding.trace, module, roles, remote)
    except (TargetFault, TargetGone) as e:
        fault = fault_of(e)
        remote.close()  # its process may be changed: the campaign's next launch starts a fresh one
        return {"replayed": TARGET_FAULT, "fault": {"kind": fault.kind, "report": fault.report()}, **saved}
    prop = KERNEL_OBLIGATIONS[name].prop
    replayed = ("reproduced" if seen.reproduces(prop) else "shows another failure"
                if any(getattr(seen, f) for f in EXPECTED.values()) else "not reproduced")
    return {"replayed": replayed, **saved}


def _stores_to_the_null_block(entry: dict) -> bool:
    """Whether a failed obligation's counterexample is a frame store to the null block's trackers."""
    from replayssm.verify.kernels.obligations import KERNEL_OBLIGATIONS

    cell = entry.get("cell")
    if KERNEL_OBLIGATIONS[entry["obligation"]].prop != "frame" or not isinstance(cell, list) or len(cell) != 2:
        return False
    try:
        return cell[1] == json.loads(Path(entry["trace"]).read_text())["params"]["geometry"]["pad_slot"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def beside_the_null_block(module: ModuleType, remote: Any, roles: tuple, name: str, label: str, source: str,
                          traces: Path) -> dict:
    """Frame obligation ``name`` failed by a store to the null block's trackers, which nobody reads; one
    model doing so does not show the kernel cannot store to a held block for another input, so the
    obligation is asked again with the null block's cells in every program's frame
    (:attr:`~replayssm.verify.kernels.roles.Frame.null_block`). ``null_block_only``: True where that is
    proved (the kernel stores outside its frame only to the null block: a note); else False, and where
    it failed, the entry's counterexample becomes the new one (its store outside the frame and off the
    null block), explained, saved and replayed as :func:`replay_failure` does, the null block's stores
    not counted as outside the frame on the replay either."""
    from replayssm.verify.kernels.obligations import KERNEL_OBLIGATIONS, obligation_name, register
    from replayssm.verify.obligation import REGISTRY, prove

    role = KERNEL_OBLIGATIONS[name].role
    assert role.frame is not None  # a frame obligation's role has a frame
    wider = replace(role, frame=replace(role.frame, null_block=True))
    register(module, f"{label}-beside-the-null-block", (wider,))
    again = obligation_name(wider.name, "frame", f"{label}-beside-the-null-block")
    r = prove(REGISTRY[again])
    if r.status == "proved":
        return {"null_block_only": True}
    out: dict = {"null_block_only": False}
    case = (r.counterexample or {}).get("case")
    if r.status == "failed" and case:
        violated = ((r.counterexample or {}).get("violated") or [None])[0]
        others = tuple(wider if x.name == wider.name else x for x in roles)
        out.update({"case": case, "violated": violated})
        out.update(replay_failure(module, remote, others, again, case, source, traces, violated))
    return out


TARGET_FAULT = "target fault"
"""``replayed`` of a counterexample whose launch the version did not survive
(it ended, hung, raised or changed its process): a finding of the version."""

REPLAYED_FINDINGS = ("reproduced", "shows another failure", TARGET_FAULT)
"""The ``replayed`` outcomes that make a failed obligation a finding."""


def summary(kp: dict[str, Any]) -> str:
    """One line: how many obligations were proved, and each failure by name."""
    if not kp["applies"]:
        return f"none apply ({kp['why']})"
    res = kp["results"]
    proved = sum(r["status"] == "proved" for r in res)
    bad = [f"{r['obligation']} {r['status']} ({r['case']}: {r['violated']})"
           + (f", {r['replayed']} on the real kernel" if "replayed" in r else "")
           + (f" ({r['fault']['kind']}: {r['fault']['report'].splitlines()[0]})" if "fault" in r else "")
           for r in res if r["status"] != "proved"]
    line = f"{proved}/{len(res)} proved in {kp['seconds']:.1f} s"
    latent = [f"{r['obligation']} relies on {', '.join(r['relies_on'])}" for r in res if r.get("relies_on")]
    line += "".join(f"; {x} (not guaranteed: latent)" for x in latent)
    return line + ("; " + "; ".join(bad) + f"; explain with {kp['command']}" if bad else "")
