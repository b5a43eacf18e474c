"""``replayssm-verify``: ``prove`` the spec's obligations, ``fuzz`` an implementation against the spec,
``replay`` a saved failure or system trace, ``explain`` a system trace."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from replayssm.base.interrupts import Interrupted, interruptible, stop_interrupting
from replayssm.base.reports import (
    EXIT_COVERAGE,
    EXIT_FINDING,
    EXIT_PASSED,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_USAGE,
    STDOUT,
    JunitCase,
    UsageError,
    check_output_file,
    check_output_folder,
    status_after_writing,
    write_json,
    write_junit,
    write_reports,
)
from replayssm.verify.obligation import Obligation, Result, render_scenario, save_counterexample
from replayssm.verify.runner import DEFAULT_JOBS_CAP, MAX_JOBS, REPORT_SCHEMA, Report, default_jobs, discharge, usable_cpus


def _check_prove_args(args: argparse.Namespace) -> None:
    """Every option of ``prove`` checked before any work (:class:`UsageError`)."""
    if not 1 <= args.jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be in [1, {MAX_JOBS}], got {args.jobs}")
    check_output_file(args.json, "--json", stdout_ok=True)
    check_output_file(args.junit, "--junit")
    check_output_folder(args.counterexamples, "--counterexamples")
    if args.cache is not None:
        check_output_folder(args.cache, "--cache")
    if args.impl is not None and not args.kernels:
        raise UsageError("--impl names the kernels to prove: it needs --kernels")


def _print_result(r: Result, args: argparse.Namespace, saved: list[str]) -> None:
    """One obligation's line; for a failure its counterexample, saved under
    ``--counterexamples`` (a file that cannot be written is reported, and the
    run goes on)."""
    reused = f", {r.reused} parts proved by its lemmas" if r.reused else ""
    reused += f", {r.cases_cached} from the proof cache" if r.cases_cached else ""
    how = "cached" if r.cached else f"{r.seconds * 1000:8.1f} ms"
    print(f"{r.name:<44} {r.status:<8} {how:>11}  ({r.cases} cases{reused})", file=args.out, flush=True)
    if r.status == "proved":
        return
    if r.detail:
        print(f"    {r.detail}", file=args.out)
    if r.counterexample is None:
        return
    print(render_scenario(r.counterexample), file=args.out)
    try:
        scenario, *trace = save_counterexample(r, Path(args.counterexamples))
    except OSError as e:
        print(f"error: cannot save the counterexample of {r.name} under --counterexamples "
              f"{args.counterexamples}: {e}", file=sys.stderr)
        return
    saved.append(str(scenario))
    print(f"    counterexample saved to {scenario} (replayssm-verify explain FILE draws it)", file=args.out)
    if r.name.startswith("kernel."):
        from replayssm.verify.kernels.selection import describe_failure

        print("\n".join(describe_failure(r, Path(args.counterexamples), args.impl)), file=args.out)
    for path in trace:
        print(f"    its run saved to {path}", file=args.out)


def _junit_cases(report: Report) -> list[JunitCase]:
    cases = []
    for r in report.results:
        failure = None
        if r.status != "proved":
            failure = "\n".join(x for x in (f"{r.status}: {r.detail}" if r.detail else r.status,
                                             render_scenario(r.counterexample) if r.counterexample else "") if x)
        cases.append(JunitCase(r.name, r.seconds, failure, "failure" if r.status == "failed" else "error"))
    return cases


def _chosen(args: argparse.Namespace, cache: str | None) -> list[Obligation]:
    """The obligations ``--only`` and ``--kernels`` ask for; with a cache, the
    catalog of this tree is recorded in it for the next warm run."""
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import REGISTRY
    from replayssm.verify.proof_cache import ProofCache

    try:
        if args.kernels:
            from replayssm.verify.kernels.selection import kernel_obligations

            if args.impl is None:
                return [REGISTRY[n] for n in kernel_obligations(None, args.only)]
            from replayssm.review.kernel_proofs import target_roles

            module, roles = target_roles(args.impl)
            return [REGISTRY[n] for n in kernel_obligations(args.impl, args.only, roles, module)]
        chosen = obligations(args.only)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if cache is not None:
        ProofCache(cache).keep_catalog(obligations())
    return chosen


def _hypotheses_by_provenance(names: set[str]) -> list[str]:
    """One line per provenance status of a case's hypothesis names (``spec.contract``);
    an invariant's conjuncts are counted, not listed."""
    from replayssm.spec.contract import INVARIANT_PREFIXES, PROOF, by_status

    lines = []
    for status, group in by_status(names):
        if status == PROOF:
            conjuncts = [n for n in group if n.startswith(INVARIANT_PREFIXES)]
            group = [n for n in group if n not in conjuncts]
            if conjuncts:
                group.append(f"the invariant of the pre-state ({len(conjuncts)} conjuncts)")
            status = "the proof's own"
        lines.append(f"{status}: {', '.join(group)}")
    return lines


