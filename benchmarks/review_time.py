"""Wall and CPU time of ``replayssm-verify review`` of one version with the default budget.

    python3 benchmarks/review_time.py [VERSION ...] [--budget SECONDS] [--repeat N] [--json FILE]

VERSION defaults to the corpus's A1 and D2 (``vllm-versions`` in ``$REPLAYSSM_CORPUS``, default ``../shared/reference``).
Each review runs in its own process (as the CLI would), so the figures include
importing torch and Triton and loading the version. The goal: <= 60 s per
version on 2 cores with the default budget (a count of examples: the CPU time does not depend on the load,
the wall time does). ``--repeat N`` reviews each version
N times, interleaved (A1, D2, A1, D2, ...), and reports each version's median
wall time. Each run records the load average before it (the machine may be
shared) and how many probes finished. Run it on a quiet machine; prints one
JSON object (and writes it with ``--json``).
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
from provenance import bad_options, header  # noqa: E402

from replayssm.spec import corpus  # noqa: E402

GOAL_SECONDS = 60.0


def review_once(version: str, budget: float | None) -> dict:
    """One review in a child process: its wall time, CPU time and exit code."""
    out = Path(tempfile.mkdtemp(prefix="review-time-"))
    cmd = [sys.executable, "-m", "replayssm.cli", "review", version, "--traces", str(out / "traces"),
           "--json", str(out / "review.json")]
    if budget is not None:
        cmd += ["--budget", str(budget)]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    verdict = json.loads((out / "review.json").read_text())["verdicts"][0] if proc.returncode in (0, 1, 3) else None
    return {"version": version, "exit_code": proc.returncode, "wall_seconds": round(wall, 2),
            "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "within_goal": wall <= GOAL_SECONDS, "load_average_before": round(load, 2),
            "request_steps": verdict["campaign"]["request_steps"] if verdict else None,
            "campaign_seconds": verdict["campaign"].get("total_seconds") if verdict else None,
            "probes": len(verdict["assumptions"]) if verdict else None,
            "probes_not_finished": sum(r["outcome"] == "not finished" for r in verdict["assumptions"].values())
            if verdict else None,
            "status": verdict["status"] if verdict else proc.stderr.strip()[-400:]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("versions", nargs="*", default=[str(corpus.versions() / "A1.py"), str(corpus.versions() / "D2.py")])
    p.add_argument("--budget", type=float, help="review --budget, its watchdog (default: the CLI's)")
    p.add_argument("--repeat", type=int, default=1, help="reviews of each version, interleaved (default: 1)")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    error = bad_options({"--repeat": args.repeat}, args.json, out_flag="--json")
    if error is None and args.budget is not None and args.budget <= 0:
        error = f"error: --budget must be > 0, got {args.budget}"
    if error:
        print(error, file=sys.stderr)
        return 2
    result = header()
    runs = [review_once(v, args.budget) for _ in range(args.repeat) for v in args.versions]
    medians = {v: statistics.median(r["wall_seconds"] for r in runs if r["version"] == v) for v in args.versions}
    result.update(benchmark="review_time", goal_seconds=GOAL_SECONDS, runs=runs, median_wall_seconds=medians)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if all(m <= GOAL_SECONDS for m in medians.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
