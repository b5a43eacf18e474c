"""Where a reviewed version's kernels are in its source, and which lines a change touched.

The reports that point at source lines (``--sarif``, ``--html``) read this
from the verdict JSON: :func:`kernel_locations` gives the file (as the
checkout names it, for ``--head-ref``), each kernel the version's launch API
runs with the phases that launch it and the span of its ``def``, and, against
a base, the head lines that differ from it. :func:`locate` puts a finding or a
difference on one line: the first changed line inside a kernel of the phase
its message names (else, for a finding or a difference, of any kernel the
version launches), else, for a lifecycle finding whose replay recorded the
kernel store that wrote the cell it breaks (``written_by``,
:func:`.campaign.broken_store`), that store's line, in the kernel whose
``def`` spans it, else that kernel's ``def`` line (a pull request's
annotation stays on a line it changed); :func:`locate_kernel_finding`
puts a kernel finding on the kernel source line its counterexample names.
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path
from typing import Any

PHASES = ("migrate", "postprocess")
"""The step phases a lifecycle message may start with (``memory: postprocess: ...``)."""


def _kernel_file(module: Any, name: str) -> Path | None:
    fn = getattr(getattr(module, name, None), "fn", None)
    code = getattr(fn, "__code__", None)
    return Path(code.co_filename) if code is not None and Path(code.co_filename).is_file() else None


def _spans(text: str) -> dict[str, tuple[int, int]]:
    """Each top-level function of ``text``: its ``def`` line and last line."""
    return {n.name: (n.lineno, n.end_lineno or n.lineno) for n in ast.parse(text).body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def changed_lines(base_text: str, head_text: str) -> list[int]:
    """The head lines (1-based) that differ from ``base_text``; a deletion marks the line after it."""
    head = head_text.splitlines()
    lines: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, base_text.splitlines(), head, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            lines.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            lines.add(min(j1 + 1, max(len(head), 1)))
    return sorted(lines)


def kernel_locations(version: Any, base: Any = None, shown_as: str | None = None) -> dict:
    """``{"file", "kernels": [{"name", "phases", "line", "end", "changed"}], "changed"}``
    for ``version`` (a :class:`~.campaign.Version`); ``shown_as`` is the file's
    path in its checkout (default: the kernels' file as loaded). ``changed``
    (head lines differing from ``base``'s file) is empty without a base, and
    a kernel whose source file cannot be read gets no line."""
    phases: dict[str, list[str]] = {}
    for phase, p in version.api.phases.items():
        for launch in p.launches:
            if launch.kernel in version.api.kernels(version.kernels):
                phases.setdefault(launch.kernel, []).append(phase)
    files = {k: _kernel_file(version.kernels, k) for k in phases}
    source = next((f for f in files.values() if f is not None), None)
    changed: list[int] = []
    if source is not None and base is not None:
        base_file = next((f for k in phases if (f := _kernel_file(base.kernels, k)) is not None), None)
        if base_file is not None:
            changed = changed_lines(base_file.read_text(), source.read_text())
    spans = _spans(source.read_text()) if source is not None else {}
    kernels = []
    for name, in_phases in phases.items():
        line, end = spans.get(name, (None, None)) if files[name] == source else (None, None)
        kernels.append({"name": name, "phases": in_phases, "line": line, "end": end,
                        "changed": [n for n in changed if line is not None and line <= n <= end]})
    return {"file": shown_as or (str(source) if source is not None else version.source), "kernels": kernels,
            "changed": changed}


def _phase(message: str) -> str | None:
    """The phase a lifecycle message names after its property (``memory: postprocess: ...``)."""
    rest = message.split(": ", 1)[-1]
    return next((p for p in PHASES if rest.startswith(p + ":")), None)


def locate(locations: dict | None, entry: dict, follow_change: bool = True) -> dict | None:
    """The one source line a finding or difference ``entry`` is reported at:
    ``{"file", "line", "kernel", "why"}`` (None without locations), by the
    module's rules (a changed line, the store its ``written_by`` names, the ``def`` line);
    ``follow_change`` false keeps it on the kernel of its phase (a latent
    reliance is no effect of the change)."""
    if not locations or not locations.get("kernels"):
        return None
    kernels = locations["kernels"]
    named = entry.get("kernel_diff", {}).get("kernel") if isinstance(entry.get("kernel_diff"), dict) else None
    phase = _phase(entry.get("message", ""))
    ranked = ([k for k in kernels if k["name"] == named] or
              [k for k in kernels if phase in k["phases"]] or [k for k in kernels if "postprocess" in k["phases"]]
              or kernels)
    for k in ranked if named or not follow_change else ranked + kernels:  # a kernel-diff entry stays on its kernel
        if k["changed"]:
            return {"file": locations["file"], "line": k["changed"][0], "kernel": k["name"],
                    "why": "the first line the change touched in this kernel"}
    store = entry.get("written_by")
    if isinstance(store, dict) and store.get("text") is not None and isinstance(store.get("line"), int):
        line = store["line"]  # a store in the version's own file (its text was read from it)
        kernel = next((k["name"] for k in kernels if k["line"] is not None and k["line"] <= line <= k["end"]),
                      store.get("kernel"))
        return {"file": locations["file"], "line": line, "kernel": kernel,
                "why": f"the store that wrote {store.get('cell')} (recorded on replay)"}
    k = ranked[0]
    return {"file": locations["file"], "line": k["line"], "kernel": k["name"],
            "why": f"the kernel's def line (the {phase or 'postprocess'} phase launches it)"}


def locate_kernel_finding(locations: dict | None, finding: dict, source: str) -> dict | None:
    """Where a kernel finding (:attr:`.verdicts.Verdict.kernel_findings`) is
    reported: the kernel source line its violated part names (``... at
    A3.py:120 ...``), in the version's file as the checkout names it when that
    file has the name (else the file of that name beside ``source``), with the
    kernel whose ``def`` spans the line; None when the part names no line."""
    from replayssm.base.sarif import named_line

    at = named_line(finding.get("violated"))
    if at is None:
        return None
    name, line = at
    shown = (locations or {}).get("file")
    if shown and Path(shown).name == name:
        file = shown
    else:
        file = str(Path(source).with_name(name)) if source.endswith(".py") else name
    kernel = next((k["name"] for k in (locations or {}).get("kernels", []) if file == shown and k["line"] is not None
                   and k["line"] <= line <= k["end"]), None)
    return {"file": file, "line": line, "kernel": kernel, "why": "the kernel source line its violated part names"}
