"""``replayssm-verify review``: a verdict for each version of the worker kernels.

For each version (a ``.py`` file as it is in a vLLM checkout, a module name, or
a directory of such files): load it with the vLLM stub, detect its launch API
(or take ``--api``), run the kernel-source proofs where the project has them,
a lifecycle campaign, and one probe per droppable caller assumption and per
jointly needed set (:mod:`.probes`: a campaign with the assumption dropped; a
finding there that goes away with it restored means the version relies on
it, ``latent`` when vLLM does not guarantee it). The verdict is ``pass``,
``finding`` (a property broken inside the contract) or ``latent``. With
``--base``, a differential campaign of base and head on the same caller
schedules classifies each behavioural difference as a fix (base breaks a
lifecycle property, head does not), a regression (the reverse) or neutral
(both conform), and a head that starts (stops) relying on an assumption vLLM
does not guarantee is a regression (a fix). ``--base-ref``/``--head-ref``
read the file at two git refs of the checkout that holds it.

Exit codes (the fuzzer's): 0 every verdict passes, 1 a finding, a latent
reliance or a regression, 2 bad input or set-up, 3 a coverage shortfall,
130/143 interrupted by SIGINT/SIGTERM (the verdicts so far written). What it
prints and writes: :mod:`.verdicts`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from replayssm.base.isolation import absolute_target
from replayssm.base.interrupts import Interrupted, interruptible, stop_children, stop_interrupting
from replayssm.base.reports import (
    EXIT_COVERAGE,
    EXIT_FINDING,
    EXIT_PASSED,
    EXIT_USAGE,
    STDOUT,
    check_distinct_outputs,
    check_output_file,
    check_output_folder,
    replay_command,
    status_after_writing,
)

from .host_modes import describe, version_publishing_modes
from .matrix_command import DEFAULT as MATRIX_DEFAULT
from .probe_runs import CAMPAIGN_SHARE
from .release_review import DEFAULT_PASSES
from .verdict_parts import Counterexample, ReviewParts
from .verdicts import DIFFERENTIAL, LIFECYCLE, Verdict, build_verdict, interrupted_summary, print_table, write_verdicts

if TYPE_CHECKING:
    from replayssm.base.isolation import TargetFault

    from .campaign import Version

DEFAULT_EXAMPLES = 24
"""Examples per campaign (the lifecycle campaign, each probe, each campaign with ``--base``) by default."""

DEFAULT_WATCHDOG = 600.0
"""``--budget`` by default: a watchdog, never reached on a machine that is not stalled."""

NAME = "review"
HELP = "review versions of vLLM's ReplaySSM kernels (any launch API) against the lifecycle; with --base, differentially"
OUTPUTS = """outputs:
  the verdict table, with progress lines, on standard output (standard error with --json -), within 120
    columns: a row of counts per version, then its lists; --wide: one line per version with every list
  each finding's trace in --traces DIR (default out/review): replayssm-verify replay FILE
    re-runs it on the version, replayssm-verify explain FILE draws a kernel-proof trace
  --json, --junit, --sarif, --html: written when the review ends or is interrupted
  with --matrix: the hazard matrix on standard output (120 columns; --wide: every detail), each failing
    configuration's trace in --traces DIR, --json/--markdown/--html the matrix (schema replayssm-review-matrix/1)"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``review`` subcommand's options."""
    p.add_argument("head", nargs="*", metavar="HEAD",
                   help="version(s) to review: ssu_dispatch.py files as they are, module names, .txt documentation "
                        "pages printing the kernels, or directories of .py files (*_test.py skipped)")
    p.add_argument("--vllm", metavar="PATH", help="review the ReplaySSM code of a whole vLLM instead of HEAD: a source "
                   "tree or a folder laid out like one, a .whl file (read, not installed) or 'installed' (the vLLM "
                   "of this Python, not imported); says which version and generation it found (review/release_review.py)")
    p.add_argument("--base", metavar="BASE", help="a version to compare HEAD with (one HEAD only); with --repo, "
                   "the pull request's base ref")
    p.add_argument("--repo", metavar="PATH", help="the pull-request check: review the ReplaySSM kernel files that "
                   "changed in the git checkout PATH between --base REF and --head REF (no HEAD files)")
    p.add_argument("--head", dest="pr_head", metavar="REF", help="with --repo: the pull request's head ref")
    p.add_argument("--markdown", metavar="FILE", help="with --repo: write the pull-request comment (verdict, each "
                   "regression or finding in one sentence, replay commands, the report's link)")
    p.add_argument("--report-url", metavar="URL", help="with --repo: the full report's address for the comment "
                   "(default: the --html file's path)")
    p.add_argument("--base-ref", metavar="REF", help="review HEAD's file as it is at git REF of its checkout, as the base")
    p.add_argument("--head-ref", metavar="REF", help="review HEAD's file as it is at git REF of its checkout")
    p.add_argument("--api", metavar="NAME", help="the launch API of HEAD (default: detected from its kernels)")
    p.add_argument("--base-api", metavar="NAME", help="the launch API of BASE (default: detected)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="run the version's kernels compiled on CUDA, or under Triton's interpreter on the CPU (default)")
    p.add_argument("--examples", type=int, help=f"examples per campaign (default: {DEFAULT_EXAMPLES}; with --vllm, "
                   f"forward passes per campaign, default {DEFAULT_PASSES}): the review's budget, a count, so its "
                   "verdict is the same on any machine")
    p.add_argument("--budget", type=float, default=DEFAULT_WATCHDOG, help="a watchdog: seconds a version's "
                   "campaigns may take before the parts not done are cut and reported (default: "
                   f"{DEFAULT_WATCHDOG:.0f})")
    p.add_argument("--strict", action="store_true", help="count notes (deviations no consumer reads, as a "
                   "launch clause says) as findings")
    p.add_argument("--seed", type=int, default=0, help="the campaigns' and probes' Hypothesis seed: the same seed, "
                   "options and version give the same examples (default: 0)")
    p.add_argument("--watchdog", type=float, metavar="SECONDS", help="how long one kernel launch may take "
                   "before it is a hang finding (default: 20 on cpu, 300 on cuda); a version's import has its own "
                   "bound (120 s)")
    p.add_argument("--traces", metavar="DIR", default="out/review", help="where finding traces are saved")
    p.add_argument("--json", metavar="FILE", help="write the verdicts as JSON (- for stdout; the progress "
                   "then goes to stderr)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case per campaign, probe and "
                   "comparison with --base")
    p.add_argument("--sarif", metavar="FILE", help="write SARIF 2.1.0 for code scanning: each finding and "
                   "regression at the kernel line it is located at")
    p.add_argument("--html", metavar="FILE", help="write one self-contained HTML page: verdicts, each finding's "
                   "lifecycle timeline with ring diagrams, the assumptions relied on and their provenance")
    p.add_argument("--matrix", nargs="?", type=int, const=MATRIX_DEFAULT, metavar="N",
                   help="the hazard matrix of one HEAD (or --vllm PATH): its verdict per serving configuration it "
                   "distinguishes (cache mode, speculative tokens, async scheduling, cache groups, runner), N "
                   "examples per campaign of each (default 4; --vllm: forward passes, default 80); printed, and "
                   "written with --json, --markdown, --html (review/matrix.py)")
    p.add_argument("--wide", action="store_true", help="print tables with every detail (full lists, traces), "
                   "wider than 120 columns")


def _expand(heads: list[str]) -> list[str]:
    out = []
    for h in heads:
        p = Path(h)
        if p.is_dir():
            out += [str(f) for f in sorted(p.glob("*.py")) if not f.name.endswith("_test.py")]
        else:
            out.append(h)
    return out


def _label(source: str) -> str:
    return Path(source).stem if source.endswith((".py", ".txt")) else source


def _labels(sources: list[str]) -> dict[str, str]:
    """Each version's label: its file's stem, or, where two files share a stem
    (``co1/ssu_dispatch.py co2/ssu_dispatch.py``), as many of its folders as
    tell them apart (``co1/ssu_dispatch``)."""
    labels = {s: _label(s) for s in sources}
    depth = 1
    while len(set(labels.values())) < len(labels) and depth < 32:
        clash = {lab for lab in labels.values() if list(labels.values()).count(lab) > 1}
        for s, lab in labels.items():
            if lab in clash and s.endswith((".py", ".txt")):
                labels[s] = "/".join(Path(s).resolve().with_suffix("").parts[-depth - 1:])
        depth += 1
    return labels


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The subcommand; returns the exit code. The output paths are checked
    first (:class:`replayssm.base.reports.UsageError`, exit 2, before any work).
    SIGINT or SIGTERM (once the versions start loading) ends the review:
    the worker processes are stopped, the verdicts so far printed and
    written with ``"interrupted": true`` and the parts not finished named,
    every finding's trace kept, and the status is 130 or 143."""
    from replayssm.base import host_settings

    host_settings.check(args.device)  # the environment's settings the versions' processes read: exit 2 first
    if args.matrix is not None:
        from .matrix_command import run_matrix

        return run_matrix(args, out)
    if args.repo is not None:
        from .pr_check import run_pr_check

        return run_pr_check(args, out)
    if args.vllm is not None:
        from .release_review import run_vllm

        status = run_vllm(args, out)  # -1: a worker-side lifecycle, now args.head, reviewed below
        if status >= 0:
            return status
    if args.examples is None:
        args.examples = DEFAULT_EXAMPLES
    if not args.head:
        print("error: give HEAD (the versions to review), or --repo PATH --base REF --head REF", file=sys.stderr)
        return EXIT_USAGE
    for option in ("pr_head", "markdown", "report_url"):
        if getattr(args, option) is not None:
            print(f"error: --{option.replace('pr_', '').replace('_', '-')} needs --repo PATH (--markdown: or "
                  "--matrix)", file=sys.stderr)
            return EXIT_USAGE
    check_output_file(args.json, "--json", stdout_ok=True)
    check_output_file(args.junit, "--junit")
    check_output_file(args.sarif, "--sarif")
    check_output_file(args.html, "--html")
    check_distinct_outputs({"--json": args.json, "--junit": args.junit, "--sarif": args.sarif, "--html": args.html})
    check_output_folder(args.traces, "--traces")
    out = out or (sys.stderr if args.json == STDOUT else sys.stdout)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from replayssm.base.targets import TargetError

    from .locations import kernel_locations
    from .timeline import timelines

    verdicts: list[Verdict] = []
    versions: list[Version | Faulted] | None = None
    base: Version | Faulted | None = None
    interrupted: Interrupted | None = None
    stopped: list[str] = []
    """The versions whose review stopped on a fault of the machine (a full disk)."""
    with interruptible():
        try:
            versions, base = _load(args)
            queue: list[Version | Faulted] = [base] if isinstance(base, Faulted) else []
            for v in queue + versions:
                if isinstance(v, Faulted):  # the target misbehaved at import: its finding, and nothing to run
                    verdicts.append(v.verdict())
                    print(f"reviewing {v.label} ({v.source}): {v.fault.reason}", file=out, flush=True)
                    continue
                against = None if isinstance(base, Faulted) else base
                size = f"{args.examples} examples per campaign"
                parts, located = ReviewParts(), kernel_locations(v, against, _shown_as(args, v))
                try:
                    print(f"reviewing {v.label} ({v.source}): API {v.api.name}, {size}; "
                          f"{describe(version_publishing_modes(v.source))}", file=out, flush=True)
                    review_version(parts, v, args, against, out)
                except OSError as e:  # a trace that cannot be saved (a full disk): the parts not done are named
                    stopped.append(v.label)
                    print(f"error: {v.label}: its review stopped: a trace cannot be saved under --traces "
                          f"{args.traces}: {e}", file=sys.stderr, flush=True)
                finally:
                    verdicts.append(build_verdict(v.label, v.source, v.api.name, v.api.summary, parts,
                                                  planned_parts(against), located, strict=args.strict))
        except TargetError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except Interrupted as e:
            interrupted = e
            workers = stop_children()
            print(f"{e}: the review stopped" + (f", {workers} worker process(es) ended" if workers else ""),
                  file=out, flush=True)
        stop_interrupting()  # the work is over: a signal must not cut the report short
        done = {v.label for v in verdicts}
        not_reviewed = list(args.head) if versions is None else [v.label for v in versions if v.label not in done]
        print_table(verdicts, out, wide=args.wide)
        if interrupted is not None:
            print(interrupted_summary(interrupted, verdicts, not_reviewed), file=out, flush=True)
        heads = {v.label: v for v in versions or [] if not isinstance(v, Faulted)}
        against = None if isinstance(base, Faulted) else base
        written = write_verdicts(args, verdicts, interrupted is not None, not_reviewed,
                                 lambda document: timelines(document, heads, against, args.device))
    if interrupted is not None:
        return interrupted.status
    statuses = {v.status for v in verdicts}
    status = (EXIT_FINDING if statuses & {"finding", "latent"} else EXIT_USAGE if stopped
              else EXIT_COVERAGE if "coverage shortfall" in statuses else EXIT_PASSED)
    return status_after_writing(status, written)


