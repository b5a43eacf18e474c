"""``review --repo PATH --base REF --head REF``: the check a vLLM pull request gets. The ReplaySSM
files that changed between the two refs of a vLLM checkout are found with git; each kernel file
among them is reviewed at the head against itself at the base (``review FILE --base-ref REF
--head-ref REF``: lifecycle campaigns, kernel proofs, probes, the differential campaign and the
kernel diff); the result is the head's verdict, its regressions and fixes, and with ``--markdown
FILE`` the pull-request comment: the verdict, each regression or finding in one sentence with its
replay command, and a link to the full HTML report. Exit status: 1 when the head has a finding or a
regression, 0 otherwise (also when no ReplaySSM file changed), 2 for bad input (before any work)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from replayssm.base.reports import (
    EXIT_FINDING, EXIT_PASSED, EXIT_USAGE, check_output_file, status_after_writing, write_reports, write_text,
)

KERNEL_FILES = ("vllm/model_executor/layers/mamba/ops/ssu_dispatch.py",)
"""The files that hold ReplaySSM's Triton kernels as one reviewable version each."""

RELATED = re.compile(r"replayssm|mamba", re.I)
"""Other files of the ReplaySSM path (host code, metadata builders, configuration): named in the
comment as changed, reviewed only through the kernels' caller model."""


class PrCheckError(ValueError):
    """Bad input of the PR check (exit 2, before any review)."""


@dataclass
class FileResult:
    """One changed kernel file: its review's JSON document (``None``: removed at the head)."""

    path: str
    document: dict | None
    added: bool = False

    @property
    def head(self) -> dict:
        return (self.document or {}).get("verdicts", [{}])[-1]

    def differences(self, kind: str) -> list[dict]:
        return [d for d in self.head.get("differences", []) if d.get("kind") == kind]


@dataclass
class PrResult:
    """What the check found, for the comment and the exit status."""

    base: str
    head: str
    files: list[FileResult] = field(default_factory=list)
    related: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(f.differences("regression") or f.head.get("findings") or f.head.get("kernel_findings")
                   for f in self.files)


def _git(repo: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)


def check_inputs(repo: str, base: str, head: str) -> Path:
    """The checkout's top folder; :class:`PrCheckError` naming the option for a folder that is not a
    git checkout or a ref that is not a commit there (a ref starting with ``-`` is refused)."""
    top = _git(Path(repo), "rev-parse", "--show-toplevel") if Path(repo).is_dir() else None
    if top is None or top.returncode != 0:
        raise PrCheckError(f"--repo {repo!r} is not a git checkout")
    root = Path(top.stdout.strip())
    for option, ref in (("--base", base), ("--head", head)):
        if not ref or ref.startswith("-") or _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                                                   f"{ref}^{{commit}}").returncode != 0:
            raise PrCheckError(f"{option} {ref!r} is not a commit of {root}")
    return root


def changed_files(root: Path, base: str, head: str) -> tuple[list[str], list[str]]:
    """The kernel files and the other ReplaySSM files that differ between ``base`` and ``head``."""
    diff = _git(root, "diff", "--name-only", "--end-of-options", base, head)
    names = [n for n in diff.stdout.splitlines() if n]
    kernels = [n for n in names if n in KERNEL_FILES]
    return kernels, [n for n in names if n not in kernels and RELATED.search(n)]


def _exists(root: Path, ref: str, path: str) -> bool:
    return _git(root, "cat-file", "-e", f"{ref}:{path}").returncode == 0


def review_args(args: argparse.Namespace, path: Path, base: str | None, head: str, json_out: str,
                traces: str) -> list[str]:
    """The ``review`` command line of one changed file: the head at its ref against the base at its."""
    argv = [str(path), "--head-ref", head, "--json", json_out, "--traces", traces, "--seed", str(args.seed),
            "--device", args.device, "--budget", str(args.budget)]
    argv += ["--base-ref", base] if base else []
    argv += ["--examples", str(args.examples)] if args.examples else []
    argv += ["--watchdog", str(args.watchdog)] if args.watchdog else []
    argv += ["--html", args.html] if args.html else []
    return argv


