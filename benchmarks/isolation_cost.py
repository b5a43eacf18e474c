"""The cost of running targets in processes of their own (issue 27), before against after, interleaved.

    python3 -P benchmarks/isolation_cost.py --before PYTHON --after PYTHON [--repeats 2] [--jobs 2]
        [--only NAME] [--kill-only] [--kill-seeds 0,1,2] [--out docs/results/isolation_cost.json]

``--before`` and ``--after`` are two interpreters, each with a
``replayssm-verify`` installed (before: a checkout without isolation, after:
one with it). Per repeat, each measurement runs on both, one after the other,
so a machine whose speed drifts (a shared one) affects both alike:

* ``fuzz``: a ci campaign of our kernels (``--examples 64``, seed 0,
  ``--jobs``): wall seconds and CPU seconds of the process and its children;
* ``review``: ``review A1.py --examples 2`` of the corpus: wall and CPU seconds;
* ``time to kill``: each planted kernel of ``time_to_kill.py`` (``--only``
  filters them) fuzzed with the ci profile until its first finding: wall
  seconds, as that benchmark measures them, once per seed of ``--kill-seeds``
  (``--kill-only``: this measurement alone). Besides the medians of each
  side, the median of the per-run ratios after / before of one kernel and
  seed (runs side by side, so the machine's drift cancels in each ratio).

Prints and writes one JSON object: every run, and per measurement the
medians before and after and their ratio, with the load average (1, 5, 15
minutes) at the start and the end: a shared machine's load is part of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header  # noqa: E402
from time_to_kill import PLANTED, planted_file  # noqa: E402



def timed(command: list[str], limit: float) -> tuple[float, float, int | None, str]:
    """Wall and CPU seconds (this child and its descendants) of ``command``, its exit status, its output's tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as cwd:  # not the checkout: its replayssm/ folder would shadow the install
            proc = subprocess.run(command, capture_output=True, text=True, timeout=limit, cwd=cwd)
        code, text = proc.returncode, proc.stdout[-400:] + proc.stderr[-400:]
    except subprocess.TimeoutExpired:
        code, text = None, "timed out"
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return round(wall, 2), round(cpu, 2), code, text


