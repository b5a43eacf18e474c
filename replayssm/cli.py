"""``replayssm-verify``: ``prove`` the spec's obligations, ``fuzz`` an implementation against the spec,
``replay`` a saved failure or system trace, ``explain`` a system trace."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any


def _prove(args: argparse.Namespace) -> int:
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import render_scenario, save_counterexample

    if args.jobs < 1:
        print(f"error: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    try:
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
    results = []
    for r in _discharge([ob.name for ob in chosen], args.jobs):
        results.append(r)
        reused = f", {r.reused} parts proved by its lemmas" if r.reused else ""
        print(f"{r.name:<44} {r.status:<8} {r.seconds * 1000:8.1f} ms  ({r.cases} cases{reused})", flush=True)
        if r.status != "proved":
            if r.detail:
                print(f"    {r.detail}")
            if r.counterexample is not None:
                print(render_scenario(r.counterexample))
                scenario, *trace = save_counterexample(r, Path(args.counterexamples))
                print(f"    counterexample saved to {scenario}")
                for path in trace:
                    print(f"    its run saved to {path} (replayssm-verify explain FILE prints it step by step)")
    total = time.perf_counter() - start
    order = {n: i for i, n in enumerate(ob.name for ob in chosen)}
    results.sort(key=lambda r: order[r.name])
    failed = [r for r in results if r.status != "proved"]
    print(f"{len(results) - len(failed)}/{len(results)} obligations proved in {total:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"obligations": [r.as_json() for r in results], "seconds": round(total, 3)}, indent=2))
    return 1 if failed else 0


_NEXT_CASE: dict[str, Any] = {}
"""Per shardable obligation of a ``_discharge`` run, the index of the next
case a worker takes: shared memory the forked workers inherit."""

NO_CASE_LEFT = 2**31 - 1
"""The counter's value once a shard has failed: past every case index."""


def _take_next(name: str) -> Callable[[], int]:
    counter = _NEXT_CASE[name]

    def take() -> int:
        with counter.get_lock():
            counter.value += 1
            return counter.value - 1

    return take


def _prove_named(name: str, shard: tuple[int, int] = (0, 1), lemmas: tuple[str, ...] = (),
                 shared_cases: bool = False):
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import REGISTRY, prove

    obligations()
    take = _take_next(name) if shared_cases else None
    result = prove(REGISTRY[name], shard, [REGISTRY[n] for n in lemmas], take)
    if shared_cases and result.status != "proved":
        # the obligation has failed: the other shards take no further case
        with _NEXT_CASE[name].get_lock():
            _NEXT_CASE[name].value = NO_CASE_LEFT
    return result


PROVE_JOBS_CAP = 16
"""``prove``'s default worker count stops here: the scaling was measured up to
16 processes (docs/system.md), and the affinity mask does not see a
container's CPU quota."""


def _usable_cpus() -> int:
    """The CPUs this process may run on (all of them where the OS cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _discharge(names: list[str], jobs: int):
    """Prove each named obligation, ``jobs`` processes at a time, yielding
    results as they finish. A shardable obligation's cases are shared by
    ``jobs`` shards, each taking the next case not yet taken (so the workers
    finish within a case of each other); an obligation with lemmas in the run
    waits for them and reuses the parts they proved."""
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import REGISTRY, merge_shards

    obligations()
    waits = {n: [m for m in REGISTRY[n].lemmas if m in names] for n in names}
    status: dict[str, str] = {}

    def ready() -> list[tuple[str, tuple[str, ...]]]:
        out = [(n, tuple(m for m in waits[n] if status[m] == "proved")) for n in names
               if n not in status and n not in started and all(m in status for m in waits[n])]
        started.update(n for n, _ in out)
        return out

    started: set[str] = set()

    def stuck() -> ValueError:
        return ValueError(f"obligations waiting on each other's lemmas: {sorted(set(names) - set(status))}")

    if jobs <= 1:
        while len(status) < len(names):
            batch = ready()
            if not batch:
                raise stuck()
            for n, lemmas in batch:
                r = _prove_named(n, (0, 1), lemmas)
                status[n] = r.status
                yield r
        return
    context = multiprocessing.get_context("fork")
    _NEXT_CASE.clear()
    _NEXT_CASE.update({n: context.Value("i", 0) for n in names if REGISTRY[n].shardable})
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures: dict = {}
        shards_of: dict[str, list] = {}

        def submit() -> None:
            # whole obligations first: the shards after them share their cases
            for n, lemmas in sorted(ready(), key=lambda item: REGISTRY[item[0]].shardable):
                count = jobs if REGISTRY[n].shardable else 1
                shards_of[n] = []
                for i in range(count):
                    futures[pool.submit(_prove_named, n, (i, count), lemmas, count > 1)] = (n, count)

        submit()
        while futures:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for f in done:
                n, count = futures.pop(f)
                shards_of[n].append(f.result())
                if len(shards_of[n]) == count:
                    r = merge_shards(shards_of[n])
                    status[n] = r.status
                    yield r
            submit()
    if len(status) < len(names):
        raise stuck()


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
    _interpreter_for(args.device)
    from replayssm.fuzz.campaign import PROFILES, CampaignConfig, SetupError, run_campaign, summary_json

    profile = PROFILES[args.profile]
    for name in ("examples", "max_steps", "jobs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"error: --{name.replace('_', '-')} must be >= 1, got {value}", file=sys.stderr)
            return 2
    config = CampaignConfig(
        impl=args.impl, device=args.device,
        examples=args.examples or profile["examples"], max_steps=args.max_steps or profile["max_steps"],
        seed=args.seed, jobs=args.jobs, failures_dir=args.failures, level=args.level,
    )
    try:
        result = run_campaign(config)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        summary_json(result, args.json)
    return 0 if result["passed"] else 1


def _replay(args: argparse.Namespace) -> int:
    _interpreter_for(args.device)
    from replayssm.fuzz.campaign import replay

    try:
        ok, report = replay(args.file, args.impl, args.device, args.level)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return 2
    print(report)
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replayssm-verify", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="discharge the Z3 proof obligations")
    p.add_argument("--only", metavar="NAME", help="run the obligations whose name contains NAME")
    p.add_argument("--list", action="store_true",
                   help="show each obligation's statement and the assumptions of its first case")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--jobs", type=int, default=min(_usable_cpus(), PROVE_JOBS_CAP),
                   help=f"worker processes (default: every CPU this process may run on, at most {PROVE_JOBS_CAP})")
    p.add_argument("--counterexamples", metavar="DIR", default="out/counterexamples",
                   help="where failed obligations' scenarios are saved (default: out/counterexamples)")
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
    f.add_argument("--jobs", type=int, default=min(2, _usable_cpus()), help="worker processes")
    f.add_argument("--failures", metavar="DIR", default="out/failures", help="where shrunk failing traces are saved")
    f.add_argument("--json", metavar="FILE", help="write the campaign summary as JSON")
    f.set_defaults(run=_fuzz)

    r = sub.add_parser("replay", help="re-run a saved trace against an implementation")
    r.add_argument("file")
    r.add_argument("--impl", metavar="MODULE_OR_FILE")
    r.add_argument("--device", choices=devices, default="cpu")
    r.add_argument("--level", choices=["kernel", "context"], default="kernel")
    r.set_defaults(run=_replay)

    e = sub.add_parser("explain", help="print a system trace (proof counterexample) step by step with ring diagrams")
    e.add_argument("file")
    e.set_defaults(run=_explain)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
