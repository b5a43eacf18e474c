"""Wall and CPU time of the bounded model checks, one fresh process per run,
trees interleaved so that a shared machine's load falls on all of them alike.

    python3 benchmarks/bmc_times.py [--repeat 3] [--python PY ...] [--out docs/results/bmc_times.json]

Times ``system.bmc`` (explicit, depth 8, both callers), ``system.bmc_odd_ring``
and ``system.bmc_symbolic``, each proved alone in one process (``discharge``
with one job, no proof cache), and the explicit explorations' state and
transition counts. ``--python`` names the interpreters to compare, each with
its own install of the package (e.g. a checkout of the commit before a change
and this tree's ``.venv/bin/python``); by default only the one running this
script. Run ``r`` of every interpreter comes before run ``r + 1`` of any.
Prints and writes one JSON object: per interpreter (its tree and commit), per
obligation, every run's wall and CPU seconds (user + system) and their medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

# The sibling module, also under ``python3 -P`` (which leaves the script's
# folder off ``sys.path``; the GPU scripts run Python that way).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header  # noqa: E402

OBLIGATIONS = ("system.bmc", "system.bmc_odd_ring", "system.bmc_symbolic")

CHILD = """
import json, resource, sys, time
from replayssm.verify.runner import discharge
from replayssm.verify import bmc
name = sys.argv[1]
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
t, c = time.perf_counter(), cpu()
results = list(discharge([name], 1))
wall, used = time.perf_counter() - t, cpu() - c
counts = {}
if name == "system.bmc":
    for label in bmc.BMC_CONVENTIONS:
        _, r = bmc.explicit_bmc(label)
        counts[label] = {"states": r["states"], "transitions": r["transitions"]}
elif name == "system.bmc_odd_ring":
    _, r = bmc.explicit_bmc(**bmc.ODD_RING_DOMAIN)
    counts["v2-none ring 5"] = {"states": r["states"], "transitions": r["transitions"]}
print(json.dumps({"status": [r.status for r in results], "wall": wall, "cpu": used, "counts": counts}))
"""


def tree_of(python: str) -> dict | str:
    """Where ``python`` imports the package from and that tree's commit, or
    the error naming ``--python`` when it cannot run or import the package."""
    code = "import replayssm.verify as v, os; print(os.path.dirname(os.path.dirname(v.__file__)))"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    except OSError as e:
        return f"error: --python {python!r} cannot run: {e}"
    if out.returncode != 0:
        return f"error: --python {python!r} cannot import replayssm: {out.stderr.strip().splitlines()[-1:]}"
    root = out.stdout.strip()
    head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    return {"tree": root, "commit": (head.stdout.strip() or "unknown") + ("+changes" if dirty.stdout.strip() else "")}


def one_run(python: str, name: str) -> dict:
    out = subprocess.run([python, "-c", CHILD, name], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"error: {name} under {python} failed: {out.stdout}{out.stderr}")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    if run["status"] != ["proved"]:
        raise SystemExit(f"error: {name} under {python} was not proved: {run['status']}")
    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--python", action="append", default=None, metavar="PY",
                   help="an interpreter to time (repeatable; default: this one)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    error = bad_options({"--repeat": args.repeat}, args.out)
    if error:
        print(error, file=sys.stderr)
        return 2
    pythons = args.python or [sys.executable]
    trees = {py: tree_of(py) for py in pythons}
    for tree in trees.values():
        if isinstance(tree, str):
            print(tree, file=sys.stderr)
            return 2
    report: dict = {**header(), "trees": {py: {**tree, "obligations": {}} for py, tree in trees.items()}}
    for r in range(args.repeat):
        for name in OBLIGATIONS:
            for py in pythons:
                run = one_run(py, name)
                entry = report["trees"][py]["obligations"].setdefault(name, {"wall": [], "cpu": []})
                entry["wall"].append(round(run["wall"], 2))
                entry["cpu"].append(round(run["cpu"], 2))
                entry["counts"] = run["counts"]
                print(f"run {r + 1}/{args.repeat} {name} {py}: wall {run['wall']:.2f} s, cpu {run['cpu']:.2f} s",
                      file=sys.stderr, flush=True)
    for tree in report["trees"].values():
        for entry in tree["obligations"].values():
            entry["median_wall"] = statistics.median(entry["wall"])
            entry["median_cpu"] = statistics.median(entry["cpu"])
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
