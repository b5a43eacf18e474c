"""Verified request-steps per second: the stateful campaign (K systems per launch) and the wide runner.

    python3 -P benchmarks/fuzz_throughput.py --device cpu  [--systems 1 8 --repeat 2 --jobs 2 --rows 16 --steps 8]
    python3 -P benchmarks/fuzz_throughput.py --device cuda --systems 1 64 --jobs 14 --stateful-examples 448 \\
        --warm --rows 4096 --steps 40 --wide-jobs 8 --out throughput.json

The stateful campaign runs once per ``--systems`` value (``fuzz --systems K``:
K independent small systems per launch, docs/fuzz.md) and ``--repeat`` times,
the values interleaved (K1, K2, K1, K2, ...) so that a load change hits all of
them alike; each run is a fresh campaign of the same seed (the same examples).
``--warm`` first runs each campaign once untimed, so that the timed runs find
every Triton kernel variant they launch compiled (on CUDA each of the 32
conventions x 6 geometries x K is a compile; the timed runs then load them
from Triton's cache). A verified request-step is one request advanced one
step and checked against the spec (padding rows do not count), as in the
campaign's summary. Reported per K: request-steps, wall seconds and verified
request-steps/s of each run and their median (from the campaign's start:
worker start-up included), the same over the workers' mean busy time (from
each worker's first example to its last: ``busy_request_steps_per_s``, what a
long campaign approaches), CPU seconds (user + sys of the
campaign's worker processes as each reports it, with the children it waited for;
``children_cpu_seconds``: what this process's children used, which on CUDA
since 2026-12-06 leaves the workers out: they fork from a fork server), the time in the implementation and in the spec
summed over workers, the campaign's ``time_split`` (each worker's start-up,
busy time and tail: ``fuzz/campaign_times.py``) and the median rate over that
of K = 1 measured in the same run (campaigns after the first in one process
find the CUDA workers' fork server started: run one campaign per process to
count its start, as ``scripts/gpu_throughput_trees.sh`` does). The wide runner (``fuzz/wide.py``) runs first. Prints the JSON
report and writes it to ``--out`` (also after each stateful run, with
``"complete": false`` until the end).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing.forkserver
import os
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# The sibling module, also under ``python3 -P`` (which leaves the script's
# folder off ``sys.path``; the GPU scripts run Python that way).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header, write  # noqa: E402


def _wide(args: tuple) -> dict:
    impl, device, rows, steps, seed, profile = args
    entered = time.time()
    # on CUDA imported already (the fork server's preload); on CPU this process is a fork of the benchmark's
    from replayssm.fuzz.wide import run_wide
    from replayssm.fuzz.wide_start import forked_hosts

    imports = time.time() - entered
    run = functools.partial(run_wide, impl, device, rows, steps, seed=seed, forked=forked_hosts(device))
    if profile:  # cProfile of this process's run, to PROFILE/wide_SEED.prof
        import cProfile

        prof = cProfile.Profile()
        r = prof.runcall(run)
        prof.dump_stats(str(Path(profile) / f"wide_{seed}.prof"))
    else:
        r = run()
    if r.fault is not None:  # the target's fault stopped the run: no throughput to report
        raise RuntimeError(f"the wide run of {impl or 'our kernels'} stopped: {r.fault}")
    return {"request_steps": r.request_steps, "seconds": r.seconds, "kernel_seconds": r.kernel_seconds,
            "discrepancies": r.discrepancies, "entered": entered,
            "import_seconds": time.time() - entered - r.seconds, "harness_import_seconds": imports,
            "start_up_seconds": r.start_up_seconds, "parts": r.parts}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stateful_run(args: argparse.Namespace, systems: int) -> dict:
    """One campaign of ``systems`` systems per launch: its counts, wall and CPU time."""
    from replayssm.fuzz.campaign import run_campaign
    from replayssm.fuzz.campaign_config import CampaignConfig

    config = CampaignConfig(args.impl, args.device, args.stateful_examples, args.stateful_steps, args.seed,
                            args.jobs, "out/bench-failures", systems=systems)
    cpu = _children_cpu()
    with open(os.devnull, "w") as quiet:
        s = run_campaign(config, out=quiet)
    wall = s["seconds"]
    split = s.get("time_split")
    return {"request_steps": s["request_steps"], "examples": s["examples"], "seconds": wall,
            "time_split": split,
            "request_steps_per_s": round(s["request_steps"] / wall, 1),
            "busy_request_steps_per_s": (round(s["request_steps"] / (s["worker_seconds"] / args.jobs), 1)
                                         if s["worker_seconds"] else None),
            # the workers' own CPU as they report it (on CUDA they are forks of a fork server, not
            # children of this process); the children's counts only what this process waited for
            "cpu_seconds": s.get("worker_cpu_seconds", round(_children_cpu() - cpu, 2)),
            "children_cpu_seconds": round(_children_cpu() - cpu, 2),
            "kernel_seconds": s["kernel_seconds"], "spec_seconds": s["spec_seconds"],
            "worker_seconds": s["worker_seconds"], "passed": s["passed"],
            "findings": len(s["findings"]), "missing_scenarios": len(s["missing_scenarios"])}


def stateful(args: argparse.Namespace, report: dict) -> None:
    """Every ``--systems`` value, ``--repeat`` times, interleaved; medians and
    ratios to K = 1 in ``report["stateful"]``, written to ``--out`` after each
    run (a bounded call that runs out of time keeps what it measured)."""
    if args.warm:
        for k in args.systems:
            print(f"warm-up: --systems {k}", file=sys.stderr, flush=True)
            report.setdefault("warm_up", {})[str(k)] = stateful_run(args, k)
    runs: dict[int, list[dict]] = {k: [] for k in args.systems}
    for r in range(args.repeat):
        for k in args.systems:
            runs[k].append(stateful_run(args, k))
            print(f"round {r + 1}/{args.repeat}, --systems {k}: {runs[k][-1]['request_steps_per_s']} "
                  "verified request-steps/s", file=sys.stderr, flush=True)
            report["stateful"] = _summary({k: rs for k, rs in runs.items() if rs})
            if args.out:
                write({**report, "complete": False}, args.out)


def _summary(runs: dict[int, list[dict]]) -> dict:
    out: dict = {}
    for k, rs in runs.items():
        out[str(k)] = {"request_steps_per_s": statistics.median(x["request_steps_per_s"] for x in rs),
                       "busy_request_steps_per_s": statistics.median(x["busy_request_steps_per_s"] or 0 for x in rs),
                       "cpu_seconds_per_request_step": round(sum(x["cpu_seconds"] for x in rs)
                                                             / max(1, sum(x["request_steps"] for x in rs)), 6),
                       "runs": rs}
    if 1 in runs:
        base = out["1"]["request_steps_per_s"]
        for k in runs:
            out[str(k)]["over_one_system"] = round(out[str(k)]["request_steps_per_s"] / base, 2) if base else None
    return out


def wide(args: argparse.Namespace) -> dict:
    """The wide runner on ``--wide-jobs`` processes, one system of ``--rows`` requests each.
    Where the wall time goes: ``time_split`` (means over the processes: ``spawn``,
    the pool's start to the process's first line; ``imports``, its target already loading meanwhile
    (``fuzz/wide_start.py``: none left on CUDA); ``start_up``, the
    target loaded and the system set up; ``steps``; the rest, ``tail``, the pool's
    end) and ``step_parts`` (seconds summed over processes, :data:`~replayssm.fuzz.wide.STEP_PARTS`);
    the processes come from ``fuzz/wide_start.wide_context`` (on CUDA forks of a fork server that
    imported the harness, started inside the clock: its imports count in ``spawn``), and the fork
    server is stopped after them (the campaign's workers fork from one with their own preload);
    with ``--profile DIR`` each process's cProfile goes to DIR/wide_SEED.prof and
    their merged top functions to DIR/wide_profile.txt."""
    from replayssm.fuzz.wide_start import wide_context

    ctx = wide_context(args.device)
    start, started_at = time.perf_counter(), time.time()
    with ProcessPoolExecutor(args.wide_jobs, mp_context=ctx) as pool:
        parts = list(pool.map(_wide, [(args.impl, args.device, args.rows, args.steps, seed, args.profile)
                                      for seed in range(args.wide_jobs)]))
    wall = time.perf_counter() - start
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]  # nothing if none started
    steps = sum(x["request_steps"] for x in parts)
    kernel = sum(x["kernel_seconds"] for x in parts)
    busy = sum(x["seconds"] for x in parts)
    spawn = statistics.fmean(x["entered"] - started_at for x in parts)
    imports = statistics.fmean(x["import_seconds"] for x in parts)
    start_up = statistics.fmean(x["start_up_seconds"] for x in parts)
    stepping = statistics.fmean(x["seconds"] - x["start_up_seconds"] for x in parts)
    step_parts = {k: round(sum(x["parts"].get(k, 0.0) for x in parts), 3) for k in parts[0]["parts"]}
    if args.profile:
        _merge_profiles(args.profile, args.wide_jobs)
    return {"rows": args.rows, "steps_per_process": args.steps, "processes": args.wide_jobs,
            "request_steps": steps, "seconds": round(wall, 3), "request_steps_per_s": round(steps / wall, 1),
            "stepping_request_steps_per_s": round(steps / stepping, 1) if stepping > 0 else None,
            "kernel_seconds": round(kernel, 3), "process_seconds": round(busy, 3),
            "harness_over_kernels": round((busy - kernel) / kernel, 4) if kernel else None,
            "time_split": {"spawn": round(spawn, 3), "imports": round(imports, 3), "start_up": round(start_up, 3),
                           "steps": round(stepping, 3),
                           "tail": round(wall - spawn - imports - start_up - stepping, 3)},
            "step_parts": step_parts, "discrepancies": sum(x["discrepancies"] for x in parts)}


def _merge_profiles(folder: str, processes: int) -> None:
    """The processes' profiles merged, top 60 by own time and by cumulative time, as text."""
    import io
    import pstats

    text = io.StringIO()
    stats = pstats.Stats(*(str(Path(folder) / f"wide_{seed}.prof") for seed in range(processes)), stream=text)
    stats.sort_stats("tottime").print_stats(60)
    stats.sort_stats("cumulative").print_stats(60)
    (Path(folder) / "wide_profile.txt").write_text(text.getvalue())


def profile_worker(args: argparse.Namespace, systems: int) -> None:
    """Worker 0's share of the campaign (its combinations, ``--stateful-examples``), run in
    this process under cProfile: ``--profile``/worker.prof and the top functions in worker_profile.txt."""
    import cProfile
    import io
    import pstats

    from replayssm.fuzz.campaign_config import CampaignConfig
    from replayssm.fuzz.campaign_worker import run_worker

    config = CampaignConfig(args.impl, args.device, args.stateful_examples, args.stateful_steps, args.seed,
                            args.jobs, "out/bench-failures", systems=systems)
    prof = cProfile.Profile()
    result = prof.runcall(run_worker, config, 0)
    path = Path(args.profile) / "worker.prof"
    prof.dump_stats(str(path))
    text = io.StringIO()
    print(f"worker 0: {result['stats']['request_steps']} request-steps, {result['seconds']:.1f} s, "
          f"findings {len(result['findings'])}", file=text)
    stats = pstats.Stats(str(path), stream=text)
    stats.sort_stats("tottime").print_stats(60)
    stats.sort_stats("cumulative").print_stats(60)
    (Path(args.profile) / "worker_profile.txt").write_text(text.getvalue())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--impl", default=None)
    p.add_argument("--systems", type=int, nargs="+", default=[1, 8],
                   help="systems per launch of the stateful campaign, one run each per round (default: 1 8)")
    p.add_argument("--repeat", type=int, default=1, help="rounds over the --systems values")
    p.add_argument("--warm", action="store_true", help="run each campaign once untimed first (kernel compiles)")
    p.add_argument("--stateful-examples", type=int, default=64)
    p.add_argument("--stateful-steps", type=int, default=12, help="rules per example")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="campaign worker processes")
    p.add_argument("--rows", type=int, default=16, help="wide runner: requests per launch")
    p.add_argument("--steps", type=int, default=10, help="wide runner: steps per process")
    p.add_argument("--wide-jobs", type=int, help="wide runner processes (default: --jobs)")
    p.add_argument("--no-wide", action="store_true", help="measure the stateful campaign only")
    p.add_argument("--out", help="also write the JSON report here")
    p.add_argument("--profile", help="an existing folder: cProfile of the wide processes and, after the "
                   "timed runs, of worker 0's share of the campaign (largest --systems) in this process")
    args = p.parse_args()
    args.wide_jobs = args.wide_jobs if args.wide_jobs is not None else args.jobs
    error = bad_options({"--rows": args.rows, "--steps": args.steps, "--jobs": args.jobs, "--repeat": args.repeat,
                         "--wide-jobs": args.wide_jobs, "--stateful-examples": args.stateful_examples,
                         "--stateful-steps": args.stateful_steps, **{"--systems": min(args.systems)}}, args.out)
    if error is None and len(set(args.systems)) != len(args.systems):
        error = f"error: --systems values must differ, got {args.systems}"
    if error is None and args.profile and not Path(args.profile).is_dir():
        error = f"error: --profile must be an existing folder, got {args.profile}"
    if error is None and args.seed < 0:
        error = f"error: --seed must be >= 0, got {args.seed}"
    if error is None:
        from replayssm.fuzz.lockstep import MAX_SYSTEMS

        if max(args.systems) > MAX_SYSTEMS:
            error = f"error: --systems must be in [1, {MAX_SYSTEMS}], got {max(args.systems)}"
    if error:
        print(error, file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import triton

    report: dict = header(torch=torch.__version__, triton=triton.__version__, device=args.device)
    if args.device == "cuda":
        report["gpu"] = torch.cuda.get_device_name(0)
    if not args.no_wide:
        report["wide"] = wide(args)
    stateful(args, report)
    if args.profile:
        profile_worker(args, max(args.systems))
    emit({**report, "complete": True}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
