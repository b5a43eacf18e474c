"""SARIF 2.1.0 for code scanning: one result per finding, at the kernel source line it names.

``review``, ``prove`` and ``fuzz`` take ``--sarif FILE``. Each writes one run
of the tool ``replayssm-verify`` whose results are its findings, each with a
rule (the lifecycle property, the obligation, the fuzz finding's kind), a
message, and one physical location (file and line), so that GitHub code
scanning annotates that line of a pull request's diff:

- ``review``: a finding or a regression at the line the verdict JSON's
  ``location`` names (:mod:`replayssm.review.locations`: the first line the
  change touched in the kernel, else the kernel's ``def``); a kernel finding
  (a kernel obligation failed with a counterexample that replays) at the
  kernel source line its violated part names;
- ``prove``: a kernel obligation at the line its counterexample names (``read
  of block_table at kernels.py:176 in bounds``), any other obligation at the
  ``def`` of the function that declares it;
- ``fuzz``: a finding at the ``def`` line of the kernel (or context method)
  that produced the differing buffer (a fuzz finding names no line).

Paths under the working directory are written relative to it (run the
command from the repository root, as CI does), others as ``file://`` URIs.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replayssm.base.module_files import module_source
from replayssm.base.reports import replay_command, write_text

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
"""The ``$schema`` a SARIF log names (a name only: nothing is fetched)."""
TOOL = "replayssm-verify"


@dataclass(frozen=True)
class Issue:
    """One SARIF result: ``rule`` (property, obligation or finding kind), what
    happened, and where (``line`` None: the file without a region)."""

    rule: str
    message: str
    file: str
    line: int | None
    rule_text: str = ""
    """The rule's one-line description (the first issue of a rule that has one gives it)."""
    level: str = "error"
    """``error`` (a finding), ``warning`` (a latent one: it needs an assumption vLLM does not guarantee broken)."""


def artifact_uri(path: str) -> str:
    """``path`` relative to the working directory when it lies under it, else a ``file://`` URI."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.resolve().as_uri() if p.is_absolute() or p.exists() else p.as_posix()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("replayssm-verify")
    except PackageNotFoundError:
        return "unknown"


def sarif_log(issues: list[Issue]) -> dict:
    """The SARIF log of one run of the tool (the installed package's version) with ``issues``."""
    rules: dict[str, str] = {}
    for i in issues:
        rules.setdefault(i.rule, i.rule_text or i.rule)
    ids = list(rules)
    results = []
    for i in issues:
        location: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(i.file)}}
        if i.line is not None:
            location["region"] = {"startLine": int(i.line)}
        results.append({"ruleId": i.rule, "ruleIndex": ids.index(i.rule), "level": i.level,
                        "message": {"text": i.message}, "locations": [{"physicalLocation": location}]})
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [{
        "tool": {"driver": {"name": TOOL, "version": _version(),
                            "rules": [{"id": r, "shortDescription": {"text": t}} for r, t in rules.items()]}},
        "results": results}]}


def write_sarif(path: str, issues: list[Issue]) -> None:
    """Write :func:`sarif_log` to ``path`` (through a temporary file beside it)."""
    write_text(path, json.dumps(sarif_log(issues), indent=2))


# ---------------------------------------------------------------- review


def _impact(entry: dict) -> str:
    """A review entry's impact sentence (``review/impact.py``), on a line of its own."""
    return f"\nimpact: {entry['impact']['sentence']}" if entry.get("impact") else ""


def review_issues(document: dict) -> list[Issue]:
    """A review's ``--json`` document: each finding, each kernel finding and each
    regression (errors), and each latent reliance (a warning), at its ``location``."""
    issues = []
    for v in document.get("verdicts", []):
        issues += [Issue(k["property"].split("@")[0], f"{v['version']}: kernel finding ({k['property']}, proved)"
                         + (f" in {where['kernel']}" if (where := k.get("location") or {}).get("kernel") else "")
                         + f": {k.get('message', '')}" + _impact(k)
                         + (f"\nreplay: {k['replay']}" if k.get("replay") else ""),
                         where.get("file") or v.get("source", ""), where.get("line"),
                         f"kernel obligation {k['property'].split('@')[0]} failed, its counterexample replayed")
                   for k in v.get("kernel_findings", [])]
        entries = [("finding", f) for f in v.get("findings", [])]
        entries += [("regression", d) for d in v.get("differences", []) if d.get("kind") == "regression"]
        entries += [("latent", x) for x in v.get("latent", [])]
        for what, e in entries:
            where = e.get("location") or {}
            rule = e.get("property") or what
            head = (f"{v['version']}: {what} ({rule})" + (f" in {where['kernel']}" if where.get("kernel") else "")
                    + (f", relying on {e['assumption']}, which vLLM does not guarantee" if what == "latent" else ""))
            issues.append(Issue(rule, f"{head}: {e.get('message', '')}" + _impact(e)
                                + (f"\nreplay: {e['replay']}" if e.get("replay") else ""),
                                where.get("file") or v.get("source", ""), where.get("line"),
                                f"lifecycle property {rule} broken", "warning" if what == "latent" else "error"))
    return issues


# ---------------------------------------------------------------- prove


_AT_LINE = re.compile(r" at ([\w.\-]+\.py):(\d+)")


def named_line(violated: str | None) -> tuple[str, int] | None:
    """The kernel source file (its name) and line a kernel obligation's
    violated part names (``store to rand_seeds at A3.py:120 inside ...``), or None."""
    at = _AT_LINE.search(violated or "")
    return (at.group(1), int(at.group(2))) if at is not None else None


