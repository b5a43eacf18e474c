"""``replayssm-verify``: ``prove`` the spec's obligations, ``fuzz`` an implementation against the spec,
``replay`` a saved failure or system trace, ``explain`` a system trace."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from replayssm.verify.runner import DEFAULT_JOBS_CAP, MAX_JOBS, default_jobs, usable_cpus


def _prove(args: argparse.Namespace) -> int:
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import REGISTRY, render_scenario, save_counterexample
    from replayssm.verify.runner import Report, discharge

    if not 1 <= args.jobs <= MAX_JOBS:
        print(f"error: --jobs must be in [1, {MAX_JOBS}], got {args.jobs}", file=sys.stderr)
        return 2
    if args.impl is not None and not args.kernels:
        print("error: --impl names the kernels to prove: it needs --kernels", file=sys.stderr)
        return 2
    try:
        if args.kernels:
            from replayssm.verify.kernels.selection import kernel_obligations

            chosen = [REGISTRY[n] for n in kernel_obligations(args.impl, args.only)]
        else:
            chosen = obligations(args.only)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for ob in chosen:
            print(f"{ob.name}  [{ob.transition}]\n    {ob.statement}")
            first = next(iter(ob.build()), None)
            names = sorted({n for n, _ in first.assumptions}) if first is not None else []
            print(f"    assumptions (first case{': ' + first.case if first is not None and first.case else ''}): "
                  f"{', '.join(names)}")
        return 0
    start = time.perf_counter()
    report = Report([ob.name for ob in chosen])
    for r in discharge(report.order, args.jobs):
        report.add(r)
        reused = f", {r.reused} parts proved by its lemmas" if r.reused else ""
        print(f"{r.name:<44} {r.status:<8} {r.seconds * 1000:8.1f} ms  ({r.cases} cases{reused})", flush=True)
        if r.status != "proved":
            if r.detail:
                print(f"    {r.detail}")
            if r.counterexample is not None:
                print(render_scenario(r.counterexample))
                scenario, *trace = save_counterexample(r, Path(args.counterexamples))
                print(f"    counterexample saved to {scenario}")
                if r.name.startswith("kernel."):
                    from replayssm.verify.kernels.selection import describe_failure

                    print("\n".join(describe_failure(r, Path(args.counterexamples), args.impl)))
                for path in trace:
                    print(f"    its run saved to {path} (replayssm-verify explain FILE prints it step by step)")
    report.seconds = time.perf_counter() - start
    print(report.summary())
    if args.json:
        Path(args.json).write_text(json.dumps(report.as_json(), indent=2))
    return 1 if report.failed else 0


def _explain(args: argparse.Namespace) -> int:
    from replayssm.verify.traces import explain

    try:
        print(explain(args.file))
    except (OSError, ValueError) as e:
        print(f"error: cannot explain {args.file}: {e}", file=sys.stderr)
        return 2
    return 0


def _interpreter_for(device: str) -> None:
    """Triton chooses interpreter or compiler when it is imported."""
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")


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
            print(f"error: --{name.replace('_', '-')} must be >= 1, got {value}", file=sys.stderr)
            return 2
    config = CampaignConfig(
        impl=args.impl, device=args.device,
        examples=args.examples or profile["examples"], max_steps=args.max_steps or profile["max_steps"],
        seed=args.seed, jobs=args.jobs, failures_dir=args.failures, level=args.level, profile=args.profile,
        watchdog=args.watchdog, shrink_seconds=args.shrink_seconds,
    )
    out = sys.stderr if args.json == "-" else sys.stdout  # stdout carries the JSON then
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
    return result["exit_code"]


def _replay(args: argparse.Namespace) -> int:
    from replayssm.fuzz.workers import Interrupted

    _interpreter_for(args.device or _recorded_device(args.file))
    from replayssm.fuzz.campaign import replay
    from replayssm.verify.kernels.playback import kernel_trace, replay_kernel_trace
    from replayssm.review.campaign import is_review_trace

    if is_review_trace(args.file):
        from replayssm.review.command import replay_trace

        return replay_trace(args)

    try:
        trace = kernel_trace(args.file)
        if trace is not None:
            ok, report = replay_kernel_trace(trace, args.impl, args.device or "cpu")
        else:
            ok, report = replay(args.file, args.impl, args.device, args.level, args.watchdog)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"replay {e}", file=sys.stderr)
        return 128 + e.signum
    print(report)
    return 0 if ok else 1


def _recorded_device(path: str) -> str:
    """The device a trace's ``#meta`` names (cpu when it names none or cannot be read):
    Triton picks interpreter or compiler at import, before the trace is loaded."""
    try:
        device = json.loads(Path(path).read_text()).get("#meta", {}).get("device")
    except (OSError, ValueError, AttributeError):
        return "cpu"
    return device if device in ("cpu", "cuda") else "cpu"


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
    parser = argparse.ArgumentParser(prog="replayssm-verify", description=__doc__)
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
    f.add_argument("--level", choices=["kernel", "context"], default="kernel",
                   help="launch the module's kernels directly, or go through its ReplaySSMModelContext")
    f.add_argument("--examples", type=int, help="examples in all, rounded up to a multiple of the 32 convention "
                   "combinations (default: the profile's)")
    f.add_argument("--max-steps", type=int, help="rules per example (default: the profile's)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--jobs", type=int, default=min(2, usable_cpus()),
                   help="worker processes, 1 to 32 (one per convention combination at most)")
    f.add_argument("--watchdog", type=_seconds, metavar="SECONDS",
                   help="a launch running longer is a hang finding (default: per device and profile, docs/fuzz.md)")
    f.add_argument("--shrink-seconds", type=_seconds, metavar="SECONDS",
                   help="how long a finding may be shrunk (default: per profile, docs/fuzz.md)")
    f.add_argument("--failures", metavar="DIR", default="out/failures", help="where failing traces are saved")
    f.add_argument("--json", metavar="FILE", help="write the campaign summary as JSON (- for stdout; the report "
                   "then goes to stderr)")
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

    e = sub.add_parser("explain", help="print a system trace (proof counterexample) step by step with ring diagrams")
    e.add_argument("file")
    e.set_defaults(run=_explain)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