def _prove(args: argparse.Namespace) -> int:
    from replayssm.verify.proof_cache import ProofCache, default_folder
    from replayssm.verify.runner import LemmaCycle, Report, proved_on_this_tree

    _check_prove_args(args)
    cache = None if args.no_cache else (args.cache or str(default_folder()))
    args.out = sys.stderr if args.json == STDOUT else sys.stdout
    unwritable = ProofCache(cache).unwritable() if cache and args.cache is None else None
    if unwritable:  # the default folder (under $HOME) cannot be written: run without one rather than claim it
        print(f"warning: no proof cache: cannot write {cache}: {unwritable}", file=sys.stderr)
        cache = None
    warm = proved_on_this_tree(cache, args.only) if cache and not args.kernels and not args.list else None
    if warm is not None:  # every obligation asked for was proved on this very tree: no claim is built
        report = Report([r.name for r in warm])
        run = (r for r in warm)
    else:
        chosen = _chosen(args, cache)
        if args.list:
            for ob in chosen:
                print(f"{ob.name}  [{ob.transition}]\n    {ob.statement}")
                first = next(iter(ob.build()), None)
                names = {n for n, _ in first.assumptions} if first is not None else set()
                print(f"    assumptions (first case{': ' + first.case if first is not None and first.case else ''}), "
                      f"by provenance:{'' if names else ' none'}")
                for line in _hypotheses_by_provenance(names):
                    print(f"      {line}")
            return EXIT_PASSED
        report = Report([ob.name for ob in chosen])
        run = discharge(report.order, args.jobs, cache, reuse_whole=args.impl is None)  # a target's source is not digested
    saved: list[str] = []
    start = time.perf_counter()
    status = EXIT_PASSED
    with interruptible():
        print(f"proving {len(report.order)} obligations with {args.jobs} worker(s)"
              f"{', proof cache ' + cache if cache else ', no proof cache'}", file=args.out, flush=True)
        try:
            for r in run:
                report.add(r)
                _print_result(r, args, saved)
        except Interrupted as e:
            run.close()
            report.interrupted = True
            status = e.status
            print(f"{e}: the workers were stopped", file=args.out, flush=True)
        except LemmaCycle as e:
            raise UsageError(str(e)) from None
        stop_interrupting()  # the work is over: a signal must not cut the report short
        report.seconds = time.perf_counter() - start
        print(report.summary(), file=args.out, flush=True)
        written = write_reports([
            ("--json", args.json, lambda: write_json(args.json, REPORT_SCHEMA, {**report.as_json(),
                                                                                "counterexamples": saved})),
            ("--junit", args.junit, lambda: write_junit(args.junit, "replayssm-verify prove", _junit_cases(report),
                                                        report.interrupted)),
        ], "the results are printed above")
    if status == EXIT_PASSED:
        status = EXIT_FINDING if report.failed else EXIT_PASSED
    return status_after_writing(status, written)