def fuzz_run(python: str, jobs: int, limit: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, code, text = timed([python, "-m", "replayssm", "fuzz", "--examples", "64", "--seed", "0",
                                       "--jobs", str(jobs), "--failures", tmp], limit)
    return {"seconds": wall, "cpu_seconds": cpu, "exit_code": code, "tail": text if code != 0 else ""}


def review_run(python: str, limit: float) -> dict:
    from replayssm.spec import corpus

    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, code, text = timed([python, "-m", "replayssm", "review", str(corpus.versions() / "A1.py"), "--examples", "2",
                                       "--traces", tmp], limit)
    return {"seconds": wall, "cpu_seconds": cpu, "exit_code": code, "tail": text if code not in (0, 1, 3) else ""}


def kill_run(python: str, name: str, seed: int, jobs: int, limit: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        impl = planted_file(folder, name)
        summary = folder / "summary.json"
        wall, cpu, code, _ = timed([python, "-m", "replayssm", "fuzz", "--impl", str(impl), "--profile", "ci",
                                    "--seed", str(seed), "--jobs", str(jobs), "--json", str(summary),
                                    "--failures", str(folder / "failures")], limit)
        result = json.loads(summary.read_text()) if summary.exists() else {}
    finding = (result.get("findings") or [None])[0]
    return {"planted": name, "seed": seed, "seconds": wall, "cpu_seconds": cpu, "exit_code": code, "killed": code == 1,
            "kind": finding["kind"] if finding else None, "reason": (finding or {}).get("reason")}


def medians(runs: list[dict], key: str = "seconds") -> dict:
    out = {}
    for side in ("before", "after"):
        values = [r[key] for r in runs if r["side"] == side]
        out[side] = statistics.median(values) if values else None
    out["ratio"] = round(out["after"] / out["before"], 3) if out["before"] and out["after"] else None
    return out


def paired_ratio(runs: list[dict]) -> float | None:
    """The median over (kernel, seed) of after / before, each pair run one after the other."""
    by = {(r["planted"], r["seed"], r["side"]): r["seconds"] for r in runs}
    ratios = [by[k[0], k[1], "after"] / by[k] for k in by if k[2] == "before" and (k[0], k[1], "after") in by]
    return round(statistics.median(ratios), 3) if ratios else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, metavar="PYTHON", help="an interpreter with the tree before isolation")
    p.add_argument("--after", required=True, metavar="PYTHON", help="an interpreter with the tree after it")
    p.add_argument("--repeats", type=int, default=2, help="runs of the fuzz and review measurements per side")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", metavar="NAME", help="the planted kernels whose name contains NAME ('' for all)")
    p.add_argument("--limit", type=float, default=600.0, help="seconds before one run is stopped")
    p.add_argument("--kill-only", action="store_true", help="only the time to kill (no fuzz or review runs)")
    p.add_argument("--kill-seeds", default="0", metavar="SEEDS",
                   help="comma-separated fuzz seeds of each time-to-kill run (default 0)")
    p.add_argument("--out", metavar="FILE", help="also write the JSON here")
    args = p.parse_args()
    try:
        seeds = [int(s) for s in args.kill_seeds.split(",")]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 0:
        print(f"error: --kill-seeds takes comma-separated integers >= 0, got {args.kill_seeds!r}", file=sys.stderr)
        return 2
    error = bad_options({"--jobs": args.jobs, "--repeats": args.repeats}, args.out)
    for flag, python in (("--before", args.before), ("--after", args.after)):
        if error is None and not (os.path.isfile(python) and os.access(python, os.X_OK)):
            error = f"error: {flag} {python!r} is not an executable interpreter"
    names = [n for n in PLANTED if args.only is None or args.only in n]
    if error is None and not names:
        error = f"error: --only {args.only!r} matches none of {list(PLANTED)}"
    if error is None and args.limit <= 0:
        error = f"error: --limit must be > 0 seconds, got {args.limit}"
    if error:
        print(error, file=sys.stderr)
        return 2
    sides = (("before", args.before), ("after", args.after))
    fuzz, review, kill = [], [], []
    load_at_start = os.getloadavg()
    for n in range(0 if args.kill_only else args.repeats):
        for side, python in sides if n % 2 == 0 else sides[::-1]:
            fuzz.append({"side": side, "repeat": n, **fuzz_run(python, args.jobs, args.limit)})
            review.append({"side": side, "repeat": n, **review_run(python, args.limit)})
            print(f"repeat {n} {side}: fuzz {fuzz[-1]['seconds']} s, review {review[-1]['seconds']} s",
                  file=sys.stderr, flush=True)
    pairs = [(name, seed) for seed in seeds for name in names]
    for i, (name, seed) in enumerate(pairs):
        for side, python in sides if i % 2 == 0 else sides[::-1]:
            kill.append({"side": side, **kill_run(python, name, seed, args.jobs, args.limit)})
            print(f"{name:<40} seed {seed} {side}: {kill[-1]['seconds']:6.1f} s {kill[-1]['kind']}",
                  file=sys.stderr, flush=True)
    out = {**header(), "before": args.before, "after": args.after, "jobs": args.jobs,
           "load_average": {"start": [round(x, 2) for x in load_at_start],
                            "end": [round(x, 2) for x in os.getloadavg()]},
           "fuzz": {"runs": fuzz, "wall": medians(fuzz), "cpu": medians(fuzz, "cpu_seconds")},
           "review": {"runs": review, "wall": medians(review), "cpu": medians(review, "cpu_seconds")},
           "time_to_kill": {"runs": kill, "seeds": seeds, "median": medians(kill), "paired_ratio": paired_ratio(kill),
                            "max": {s: max((r["seconds"] for r in kill if r["side"] == s), default=None)
                                    for s in ("before", "after")},
                            "not_killed": {s: [r["planted"] for r in kill if r["side"] == s and not r["killed"]]
                                           for s in ("before", "after")}}}
    emit(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