@dataclass
class Faulted:
    """A version that misbehaved while it was imported (in its own process:
    :mod:`replayssm.base.isolation`): a finding, with nothing left to run."""

    label: str
    source: str
    fault: TargetFault

    def verdict(self) -> Verdict:
        fault = Counterexample("process", self.fault.report(), None, False, None)
        return build_verdict(self.label, self.source, "unknown", "not loaded: it misbehaved at import",
                             ReviewParts(fault=fault))


def _load(args: argparse.Namespace) -> tuple[list[Version | Faulted], Version | Faulted | None]:
    import torch

    from replayssm.base.isolation import TargetFault, load_isolated
    from replayssm.fuzz.campaign_config import WATCHDOG_SECONDS
    from replayssm.verify.kernels.source_module import kernel_module

    from .campaign import Version
    from .target import ReviewInputError, detect, file_at_ref

    if not 0 < args.budget < float("inf"):  # nan fails too: a budget that never runs out is no budget
        raise ReviewInputError(f"--budget must be > 0 seconds and finite, got {args.budget}")
    if args.examples < 1:
        raise ReviewInputError(f"--examples must be >= 1, got {args.examples}")
    if args.seed < 0:
        raise ReviewInputError(f"--seed must be >= 0, got {args.seed}")
    if args.watchdog is not None and not 0 < args.watchdog < float("inf"):
        raise ReviewInputError(f"--watchdog must be > 0 seconds and finite, got {args.watchdog}")
    watchdog = args.watchdog or WATCHDOG_SECONDS[args.device]["dev"]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ReviewInputError("--device cuda: this torch sees no CUDA device")
    heads = [absolute_target(h) for h in _expand(args.head)]  # a trace names each file wherever it is replayed from
    if not heads:
        raise ReviewInputError(f"HEAD {args.head}: no .py files to review")
    if (args.base or args.base_ref) and len(heads) != 1:
        raise ReviewInputError(f"--base/--base-ref compare one HEAD, got {len(heads)}")
    base_source = absolute_target(args.base) if args.base else None
    if args.base_ref or args.head_ref:
        repo, rel = _in_checkout(heads[0])
        if args.base_ref:
            base_source = str(file_at_ref(repo, args.base_ref, rel, "--base-ref", args.traces))
        if args.head_ref:
            heads = [str(file_at_ref(repo, args.head_ref, rel, "--head-ref", args.traces))]

    labels = _labels(heads)

    def version(source: str, api: str | None, label: str) -> Version | Faulted:
        try:
            module = load_isolated(source, label, cuda=args.device == "cuda", launch_seconds=watchdog)
        except TargetFault as e:
            return Faulted(labels.get(source, _label(source)), source, e)
        except ValueError as e:  # no version at all (its message names the file and why): exit 2
            raise ReviewInputError(str(e)) from None
        try:
            kernels = kernel_module(source, label)  # its source, for the proofs: not run here
        except ValueError as e:
            raise ReviewInputError(str(e)) from None
        v = Version(labels.get(source, _label(source)), source, module, detect(module, api), kernels)
        check_bindings(v)
        return v

    versions = [version(h, args.api, "HEAD") for h in heads]
    base = version(base_source, args.base_api, "--base") if base_source else None
    return versions, base


