"""Host start time: seconds from asking for a target's process to its target imported, per tree.

    python3 -P benchmarks/host_start.py --tree LABEL=PYTHON --tree LABEL=PYTHON [--rounds 3] [--hosts 5]
        [--out docs/results/host_start.json]

Per round and tree (the trees alternating, their order turning each round, so
that a load that comes and goes falls on every tree alike), a fresh process of
that tree's interpreter (with ``TRITON_INTERPRET=1``, torch and triton imported
first, as a fuzz worker has them) loads our kernels in a target host
(``load_isolated``) ``--hosts`` times one after the other, closing each: the
first load is the process's cold start (a fork server to start, where the tree
has one), the others warm. Prints and writes one JSON object with every run
and per tree the medians of the cold and the warm loads. Wall seconds: run it
on a quiet machine, or read the load averages it records.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header, parse_trees  # noqa: E402

PROBE = """
import json, sys, time
import torch, triton
from replayssm.base.isolation import load_isolated
times = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    module = load_isolated("replayssm.impl.replayssm_utils")
    times.append(time.perf_counter() - start)
    module.close()
print(json.dumps(times))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="LABEL=PYTHON (at least twice)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=5, help="loads per process (the first is the cold one)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    trees = parse_trees(args.tree)
    error = trees if isinstance(trees, str) else bad_options({"--rounds": args.rounds, "--hosts": args.hosts},
                                                            args.out)
    if error:
        print(error, file=sys.stderr)
        return 2
    assert isinstance(trees, dict)
    labels = list(trees)
    load = [os.getloadavg()]
    runs = []
    for r in range(args.rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            proc = subprocess.run([trees[label], "-c", PROBE, str(args.hosts)], capture_output=True, text=True,
                                  cwd="/", env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=600)
            if proc.returncode != 0:
                print(f"error: tree {label}: {proc.stderr[-2000:]}", file=sys.stderr)
                return 1
            times = json.loads(proc.stdout.strip().splitlines()[-1])
            runs.append({"tree": label, "round": r, "seconds": [round(t, 4) for t in times]})
    load.append(os.getloadavg())
    summary = {}
    for label in labels:
        mine = [run["seconds"] for run in runs if run["tree"] == label]
        summary[label] = {"cold_median": round(statistics.median(s[0] for s in mine), 4),
                          "warm_median": round(statistics.median(t for s in mine for t in s[1:]), 4)
                          if args.hosts > 1 else None}
    emit({**header(trees=trees), "load_average": load, "trees": summary, "runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
