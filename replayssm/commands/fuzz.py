"""``replayssm-verify fuzz``: stateful conformance fuzzing of an implementation against the spec
(``fuzz.campaign``), or with ``--numeric`` the numeric layer (``fuzz.numeric_campaign``); the summary
as JSON and JUnit."""

from __future__ import annotations

import argparse
import json
import sys

from replayssm.base.reports import (
    EXIT_SIGINT,
    EXIT_USAGE,
    STDOUT,
    JunitCase,
    UsageError,
    check_distinct_outputs,
    check_output_file,
    status_after_writing,
    write_json,
    write_junit,
    write_reports,
)
from replayssm.verify.runner import usable_cpus

from . import DEVICES, interpreter_for, seconds
from .finding_reports import add_options, check_options, fuzz_reports

NAME = "fuzz"
HELP = "stateful conformance fuzzing of an implementation against the spec"
OUTPUTS = """outputs:
  the report, with progress lines, on standard output (standard error with --json -)
  each finding's trace in --failures DIR (default out/failures): replay it with
    replayssm-verify replay FILE, draw it with replayssm-verify explain FILE
  --json, --junit, --sarif, --html: written when the campaign ends or is interrupted"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="run the kernels compiled on CUDA, or under Triton's interpreter on the CPU (default)")
    parser.add_argument("--impl", metavar="MODULE_OR_FILE", help="module name or .py file with the reference's entry points "
                        "(default: replayssm.impl.replayssm_utils)")
    parser.add_argument("--profile", choices=["ci", "dev", "nightly"], default="ci",
                        help="the campaign's size: examples, steps, watchdogs and shrinking (default: ci; docs/fuzz.md)")
    parser.add_argument("--numeric", action="store_true", help="the numeric layer: real Mamba2 states through the "
                        "context level, checked against a float64 recurrence (docs/gpu.md)")
    parser.add_argument("--state-dtype", choices=["float32", "bfloat16", "float16"],
                        help="with --numeric: the SSM state dtype (default: float32)")
    parser.add_argument("--numeric-forward", choices=["torch", "flashinfer"],
                        help="with --numeric: the decode forward (default: flashinfer on cuda, torch on cpu)")
    parser.add_argument("--numeric-seconds", type=float,
                        help="with --numeric: the time budget; each convention combination stops at its share")
    parser.add_argument("--numeric-dims", choices=["small", "realistic"],
                        help="with --numeric: 2 heads x 4 x 4 with every geometry, or 6 heads x 64 x 128 in 2 groups, "
                             "window 16, <= 3 layers (default: realistic on cuda, small on cpu)")
    parser.add_argument("--numeric-plant", choices=["plan one row short", "ring start off by one", "dropped checkpoint"],
                        help="with --numeric: plant a numeric-only fault (a tooth: the run must find it)")
    parser.add_argument("--level", choices=["kernel", "context"],
                        help="launch the module's kernels directly (the default), or go through its "
                        "ReplaySSMModelContext")
    parser.add_argument("--examples", type=int, help="examples in all, rounded up to a multiple of the 32 convention "
                        "combinations (default: the profile's)")
    parser.add_argument("--max-steps", type=int, help="rules per example (default: the profile's)")
    parser.add_argument("--seed", type=int, default=0,
                        help="Hypothesis's seed: the same seed, options and tree draw the same examples (default: 0)")
    parser.add_argument("--jobs", type=int, help="workers, 1 to 32 (one per convention combination at most; default: "
                        "2 or this machine's CPUs if fewer; with --ray, one per GPU (cuda) or CPU of the cluster)")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run the workers as Ray tasks, one GPU (cuda) or CPU each: on the cluster at ADDRESS, "
                        "or on a Ray started here without it (needs the extra: pip install -e '.[cluster]')")
    parser.add_argument("--database", metavar="DIR", help="the Hypothesis example database the workers share: "
                        "failures found are stored there and replayed first by the next campaign (with --ray: a "
                        "folder on this machine)")
    parser.add_argument("--watchdog", type=seconds, metavar="SECONDS",
                        help="a launch running longer is a hang finding (default: per device and profile, docs/fuzz.md)")
    parser.add_argument("--shrink-seconds", type=seconds, metavar="SECONDS",
                        help="how long a finding may be shrunk (default: per profile, docs/fuzz.md)")
    parser.add_argument("--failures", metavar="DIR", default="out/failures", help="where failing traces are saved")
    parser.add_argument("--json", metavar="FILE", help="write the campaign summary as JSON (- for stdout; the report "
                        "then goes to stderr)")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case for the campaign")
    add_options(parser)
    parser.add_argument("--drop", metavar="NAME", action="append",
                        help="break this caller assumption (one with a row breaker: spec/assumptions.py's per_request_drops) for some "
                        "requests and judge the others by containment (one per campaign)")
    parser.add_argument("--systems", type=int, default=1, metavar="K",
                        help="independent small systems per launch, 1 to 256, driven in lockstep by one example; a "
                        "finding is still one system's trace (default 1; docs/fuzz.md)")


NUMERIC_ONLY = ("state_dtype", "numeric_forward", "numeric_seconds", "numeric_dims", "numeric_plant")
"""The fuzz options of the numeric layer, refused without ``--numeric``."""


def run(args: argparse.Namespace) -> int:
    """Exit 0 passed, 1 a finding, 2 a set-up or usage error, 3 a coverage
    shortfall without a finding, 130/143 interrupted by SIGINT/SIGTERM."""
    interpreter_for(args.device)
    from replayssm.fuzz.campaign import run_campaign
    from replayssm.fuzz.campaign_config import PROFILES, CampaignConfig, SetupError, check_budget
    from replayssm.fuzz.report import SUMMARY_SCHEMA

    profile = PROFILES[args.profile]
    examples = profile["examples"] if args.examples is None else args.examples
    max_steps = profile["max_steps"] if args.max_steps is None else args.max_steps
    check_output_file(args.json, "--json", stdout_ok=True)
    check_output_file(args.junit, "--junit")
    check_options(args)
    if args.drop is not None and len(args.drop) > 1:  # containment judges one broken assumption at a time
        raise UsageError(f"--drop takes one assumption per campaign, got {len(args.drop)}: {', '.join(args.drop)} "
                         "(it used to keep only the last); run one campaign per assumption")
    args.drop = args.drop[0] if args.drop else None
    check_distinct_outputs({"--json": args.json, "--junit": args.junit, "--sarif": getattr(args, "sarif", None),
                            "--html": getattr(args, "html", None)})
    if args.numeric and (args.sarif or args.html):
        raise UsageError(f"--{'sarif' if args.sarif else 'html'} does not apply to --numeric (its findings name no "
                         "kernel line or trace to draw)")
    if args.numeric and args.systems != 1:
        raise UsageError(f"--systems must be 1 with --numeric (the numeric layer runs one system), got {args.systems}")
    if args.numeric and (args.ray is not None or args.database is not None):
        raise UsageError(f"--{'ray' if args.ray is not None else 'database'} does not apply to --numeric "
                         "(one process, no example database)")
    ignored = [f"--{n.replace('_', '-')}" for n in ("drop", "watchdog", "shrink_seconds") if getattr(args, n)]
    if args.numeric and (ignored or args.level == "kernel"):
        raise UsageError(f"{', '.join(ignored) or '--level kernel'} does not apply to --numeric (it runs the "
                         "context level on real states, with its own time budget: --numeric-seconds)")
    args.level = args.level or "kernel"
    numeric_only = [f"--{n.replace('_', '-')}" for n in NUMERIC_ONLY if getattr(args, n) is not None]
    if numeric_only and not args.numeric:
        raise UsageError(f"{', '.join(numeric_only)} only apply with --numeric")
    if args.numeric_seconds is not None and not 0 < args.numeric_seconds < float("inf"):
        raise UsageError(f"--numeric-seconds must be a number of seconds > 0, got {args.numeric_seconds}")
    if args.jobs is None and args.ray is None:
        args.jobs = min(2, usable_cpus())
    if args.numeric:
        from replayssm.fuzz.numeric_campaign import run_numeric_command

        try:
            check_budget(examples, max_steps)  # the campaign's check_setup does it for the other runs
        except SetupError as e:
            raise UsageError(str(e)) from None
        return run_numeric_command(args, examples, max_steps)
    config = CampaignConfig(
        impl=args.impl, device=args.device, examples=examples, max_steps=max_steps,
        seed=args.seed, jobs=args.jobs, failures_dir=args.failures, level=args.level, profile=args.profile,
        watchdog=args.watchdog, shrink_seconds=args.shrink_seconds, drop=args.drop,
        database=args.database, ray=args.ray, systems=args.systems,
    )
    out = sys.stderr if args.json == STDOUT else sys.stdout  # stdout carries the JSON then
    try:
        result = run_campaign(config, out=out)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before the workers started (e.g. while importing the target)
        print("interrupted before the campaign started", file=sys.stderr)
        return EXIT_SIGINT
    written = write_reports([
        ("--json", args.json, lambda: write_json(args.json, SUMMARY_SCHEMA, result)),
        ("--junit", args.junit, lambda: write_junit(args.junit, SUITE, [junit_case(result)], result["interrupted"])),
        *fuzz_reports(args, result)], "the findings are printed above")
    return status_after_writing(result["exit_code"], written)


SUITE = "replayssm-verify fuzz"
"""The JUnit test suite of ``fuzz --junit``."""


def junit_case(summary: dict) -> JunitCase:
    """``fuzz --junit``'s one test case, from the campaign's JSON summary: a failure
    per finding, an error for a coverage shortfall."""
    failure = "\n".join([json.dumps(f) for f in summary["findings"]]
                        + [f"scenario class never reached: {m}" for m in summary["missing_scenarios"]]) or None
    c = summary["config"]
    return JunitCase(f"{c['impl']} {c['level']} seed {c['seed']}", summary["seconds"], failure,
                     "failure" if summary["findings"] else "error")
