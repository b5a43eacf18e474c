"""The proof cache, measured: ``prove`` cold (empty cache), warm (unchanged
tree), and after a one-line change in one spec file.

    python3 benchmarks/prove_cache.py [--jobs 2] [--out docs/results/prove_cache.json]

Each run is a fresh ``python -m replayssm prove`` process on a temporary
cache folder (never the user's); its wall seconds and its CPU seconds (its
processes', workers included: on a shared machine the wall time says more
about the neighbours). The one-line change rewrites
``cdiv(aligned, block_size) - 1`` in ``spec/boundary.py`` as
``cdiv(aligned, block_size) + (-1)`` (the same value, another term) and
restores the file afterwards; the run refuses to start when that file has
changes of its own. Prints and writes one JSON object: each run's wall
seconds, and per obligation whether it came whole from the cache, its cases
and how many of them were solved again.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The sibling module, also under ``python3 -P`` (which leaves the script's
# folder off ``sys.path``; the GPU scripts run Python that way).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import REPO, bad_options, emit, header  # noqa: E402

CHANGED_FILE = REPO / "spec" / "boundary.py"
BEFORE, AFTER = "cdiv(aligned, block_size) - 1", "cdiv(aligned, block_size) + (-1)"


def prove(cache: Path, jobs: int, out: Path) -> dict:
    """One ``prove`` run: its wall seconds and, per obligation, what it solved."""
    start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run([sys.executable, "-m", "replayssm", "prove", "--jobs", str(jobs), "--cache", str(cache),
                          "--json", str(out)], capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    if run.returncode not in (0, 1):  # 1: some obligation not proved (a timeout on a loaded machine), recorded
        raise SystemExit(f"prove failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    report = json.loads(out.read_text())
    obligations = {o["name"]: {"cached": o.get("cached", False), "cases": o["cases"],
                               "cases_solved": 0 if o.get("cached") else o["cases"] - o.get("cases_cached", 0),
                               "seconds": o["seconds"]} for o in report["obligations"]}
    reproved = [n for n, o in obligations.items() if o["cases_solved"]]
    rebuilt = [n for n, o in obligations.items() if not o["cached"]]
    return {"wall_seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "load_average_after": [round(x, 1) for x in os.getloadavg()],
            "not_proved": {o["name"]: o["status"] for o in report["obligations"] if o["status"] != "proved"},
            "obligations_rebuilt": len(rebuilt),
            "obligations_with_cases_solved": reproved,
            "cases_solved": sum(o["cases_solved"] for o in obligations.values()), "obligations": obligations}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    error = bad_options({"--jobs": args.jobs}, args.out)
    if error:
        print(error, file=sys.stderr)
        return 2
    source = CHANGED_FILE.read_text()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", str(CHANGED_FILE)],
                           capture_output=True, text=True).stdout.strip()
    if dirty or source.count(BEFORE) != 1:
        print(f"error: {CHANGED_FILE} has changes of its own or no single {BEFORE!r}; commit or stash them",
              file=sys.stderr)
        return 2
    import z3

    report: dict = {**header(z3=z3.get_full_version(), jobs=args.jobs),
                    "change": f"{CHANGED_FILE.relative_to(REPO)}: {BEFORE!r} -> {AFTER!r}", "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cache, out = Path(tmp) / "cache", Path(tmp) / "prove.json"
        for label in ("cold", "warm"):
            report["runs"][label] = prove(cache, args.jobs, out)
            print(f"{label}: {report['runs'][label]['wall_seconds']} s", file=sys.stderr, flush=True)
        try:
            CHANGED_FILE.write_text(source.replace(BEFORE, AFTER))
            report["runs"]["one-line change"] = prove(cache, args.jobs, out)
        finally:
            CHANGED_FILE.write_text(source)
        print(f"one-line change: {report['runs']['one-line change']['wall_seconds']} s, re-proved "
              f"{report['runs']['one-line change']['obligations_with_cases_solved']}", file=sys.stderr, flush=True)
        report["runs"]["warm again"] = prove(cache, args.jobs, out)
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