def check_bindings(v: Version) -> None:
    """The version's kernels bind to its API's caller on a small system (errors name the parameter)."""
    import torch

    from replayssm.fuzz.launcher import Setup
    from replayssm.spec.geometry import Conventions, Geometry

    from .harness import Harness

    setup = Setup(Geometry(2, 4, 4, 8), Conventions.all()[-1], (1,), num_cols=2, num_slots=4)
    Harness(setup, v.module, v.api, torch.device("cpu")).check_bindings()


def _shown_as(args: argparse.Namespace, v: Version) -> str | None:
    """The path the reports name ``v``'s file by: its path in the checkout with
    ``--base-ref``/``--head-ref`` (the file read is a copy at the ref), else the path given."""
    if args.base_ref or args.head_ref:
        return _in_checkout(_expand(args.head)[0])[1]
    return v.source if v.source.endswith(".py") else None


def _in_checkout(path: str) -> tuple[Path, str]:
    import subprocess

    from .target import ReviewInputError

    p = Path(path).resolve()
    proc = subprocess.run(["git", "-C", str(p.parent), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ReviewInputError(f"--base-ref/--head-ref: HEAD {path!r} is not inside a git checkout")
    top = Path(proc.stdout.strip())
    return top, str(p.relative_to(top))


def planned_parts(base: Version | None) -> list[str]:
    """The parts of a version's review, as :attr:`Verdict.unfinished` names them."""
    from .probes import probes

    return [LIFECYCLE, *(f"probe without {p.name}" for p in probes()), *([DIFFERENTIAL] if base is not None else [])]


def review_version(parts: ReviewParts, v: Version, args: argparse.Namespace, base: Version | None, out: TextIO) -> None:
    """Review ``v``: put in ``parts`` each part as its producer returns it
    (the kernel proofs, the lifecycle campaign's result, each probe's outcome
    and, with ``base``, each difference), naming each in ``parts.done`` once
    it is finished (:func:`planned_parts`), so that an
    :class:`~replayssm.base.interrupts.Interrupted` leaves ``parts`` holding
    what was reviewed so far (of a campaign cut short, its tally and its
    first failure as first seen, its trace saved)."""
    from .campaign import campaign
    from .differential import differences
    from .impact import with_impact
    from .kernel_proofs import kernel_proofs
    from .kernel_proofs import summary as kernel_summary
    from .probe_runs import probe_outcomes
    from .verdict_parts import lifecycle_result

    traces = Path(args.traces)
    start = time.perf_counter()
    try:
        try:
            assert v.kernels is not None, "_load reads every reviewed version's kernels"
            parts.kernel_proofs = kp = kernel_proofs(v.kernels, v.api, v.source, traces, v.module)
            print(f"  kernel proofs: {kernel_summary(kp)}", file=out, flush=True)
            campaigns = time.perf_counter()
            main = campaign((v,), budget=args.budget * CAMPAIGN_SHARE, seed=args.seed, out_dir=traces, tag=v.label,
                            device=args.device, examples=args.examples, progress=out)
        except Interrupted as e:
            if e.partial is not None:  # else the campaign had not started: nothing was judged
                parts.lifecycle = lifecycle_result(e.partial, v.source, interrupted=True)
            raise
        life = lifecycle_result(main, v.source, interrupted=False)
        parts.lifecycle = replace(life, counterexamples=tuple(with_impact(c, v, args.device)
                                                              for c in life.counterexamples))
        parts.done.append(LIFECYCLE)
        said = "; ".join(f.message for f in main.failures) or "every property held"
        print(f"  lifecycle: {main.tally.request_steps} request-steps in {main.seconds:.1f} s: {said}", file=out,
              flush=True)
        broken = frozenset(c.property for c in parts.lifecycle.counterexamples)
        for probe in probe_outcomes(v, args, traces, out, known=broken, deadline=campaigns + args.budget):
            parts.probes.append(probe)
            if probe.outcome != "interrupted":
                parts.done.append(f"probe without {probe.name}")
        parts.locate_stores(v, args.device)
        if base is not None:
            started = time.perf_counter()
            findings = [*parts.lifecycle.counterexamples, *(p.independent for p in parts.probes if p.independent)]
            try:
                for d in differences(base, v, args, traces, out, findings, parts.probes, parts.base_probes.append):
                    parts.differences.append(d)
            finally:
                parts.timings["differential_seconds"] = round(time.perf_counter() - started, 2)
            parts.done.append(DIFFERENTIAL)
    finally:
        parts.timings["total_seconds"] = round(time.perf_counter() - start, 2)


def replay_trace(args: argparse.Namespace, trace: dict) -> int:
    """``replay`` of a review trace (read from ``args.file``): its versions (or ``--impl`` for the only/first
    one) on its steps."""
    from replayssm.base.isolation import TargetFault, load_isolated
    from replayssm.base.targets import TargetError
    from replayssm.fuzz.campaign_config import WATCHDOG_SECONDS

    from .campaign import Version, replay
    from .target import detect

    device = args.device or "cpu"
    try:
        meta = trace["#meta"]
        versions = []
        for n, (label, source, api) in enumerate(meta["versions"]):
            source = args.impl if (args.impl and n == len(meta["versions"]) - 1) else source
            try:
                module = load_isolated(source, "--impl", cuda=device == "cuda",
                                       launch_seconds=getattr(args, "watchdog", None) or WATCHDOG_SECONDS[device]["dev"])
            except TargetFault as e:
                print(f"{label} ({source}): {e.report()}\n{label}: finding reproduced at import")
                return EXIT_FINDING
            versions.append(Version(label, source, module, detect(module, api)))
        ok, report = replay(trace, versions, device)
    except (TargetError, KeyError, ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(report)
    return EXIT_PASSED if ok else EXIT_FINDING