def _explain(args: argparse.Namespace) -> int:
    from replayssm.base.traces import load_trace
    from replayssm.verify.launch_explain import explain_launches
    from replayssm.verify.traces import explain, explain_counterexample

    try:
        kind, document = load_trace(args.file)
        if kind == "counterexample":
            text = explain_counterexample(document)
        elif kind in ("launch", "kernel"):
            if "states" not in document:  # a system trace's launches: the spec computes the states
                _interpreter_for("cpu")
                from replayssm.fuzz.launch_traces import spec_states

                document["states"] = spec_states(document)
            text = explain_launches(document)
        elif kind == "system":
            text = explain(document)
        else:
            raise ValueError(f"a {kind} trace is not drawn by explain (it draws system and launch traces and prove "
                             f"counterexamples); run it with: replayssm-verify replay {args.file}")
    except (OSError, ValueError) as e:
        print(f"error: cannot explain {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    return EXIT_PASSED


def _interpreter_for(device: str) -> None:
    """Triton chooses interpreter or compiler when it is imported."""
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")


NUMERIC_ONLY = ("state_dtype", "numeric_forward", "numeric_seconds", "numeric_dims", "numeric_plant")
"""The fuzz options of the numeric layer, refused without ``--numeric``."""


def _fuzz(args: argparse.Namespace) -> int:
    """Exit 0 passed, 1 a finding, 2 a set-up or usage error, 3 a coverage
    shortfall without a finding, 130/143 interrupted by SIGINT/SIGTERM."""
    _interpreter_for(args.device)
    from replayssm.fuzz.campaign import PROFILES, CampaignConfig, SetupError, run_campaign
    from replayssm.fuzz.report import EXIT_CODES, write_summary

    profile = PROFILES[args.profile]
    for name in ("examples", "max_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    check_output_file(args.junit, "--junit")
    if args.numeric and args.systems != 1:
        raise UsageError(f"--systems must be 1 with --numeric (the numeric layer runs one system), got {args.systems}")
    if args.numeric and (args.ray is not None or args.database is not None):
        raise UsageError(f"--{'ray' if args.ray is not None else 'database'} does not apply to --numeric "
                         "(one process, no example database)")
    numeric_only = [f"--{n.replace('_', '-')}" for n in NUMERIC_ONLY if getattr(args, n) is not None]
    if numeric_only and not args.numeric:
        raise UsageError(f"{', '.join(numeric_only)} only apply with --numeric")
    if args.numeric_seconds is not None and not 0 < args.numeric_seconds < float("inf"):
        raise UsageError(f"--numeric-seconds must be a number of seconds > 0, got {args.numeric_seconds}")
    if args.jobs is None and args.ray is None:
        args.jobs = min(2, usable_cpus())
    if args.numeric:
        from replayssm.fuzz.numeric_campaign import run_numeric_command

        return run_numeric_command(args, args.examples or profile["examples"], args.max_steps or profile["max_steps"])
    config = CampaignConfig(
        impl=args.impl, device=args.device,
        examples=args.examples or profile["examples"], max_steps=args.max_steps or profile["max_steps"],
        seed=args.seed, jobs=args.jobs, failures_dir=args.failures, level=args.level, profile=args.profile,
        watchdog=args.watchdog, shrink_seconds=args.shrink_seconds, drop=args.drop,
        database=args.database, ray=args.ray, systems=args.systems,
    )
    out = sys.stderr if args.json == STDOUT else sys.stdout  # stdout carries the JSON then
    try:
        result = run_campaign(config, out=out, json_path=args.json)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CODES["usage"]
    except KeyboardInterrupt:  # before the workers started (e.g. while importing the target)
        print("interrupted before the campaign started", file=sys.stderr)
        return EXIT_CODES["SIGINT"]
    if args.json:
        try:
            write_summary(result, args.json)
        except OSError as e:
            print(f"error: --json {args.json}: cannot write the summary: {e}", file=sys.stderr)
            if result["exit_code"] != EXIT_CODES["finding"]:
                return EXIT_CODES["usage"]
    if args.junit:
        failure = "\n".join([json.dumps(f) for f in result["findings"]]
                            + [f"scenario class never reached: {m}" for m in result["missing_scenarios"]]) or None
        write_junit(args.junit, "replayssm-verify fuzz", [JunitCase(
            f"{result['config']['impl']} {config.level} seed {config.seed}", result["seconds"], failure,
            "failure" if result["findings"] else "error")], result["interrupted"])
    return result["exit_code"]


def _replay(args: argparse.Namespace) -> int:
    from replayssm.base.traces import load_trace

    try:
        loaded = load_trace(args.file)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    recorded = loaded.trace.get("#meta", {}).get("device")
    # Triton picks interpreter or compiler when it is imported: before the replay modules are
    _interpreter_for(args.device or (recorded if recorded in ("cpu", "cuda") else "cpu"))
    if loaded.kind == "review":
        from replayssm.review.command import replay_trace

        return replay_trace(args, loaded.trace)
    from replayssm.fuzz.replay import replay
    from replayssm.verify.kernels.playback import replay_kernel_trace

    try:
        if loaded.kind == "kernel":
            from replayssm.review.kernel_proofs import every_role

            ok, report = replay_kernel_trace(loaded.trace, args.impl, args.device or "cpu", every_role())
        else:
            ok, report = replay(args.file, args.impl, args.device, args.level, args.watchdog, loaded=loaded)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as e:
        print(f"replay {e}", file=sys.stderr)
        return e.status
    print(report)
    return EXIT_PASSED if ok else EXIT_FINDING


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replayssm-verify", description=__doc__, epilog=EXIT_CODES_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="discharge the Z3 proof obligations")
    p.add_argument("--only", metavar="NAME", help="run the obligations whose name contains NAME")
    p.add_argument("--list", action="store_true",
                   help="show each obligation's statement and the assumptions of its first case")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--jobs", type=int, default=default_jobs(),
                   help=f"worker processes, 1 to {MAX_JOBS} (default: every CPU this process may run on, "
                   f"at most {DEFAULT_JOBS_CAP})")
    p.add_argument("--counterexamples", metavar="DIR", default="out/counterexamples",
                   help="where failed obligations' scenarios are saved (default: out/counterexamples)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case per obligation")
    p.add_argument("--cache", metavar="DIR", help="the proof cache's folder (default: $REPLAYSSM_VERIFY_CACHE, "
                   "else ~/.cache/replayssm-verify)")
    p.add_argument("--no-cache", action="store_true", help="prove every case again; read and write no cache")
    p.add_argument("--kernels", action="store_true",
                   help="prove the Triton kernels' source (memory safety, equivalence with the spec, int32, "
                        "conflicts): ours, or --impl's")
    p.add_argument("--impl", metavar="MODULE_OR_FILE",
                   help="with --kernels: the module or .py file whose kernels to prove (default: ours)")
    p.set_defaults(run=_prove)

    devices = ["cpu", "cuda"]
    f = sub.add_parser("fuzz", help="stateful conformance fuzzing of an implementation against the spec")
    f.add_argument("--device", choices=devices, default="cpu")
    f.add_argument("--impl", metavar="MODULE_OR_FILE", help="module name or .py file with the reference's entry points "
                   "(default: replayssm.impl.replayssm_utils)")
    f.add_argument("--profile", choices=["ci", "dev", "nightly"], default="ci")
    f.add_argument("--numeric", action="store_true", help="the numeric layer: real Mamba2 states through the "
                   "context level, checked against a float64 recurrence (docs/gpu.md)")
    f.add_argument("--state-dtype", choices=["float32", "bfloat16", "float16"],
                   help="with --numeric: the SSM state dtype (default: float32)")
    f.add_argument("--numeric-forward", choices=["torch", "flashinfer"],
                   help="with --numeric: the decode forward (default: flashinfer on cuda, torch on cpu)")
    f.add_argument("--numeric-seconds", type=float,
                   help="with --numeric: the time budget; each convention combination stops at its share")
    f.add_argument("--numeric-dims", choices=["small", "realistic"],
                   help="with --numeric: 2 heads x 4 x 4 with every geometry, or 6 heads x 64 x 128 in 2 groups, "
                        "window 16, <= 3 layers (default: realistic on cuda, small on cpu)")
    f.add_argument("--numeric-plant", choices=["plan one row short", "ring start off by one", "dropped checkpoint"],
                   help="with --numeric: plant a numeric-only fault (a tooth: the run must find it)")
    f.add_argument("--level", choices=["kernel", "context"], default="kernel",
                   help="launch the module's kernels directly, or go through its ReplaySSMModelContext")
    f.add_argument("--examples", type=int, help="examples in all, rounded up to a multiple of the 32 convention "
                   "combinations (default: the profile's)")
    f.add_argument("--max-steps", type=int, help="rules per example (default: the profile's)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--jobs", type=int, help="workers, 1 to 32 (one per convention combination at most; default: "
                   "2 or this machine's CPUs if fewer; with --ray, one per GPU (cuda) or CPU of the cluster)")
    f.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run the workers as Ray tasks, one GPU (cuda) or CPU each: on the cluster at ADDRESS, "
                   "or on a Ray started here without it (needs the extra: pip install -e '.[cluster]')")
    f.add_argument("--database", metavar="DIR", help="the Hypothesis example database the workers share: "
                   "failures found are stored there and replayed first by the next campaign (with --ray: a "
                   "folder on this machine)")
    f.add_argument("--watchdog", type=_seconds, metavar="SECONDS",
                   help="a launch running longer is a hang finding (default: per device and profile, docs/fuzz.md)")
    f.add_argument("--shrink-seconds", type=_seconds, metavar="SECONDS",
                   help="how long a finding may be shrunk (default: per profile, docs/fuzz.md)")
    f.add_argument("--failures", metavar="DIR", default="out/failures", help="where failing traces are saved")
    f.add_argument("--json", metavar="FILE", help="write the campaign summary as JSON (- for stdout; the report "
                   "then goes to stderr)")
    f.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case for the campaign")
    f.add_argument("--drop", metavar="NAME", help="break this caller assumption (a name in spec/assumptions.py's "
                   "PER_REQUEST) for some requests and judge the others by containment")
    f.add_argument("--systems", type=int, default=1, metavar="K",
                   help="independent small systems per launch, 1 to 256, driven in lockstep by one example; a "
                   "finding is still one system's trace (default 1; docs/fuzz.md)")
    f.set_defaults(run=_fuzz)

    r = sub.add_parser("replay", help="re-run a saved trace against an implementation")
    r.add_argument("file")
    r.add_argument("--impl", metavar="MODULE_OR_FILE", help="default: the trace's #meta.impl, else "
                   "replayssm.impl.replayssm_utils")
    r.add_argument("--device", choices=devices, help="default: the trace's #meta.device, else cpu")
    r.add_argument("--level", choices=["kernel", "context"], help="default: the trace's #meta.level, else kernel")
    r.add_argument("--watchdog", type=_seconds, metavar="SECONDS",
                   help="a launch running longer is a reproduced hang (default: the ci profile's for the device)")
    r.set_defaults(run=_replay)

    from replayssm.review.command import add_arguments, run as review

    v = sub.add_parser("review", help="review versions of vLLM's ReplaySSM kernels (any launch API) against the "
                                      "lifecycle; with --base, differentially")
    add_arguments(v)
    v.set_defaults(run=review)

    e = sub.add_parser("explain", help="print a trace step by step with ring diagrams: a system trace, a fuzz "
                         "failure, or a prove counterexample file")
    e.add_argument("file")
    e.set_defaults(run=_explain)
    return parser


EXIT_CODES_HELP = f"""exit status:
  {EXIT_PASSED}  passed
  {EXIT_FINDING}  a finding (failed obligation, discrepancy, broken invariant)
  {EXIT_USAGE}  bad usage or set-up (reported before any work)
  {EXIT_COVERAGE}  no finding, but a scenario class was never reached
  {EXIT_SIGINT}/{EXIT_SIGTERM}  interrupted by SIGINT/SIGTERM (partial results written)"""


def version() -> str:
    """The installed package's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("replayssm-verify")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader left (`prove --list | head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
