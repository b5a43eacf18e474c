"""``review --vllm PATH``: find a vLLM's ReplaySSM code, say which version and generation it is, review it.

:mod:`.vllm_locator` finds the files. A worker-side lifecycle
(``replayssm_utils.py``: generations A-D, the reference API) is reviewed as
``review FILE`` reviews it. The released per-slot ring trackers (generation P,
vLLM 0.33.0) get their own review here:

- **campaigns** (:mod:`.release_campaign`): the version's tracker kernels,
  in a process of their own, driven by 0.33.0's host as the corpus shows it
  (``spec/release_caller.py``, the guaranteed behaviours) on the
  configurations its validator accepts: speculative decoding with vLLM's
  default window (``W = 16``, three draft tokens, a ring of 20 rows), a small
  window (``W = 4``, ``T = 2``) and single-token decode (``W = 16``); every
  tracker entry is compared with the spec and every running request's slot
  must refine it. A failure is a **finding**.
- **kernel proofs** (``verify/kernels/tracker_proofs.py``): both tracker kernels
  read from their Triton source, each program beside the spec's, proved equal
  to it and memory-safe inside the caller's contract; a counterexample is a
  **finding**, a kernel the evaluator cannot read ``unknown``;
- **probe** of the caller behaviour the corpus does not guarantee: the
  accepted counts of one pass reaching the next in the previous pass's row
  order (async scheduling, vLLM #53912, the pending fix #53919). When the
  version's lifecycle breaks under it, the version relies on it: **latent**;
- with ``--base BASE``, each tracker kernel compared with BASE's by proof
  (``same`` or ``differs``, with a distinguishing input);
- what the verdict rests on beside: the spec's proofs of the released
  lifecycle (``prove --only release.``), the Triton decode cursor among them.

The verdict table goes to standard output; ``--json FILE`` writes it as JSON
and ``--traces DIR`` holds each failing run's trace (``replayssm-release-trace/1``,
which ``replay`` runs again and ``explain`` draws).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replayssm.base.reports import (
    EXIT_COVERAGE, EXIT_FINDING, EXIT_PASSED, EXIT_USAGE, STDOUT, check_output_file, check_output_folder, write_json,
    status_after_writing, write_reports,
)
from replayssm.spec.generations import gen_p

from .release_campaign import Run, VersionError, campaign, replay
from .vllm_locator import P, P_MARKER, LocateError, Located, locate

REPORT_SCHEMA = "replayssm-release-review/1"
"""The ``schema`` of ``review --vllm ... --json``."""

DEFAULT_PASSES = 80
"""Forward passes per campaign without ``--examples`` (about 7 s a campaign on a loaded 2-core machine)."""

CAMPAIGNS = tuple((c.name, c.geometry) for c in gen_p.API.contract.configurations)
"""The configurations the campaigns run (each one 0.33.0's validator accepts), from P's adapter."""

PROBES = tuple((p.clause, p.host_order, p.configuration) for p in gen_p.API.contract.probes)
"""Each not-guaranteed caller behaviour probed: its record, the host order that
breaks it, the campaign configuration it runs on, from P's adapter."""

INCOMPATIBLE = ("pr_head", "markdown", "report_url", "base_ref", "head_ref", "api", "base_api", "junit", "sarif", "html")
"""``review`` options a generation-P review does not take (exit 2 when given with ``--vllm``)."""


@dataclass
class ReviewPart:
    """One campaign or probe of the review, and its outcome."""

    name: str
    kind: str
    status: str
    detail: str
    seconds: float
    trace: str | None = None
    relies_on: str | None = None


@dataclass
class ReleaseVerdict:
    """The verdict on one vLLM's released ReplaySSM lifecycle."""

    located: Located
    parts: list[ReviewPart] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``finding`` (a campaign or kernel proof failed), ``latent`` (a probe's behaviour, which vLLM
        does not guarantee, breaks it), ``coverage shortfall`` (a kernel proof not decided) or ``pass``."""
        if any(p.kind in ("campaign", "kernel proof") and p.status == "finding" for p in self.parts):
            return "finding"
        if any(p.kind == "probe" and p.status == "relied on" for p in self.parts):
            return "latent"
        if any(p.kind == "kernel proof" and p.status == "unknown" for p in self.parts):
            return "coverage shortfall"
        return "pass"

    def document(self) -> dict[str, Any]:
        loc = self.located
        return {"vllm": loc.place, "form": loc.form, "version": loc.version, "generation": loc.generation,
                "file": str(loc.file), "verdict": self.status,
                "relies_on": [p.relies_on for p in self.parts if p.relies_on],
                "parts": [p.__dict__ for p in self.parts],
                "proved_in_the_spec": "replayssm-verify prove --only release."}


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why ``args`` cannot be a ``--vllm`` review (None: they can)."""
    if args.head:
        return f"--vllm reviews the vLLM it names: give no HEAD besides it (got {' '.join(args.head)})"
    given = [f"--{o.replace('_', '-')}" for o in INCOMPATIBLE if getattr(args, o, None)]
    if given:
        return (f"--vllm does not take {', '.join(given)} (it takes --base, --budget, --examples, --seed, --traces, "
                "--json)")
    if args.examples is not None and args.examples < 1:
        return f"--examples must be a positive number of forward passes, got {args.examples}"
    return None


def _save(run: Run, located: Located, folder: Path, name: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{located.version}-{name.replace(' ', '_')}.release-trace.json"
    trace = run.trace(located.version)
    trace["file"] = str(located.file)
    path.write_text(json.dumps(trace, indent=1))
    return str(path)


def review_release(located: Located, passes: int, seed: int, traces: Path, out: Any,
                   base: Located | None = None) -> ReleaseVerdict:
    """The campaigns and probes of a generation-P version (see the module docstring)."""
    verdict = ReleaseVerdict(located)
    geometries = dict(CAMPAIGNS)
    for name, geo in CAMPAIGNS:
        start = time.perf_counter()
        run = campaign(str(located.file), geo, "current_rows", seed, passes)
        f = run.finding
        part = ReviewPart(f"campaign {name}", "campaign", "finding" if f else "pass",
                    f.message if f else f"{passes} passes, {len(run.launches)} launches, the spec and the "
                    "refinement held", time.perf_counter() - start)
        if f:
            part.trace = _save(run, located, traces, name)
        verdict.parts.append(part)
        print(f"  {part.name}: {part.status}: {part.detail}", file=out, flush=True)
    verdict.parts += kernel_parts(located, out)
    if base is not None:
        verdict.parts += diff_parts(base, located, out)
    for record, order, on in PROBES:
        start = time.perf_counter()
        run = campaign(str(located.file), geometries[on], order, seed, passes)
        f = run.finding
        part = ReviewPart(f"probe {record.name}", "probe", "relied on" if f else "not relied on",
                    (f"without it ({record.provenance.status} by the corpus), {f.message}" if f else
                     f"without it ({record.provenance.status} by the corpus), the lifecycle held"), time.perf_counter() - start,
                    relies_on=f"{record.name} ({record.provenance.status})" if f else None)
        if f:
            part.trace = _save(run, located, traces, f"probe {record.name}")
        verdict.parts.append(part)
        print(f"  {part.name}: {part.status}: {part.detail}", file=out, flush=True)
    return verdict


def _parts(proofs: list, kind: str, statuses: dict[str, str], out: Any) -> list[ReviewPart]:
    parts = []
    for proof in proofs:
        r = proof.result
        status = statuses.get(r.status, "unknown")
        if r.counterexample:
            values = ", ".join(f"{k} = {v}" for k, v in list(r.counterexample.get("values", {}).items())[:8])
            detail = f"{'; '.join(r.counterexample.get('violated', []))[:200]} when {values}"
        else:
            detail = r.detail or "proved for every input inside the caller's contract"
        part = ReviewPart(f"{kind} {proof.kernel} ({proof.transition}): {proof.property}", kind, status, detail, r.seconds)
        parts.append(part)
        print(f"  {part.name}: {part.status}: {part.detail}", file=out, flush=True)
    return parts


def diff_parts(base: Located, head: Located, out: Any) -> list[ReviewPart]:
    """``--base``: each tracker kernel of the head compared with the base's by proof (``same``, ``differs``)."""
    from replayssm.verify.kernels.source_module import source_module

    from replayssm.verify.kernels.tracker_proofs import diff_kernels

    print(f"  against the base {base.describe()}", file=out, flush=True)
    proofs = diff_kernels(source_module(str(base.file), "--base"), source_module(str(head.file), "--vllm"))
    return _parts(proofs, "kernel diff", {"proved": "same", "failed": "differs"}, out)


def kernel_parts(located: Located, out: Any) -> list[ReviewPart]:
    """The kernel-source proofs of the version's tracker kernels (``verify/kernels/tracker_proofs.py``), one part each:
    ``pass`` (proved), ``finding`` (a counterexample: the violated claim and its inputs) or ``unknown``."""
    from replayssm.verify.kernels.source_module import source_module

    from replayssm.verify.kernels.tracker_proofs import prove_kernels

    return _parts(prove_kernels(source_module(str(located.file), "--vllm")), "kernel proof",
                  {"proved": "pass", "failed": "finding"}, out)


def print_verdict(v: ReleaseVerdict, out: Any) -> None:
    """The verdict table (within 120 columns, :mod:`.text_table`), then each failing part's trace."""
    from .text_table import layout

    rely = ", ".join(p.relies_on for p in v.parts if p.relies_on) or "-"
    rows = [["vllm", "version", "generation", "verdict", "relies on (provenance)"],
            [v.located.place, v.located.version, v.located.generation, v.status, rely]]
    print("\n".join(layout(rows)), file=out)
    for p in v.parts:
        if p.trace:
            print(f"  {p.name}: trace {p.trace}", file=out)


def run_vllm(args: argparse.Namespace, out: Any = None) -> int:
    """``review --vllm PATH``: exit 0 (pass), 1 (finding or latent), 2 (bad input, or no ReplaySSM code there);
    -1 when the code found is a worker-side lifecycle, whose file it puts in ``args.head`` for ``review``."""
    check_output_file(args.json, "--json", stdout_ok=True)
    check_output_folder(args.traces, "--traces")
    problem = usage_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        located = locate(args.vllm)
    except LocateError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    out = out or (sys.stderr if args.json == STDOUT else sys.stdout)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    print(f"found {located.describe()}", file=out, flush=True)
    if located.generation != P:
        args.head = [str(located.file)]  # the caller reviews the worker-side file as review FILE does
        return -1
    base = None
    if args.base is not None:
        try:
            base = _base(args.base)
        except LocateError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
    passes = DEFAULT_PASSES if args.examples is None else args.examples
    verdict = review_release(located, passes, args.seed, Path(args.traces), out, base)
    print_verdict(verdict, out)
    written = write_reports([("--json", args.json, lambda: write_json(args.json, REPORT_SCHEMA, verdict.document()))],
                            "the verdict is printed above")  # its targets' processes ended first; a full disk named
    return status_after_writing(EXIT_FINDING if verdict.status in ("finding", "latent") else
                                EXIT_COVERAGE if verdict.status == "coverage shortfall" else EXIT_PASSED, written)


def _base(place: str) -> Located:
    """``--base``: a vLLM as ``--vllm`` takes it, or a generation-P ``ssu_dispatch.py`` file itself."""
    path = Path(place)
    if path.is_file() and path.suffix == ".py":
        if P_MARKER not in path.read_text(errors="replace"):
            raise LocateError(f"--base {place}: not a generation-P ssu_dispatch.py (no {P_MARKER.strip('(:')})")
        return Located(place, "file", "unknown", P, path)
    found = locate(place)
    if found.generation != P:
        raise LocateError(f"--base {place}: its ReplaySSM code is generation {found.generation}, not P")
    return found


def trace_file(trace: dict[str, Any], impl: str | None) -> Path:
    """The version a trace runs on: ``--impl``, else the trace's ``file`` (a path
    relative to the corpus, ``spec.corpus.root()``, when it is not a file here)."""
    from replayssm.spec import corpus

    named = Path(impl or trace.get("file", ""))
    return named if named.is_file() or named.is_absolute() else corpus.root() / named


def replay_release(args: argparse.Namespace, trace: dict[str, Any]) -> int:
    """``replay`` of a released-lifecycle trace: its launches on the version
    again, judged again; exit 1 when its finding is reproduced, 0 when not, 2 when the version is missing."""
    file = trace_file(trace, getattr(args, "impl", None))
    if not file.is_file():
        print(f"error: cannot replay: the version's file {file} does not exist (give it with --impl)",
              file=sys.stderr)
        return EXIT_USAGE
    os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        finding = replay(trace, str(file))
    except VersionError as e:
        print(f"{file}: the version failed: {e}")
        return EXIT_FINDING
    if finding is None:
        print(f"{file}: the run held: the spec and the refinement agree at every launch (not reproduced)")
        return EXIT_PASSED
    print(f"{file}: reproduced: {finding.message}")
    return EXIT_FINDING
