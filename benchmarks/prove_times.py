"""Wall time of the proof sets, each run in a fresh process, repeated.

    python3 benchmarks/prove_times.py [--repeat 3] [--jobs 2] [--only inductive] [--out docs/results/prove_times.json]

Sets: the system's inductive set (initial, admit, free, step, step_batch,
shapes_cover),
the property views (proved from the inductive set's parts when it ran in the
same invocation, so they are timed together with it), the explicit depth-8
BMC (its two callers' explorations are two cases, split over the jobs), the odd-ring
explicit BMC, the symbolic BMC, the per-kernel obligations, and everything
(``replayssm-verify prove``). Prints and writes one JSON object with every
run's seconds and the median per set.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

# The sibling module, also under ``python3 -P`` (which leaves the script's
# folder off ``sys.path``; the GPU scripts run Python that way).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, commit, emit  # noqa: E402

INDUCTIVE = ["system.initial", "system.admit", "system.free", "system.step", "system.step_batch",
             "system.shapes_cover"]
VIEWS = ["system.groups_agree", "system.no_token_dropped", "system.canonical"]


def sets() -> dict[str, list[str] | None]:
    from replayssm.verify.catalog import obligations

    kernel = [ob.name for ob in obligations() if not ob.name.startswith(("system.", "kernel."))]
    return {"system inductive set": INDUCTIVE, "system inductive set + views": INDUCTIVE + VIEWS,
            "system.bmc (explicit, depth 8)": ["system.bmc"], "system.bmc_symbolic": ["system.bmc_symbolic"],
            "system.bmc_odd_ring (explicit, ring 5, depth 6)": ["system.bmc_odd_ring"],
            "per-kernel obligations": kernel, "all obligations": None}


def timed(names: list[str] | None, jobs: int) -> float:
    """Seconds of one fresh :func:`~replayssm.verify.runner.discharge` run over ``names`` (None: all)."""
    code = ("import sys, time; from replayssm.verify.runner import discharge;"
            "from replayssm.verify.catalog import obligations;"
            f"names = {names!r} or [o.name for o in obligations()]; t = time.perf_counter();"
            f"bad = [r.name for r in discharge(names, {jobs}) if r.status != 'proved'];"
            "print(time.perf_counter() - t); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"proof run failed for {names}: {out.stdout}{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default=None)
    p.add_argument("--only", default=None, metavar="TEXT",
                   help="time only the sets whose label contains TEXT (e.g. 'inductive')")
    args = p.parse_args()
    error = bad_options({"--repeat": args.repeat, "--jobs": args.jobs}, args.out)
    if error:
        print(error, file=sys.stderr)
        return 2
    import z3

    report: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.node(),
                    "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                    "commit": commit(), "python": platform.python_version(), "z3": z3.get_version_string(),
                    "jobs": args.jobs, "only": args.only,
                    "command": " ".join(sys.argv), "sets": {}}
    chosen = {label: names for label, names in sets().items() if args.only is None or args.only in label}
    if not chosen:
        print(f"error: --only {args.only!r} matches no set; the sets are {list(sets())}", file=sys.stderr)
        return 2
    for label, names in chosen.items():
        runs = []
        for i in range(args.repeat):
            start = time.perf_counter()
            runs.append(round(timed(names, args.jobs), 2))
            print(f"{label}: run {i + 1}/{args.repeat} {runs[-1]} s ({time.perf_counter() - start:.1f} s with start-up)",
                  file=sys.stderr, flush=True)
        report["sets"][label] = {"seconds": runs, "median": statistics.median(runs)}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
