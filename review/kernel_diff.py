"""``review --base``: the kernel roles of base and head compared by proof.

:mod:`replayssm.verify.kernels.diff` decides, per role both versions define,
whether they write the same cells on every input inside the contract, or
finds the smallest distinguishing input and replays it on both, each
version launched in its own process (``Version.module``: nothing of either
runs here; a version that ends, hangs, raises or changes its process in the
launch breaks it, a regression when it is head and base survives). Each role
becomes one entry of the verdict's ``differences`` with ``"evidence":
"proved"`` (the differential campaign's entries are ``"sampled"``): kind
``equal``, ``fix``, ``regression`` (a finding), ``change`` (a change of
behaviour that breaks nothing), ``both break``, ``not reproduced`` (one
program differs, the replayed launch does not), ``undecided`` or
``unsupported``; where several classes of distinguishing inputs differ (the
row programs', the padding programs' of a ``max_num_reqs`` grid, each other
buffer's: ``RoleDiff.classes``), the gravest of them (:data:`GRAVITY`); the
entry's ``kernel_diff`` lists every class, replayed and judged. The distinguishing launch that gives the kind is saved
under ``--traces`` as a kernel trace that ``replayssm-verify replay FILE
--impl VERSION`` runs on either version.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from replayssm.base.reports import replay_command

KINDS = {"fix": "fix", "regression": "regression", "change that breaks nothing": "change",
         "change, both break": "both break", "not reproduced": "not reproduced"}
"""A judgement's class (its text up to the colon) -> the difference's kind."""

GRAVITY = ("regression", "both break", "fix", "change", "not reproduced")
"""The kinds of a difference, gravest first."""


def _kind(d: Any) -> str:
    return "change" if d.outside else KINDS.get(d.judgement.split(":")[0], "change")


def deciding(role_diff: Any) -> Any:
    """The distinction that gives a difference its kind: the gravest of its
    classes (the row programs' smallest first, on a tie)."""
    found = [d for d in (role_diff.distinction, role_diff.padding_distinction, *role_diff.classes) if d is not None]
    return min(found, key=lambda d: GRAVITY.index(_kind(d))) if found else None


def kind_of(role_diff: Any) -> str:
    """The ``differences`` kind of one role's outcome."""
    from replayssm.verify.kernels.diff_results import DIFFERS, EQUAL

    if role_diff.outcome == EQUAL:
        return "equal"
    if role_diff.outcome != DIFFERS:
        return role_diff.outcome
    return _kind(deciding(role_diff))


def kernel_differences(base: Any, head: Any, traces: Path, out: Any) -> list[dict]:
    """One ``differences`` entry per kernel role base and head share (same
    generation, or matched by role name across two), each printed as it is
    decided."""
    from replayssm.verify.kernels.diff import diff_role, matched_roles

    from replayssm.verify.kernels.generation_roles import roles_of

    from .host_modes import version_publishing_modes

    pairs = matched_roles(base.kernels, head.kernels, roles_of(base.api, version_publishing_modes(base.source)),
                          roles_of(head.api, version_publishing_modes(head.source)))
    if not pairs:
        print("  kernel diff: no kernel role both versions have a contract for (compared by the campaign only)",
              file=out, flush=True)
        return []
    found = []
    for role, head_role in pairs:
        r = diff_role(base.kernels, head.kernels, role, head_role=head_role if head_role is not role else None,
                      base_label=base.label, head_label=head.label, remotes=(base.module, head.module))
        entry = {"kind": kind_of(r), "evidence": "proved", "property": f"kernel {r.role}", "message": r.summary(),
                 "kernel_diff": r.as_json()}
        d = deciding(r)
        if d is not None and d.trace is not None:
            traces.mkdir(parents=True, exist_ok=True)
            path = traces / f"kernel-diff-{base.label}-vs-{head.label}-{r.role}.json"
            path.write_text(json.dumps(d.trace))
            entry.update(trace=str(path), replay=f"{replay_command(str(path), head.source)} "
                         f"(or --impl {shlex.quote(base.source)})")
        found.append(entry)
        print(f"  kernel diff (proved, {r.seconds:.1f} s): {r.summary()}", file=out, flush=True)
    return found