def run_pr_check(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The check (see the module's docstring); ``args`` are review's options with ``repo``, ``base``
    and ``pr_head`` (the two refs), ``markdown`` and ``report_url``."""
    from . import command

    out = out or sys.stdout
    try:
        if args.head:
            raise PrCheckError(f"--repo reviews the files that changed; give no HEAD files (got {args.head})")
        if not args.base or not args.pr_head:
            raise PrCheckError("--repo needs --base REF and --head REF")
        if args.base_ref or args.head_ref or args.api or args.base_api or args.junit or args.sarif:
            raise PrCheckError("--repo takes --base REF, --head REF, --markdown, --json, --html and the campaign "
                               "options (--examples, --budget, --seed, --device, --watchdog, --traces)")
        for option, value in (("--markdown", args.markdown), ("--json", args.json), ("--html", args.html)):
            check_output_file(value, option)
        root = check_inputs(args.repo, args.base, args.pr_head)
    except (PrCheckError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    kernels, related = changed_files(root, args.base, args.pr_head)
    result = PrResult(args.base, args.pr_head, related=related)
    print(f"pull-request check of {root}: {args.base} -> {args.pr_head}: {len(kernels)} ReplaySSM kernel file(s) "
          f"changed" + (f", {len(related)} other ReplaySSM file(s)" if related else ""), file=out, flush=True)
    parser = argparse.ArgumentParser(prog="review")
    command.add_arguments(parser)
    for path in kernels:
        if not _exists(root, args.pr_head, path):
            result.files.append(FileResult(path, None))
            continue
        added = not _exists(root, args.base, path)
        with tempfile.TemporaryDirectory(prefix="replayssm-pr-") as tmp:
            doc_path = str(Path(tmp) / "review.json")
            slug = re.sub(r"[^A-Za-z0-9_.-]", "_", path)
            argv = review_args(args, root / path, None if added else args.base, args.pr_head, doc_path,
                               str(Path(args.traces) / slug))
            status = command.run(parser.parse_args(argv), out)
            if status == EXIT_USAGE or not Path(doc_path).is_file():
                print(f"error: the review of {path} could not run (exit {status})", file=sys.stderr)
                return EXIT_USAGE
            result.files.append(FileResult(path, json.loads(Path(doc_path).read_text()), added))
    document = {"schema": "replayssm-pr-check/1", "base": result.base, "head": result.head, "related": result.related,
                "files": [{"path": f.path, "added": f.added, "review": f.document} for f in result.files]}
    text = markdown(result, args.report_url or args.html)
    written = write_reports([  # whole or not at all; one that cannot be written (a full disk) named
        ("--json", args.json, lambda: write_text(args.json, json.dumps(document, indent=2) + "\n")),
        ("--markdown", args.markdown, lambda: write_text(args.markdown, text))], "the comment is printed below")
    print(text, file=out)
    return status_after_writing(EXIT_FINDING if result.failed else EXIT_PASSED, written)


def escape(text: object) -> str:
    """``text`` safe inside one markdown table cell or list item: no newline, pipe, backtick or HTML."""
    s = re.sub(r"[\x00-\x1f\x7f]", " ", str(text))
    return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", s)


def code(text: object) -> str:
    """``text`` as an inline code span: control characters blanked, fenced past any backtick in it."""
    s = re.sub(r"[\x00-\x1f\x7f]", " ", str(text))
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    return f"{fence} {s} {fence}" if "`" in s else f"`{s}`"


def _one_sentence(entry: dict) -> str:
    """What goes wrong, in one sentence: the finding's impact where the review states one, else its message."""
    text = str(entry.get("impact") or entry.get("message") or "").split("\n")[0]
    return escape(text if len(text) <= 300 else text[:297] + "...")


def _item(entry: dict) -> str:
    head = f"**{escape(entry.get('property') or '?')}**"
    if entry.get("assumption"):
        head += f" (without {code(entry['assumption'])})"
    replay = entry.get("replay")
    return f"- {head}: {_one_sentence(entry)}" + (f"  \n  replay: {code(replay)}" if replay else "")


def markdown(result: PrResult, report: str | None) -> str:
    """The pull-request comment."""
    lines = [f"### ReplaySSM review: {code(result.base)} → {code(result.head)}", ""]
    if not result.files:
        lines.append("No ReplaySSM kernel file changed: nothing to review.")
    else:
        verdict = "finding" if result.failed else "no regression, no finding"
        lines += [f"**Verdict: {verdict}**", "", "| file | head | regressions | fixes |", "| --- | --- | --- | --- |"]
        for f in result.files:
            head_status = "removed" if f.document is None else f.head.get("status", "?") + " (added)" * f.added
            cell = code(f.path).replace("|", "\\|")  # GFM reads an escaped pipe in a table cell, code span or not
            lines.append(f"| {cell} | {escape(head_status)} | {len(f.differences('regression'))} | "
                         f"{len(f.differences('fix'))} |")
        for title, pick in (("Regressions", lambda f: f.differences("regression")),
                            ("Findings in the head", lambda f: f.head.get("findings", []) + f.head.get("kernel_findings", [])),
                            ("Fixes", lambda f: f.differences("fix")),
                            ("Relies on what vLLM does not guarantee (latent)", lambda f: f.head.get("latent", []))):
            items = [_item(e) for f in result.files for e in pick(f)]
            if items:
                lines += ["", f"#### {title}", *items]
    if result.related:
        lines += ["", "Other ReplaySSM files changed (judged only through the kernels' caller model): "
                  + ", ".join(code(r) for r in result.related)]
    if report:
        lines += ["", f"Full report: {escape(report)}"]
    return "\n".join(lines) + "\n"