def _def_line(path: Path, dotted: str) -> int | None:
    """The ``def`` line of function (or ``Class.method``) ``dotted`` in the file ``path``."""
    try:
        body = ast.parse(path.read_text()).body
    except (OSError, SyntaxError, ValueError):
        return None
    *outer, name = dotted.split(".")
    for part in outer:
        body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part), [])
    return next((n.lineno for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def _imported_from(path: Path, module: str, name: str) -> str | None:
    """The module that the file ``path`` (module ``module``) imports ``name``
    from (``from .kernels import name``), read as text; None if it does not."""
    try:
        body = ast.parse(path.read_text()).body
    except (OSError, SyntaxError, ValueError):
        return None
    for node in body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            if not node.level:
                return node.module
            package = module.split(".")[:len(module.split(".")) - node.level + (path.name == "__init__.py")]
            return ".".join(package + ([node.module] if node.module else []))
    return None


def definition(target: str, dotted: str, hops: int = 3) -> tuple[str, int | None]:
    """Where ``dotted`` (a function, a Triton kernel or ``Class.method``) of
    ``target`` (a ``.py`` file or a module name) is defined: its file and
    ``def`` line, read from the source as text (a module-named target's file
    found without importing it, :mod:`.module_files`; a name the module
    imports from another followed there, ``hops`` times at most); the line is
    None when it cannot be found, and the file the target itself when that cannot."""
    file = Path(target) if target.endswith(".py") else module_source(target)
    if file is None:
        return target, None
    line = _def_line(file, dotted)
    origin = _imported_from(file, target, dotted.split(".")[0]) if line is None and hops and not target.endswith(
        ".py") else None
    if origin is not None:
        found = definition(origin, dotted, hops - 1)
        if found[1] is not None:
            return found
    return str(file), line


def prove_located(report: dict, impl: str | None, declared_in: Callable[[str], tuple[str, int] | None]) -> dict:
    """A ``prove --json`` report whose failed obligations carry a ``location``:
    a kernel obligation the line its counterexample names (``... at
    kernels.py:176 ...``, in ``impl``'s file; our kernels' without it), any
    other ``declared_in(name)`` (the file and ``def`` line of the function
    declaring it)."""
    results = []
    for r in report.get("obligations", []):
        if r.get("status") != "proved":
            violated = (r.get("counterexample") or {}).get("violated") or []
            at = next((m for v in violated if (m := named_line(v))), None)
            if r["name"].startswith("kernel.") and at is not None:
                where = {"file": _kernel_file(at[0], impl), "line": at[1],
                         "why": "the line the counterexample names"}
            else:
                file, line = declared_in(r["name"]) or ("", None)
                where = {"file": file, "line": line, "why": "the function declaring the obligation"}
            r = {**r, "location": where}
        results.append(r)
    return {**report, "obligations": results}


def prove_issues(report: dict) -> list[Issue]:
    """A located ``prove`` report's (:func:`prove_located`) failed obligations, one issue each."""
    issues = []
    for r in report.get("obligations", []):
        if r.get("status") == "proved":
            continue
        violated = (r.get("counterexample") or {}).get("violated") or []
        where = r.get("location") or {}
        issues.append(Issue(r["name"], f"{r['name']} {r['status']}: "
                            + ("; ".join(violated) or r.get("detail") or r["status"]),
                            where.get("file") or "", where.get("line"), f"proof obligation {r['name']}"))
    return issues


def _kernel_file(name: str, impl: str | None) -> str:
    """The file named ``name`` that a kernel counterexample points into: beside
    ``impl`` (a file, or a module's file found without importing it), ours without ``impl``."""
    if impl is not None and impl.endswith(".py"):
        return str(Path(impl).with_name(name))
    found = module_source(impl or "replayssm.impl.kernels")
    return str((found or Path(".")).with_name(name))


# ---------------------------------------------------------------- fuzz


def fuzz_located(summary: dict) -> dict:
    """A ``fuzz --json`` summary whose findings carry a ``location``: the
    ``def`` line of the kernel (or context method) each names, in the
    campaign's target (the target's file when it cannot be found)."""
    impl = (summary.get("config") or {}).get("impl") or ""
    findings = []
    for f in summary.get("findings", []):
        kernel = f.get("kernel") or ""
        file, line = definition(impl, kernel) if kernel and not kernel.startswith("the harness") else (impl, None)
        findings.append({**f, "location": {"file": file if file.endswith(".py") else impl, "line": line,
                                           "kernel": kernel, "why": "the def line of the kernel it names"}})
    return {**summary, "findings": findings}


def fuzz_issues(summary: dict) -> list[Issue]:
    """A located ``fuzz`` summary's (:func:`fuzz_located`) findings, one issue each."""
    issues = []
    for f in summary.get("findings", []):
        where = f.get("location") or {}
        cells = "; ".join(f"{c['buffer']}{c['index']}: spec {c['spec']}, implementation {c['impl']}"
                          for c in f.get("cells", [])[:4])
        message = (f"{f['kind']} in {f.get('kernel')}: {f.get('reason', '')}" + (f" ({cells})" if cells else "")
                   + (f"\nreplay: {replay_command(f['trace'])}" if f.get("trace") else ""))
        issues.append(Issue(f["kind"], message, where.get("file") or "", where.get("line"),
                            f"fuzz finding: {f['kind']}"))
    return issues
