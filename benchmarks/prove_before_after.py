"""Cold ``prove`` of two source trees, interleaved in one run: wall, CPU and per-obligation seconds.

    python3 benchmarks/prove_before_after.py --tree before=/tmp/before/.venv/bin/python \\
        --tree after=.venv/bin/python [--repeat 3] [--jobs 2] [--only TEXT] [--out FILE]

Each ``--tree LABEL=PYTHON`` names an interpreter whose ``replayssm`` package
is the tree to time (a worktree with its own editable install). The runs
alternate between the trees (before, after, before, after, ...), so a load
that comes and goes on a shared machine falls on both alike. One run is
``PYTHON -m replayssm prove --no-cache --jobs N --json FILE``: its wall time,
its CPU time (user + sys of the process and of the workers it waited for),
and from its JSON each obligation's seconds (worker time, summed over the
shards). On a loaded machine the CPU and the summed obligation seconds are the
figures to compare; the wall time only when the machine is quiet. Prints and
writes one JSON object: every run, the medians per tree, and the obligations
whose median changed most.

With ``--sequential`` a run is instead one process proving the obligations
one after the other (lemmas reused as ``prove`` reuses them), and each
obligation's figure is its CPU seconds in that process: the per-obligation
comparison a loaded machine does not distort (the first obligation to build
a shared context pays for it, in both trees alike).
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

# The sibling module, also under ``python3 -P`` (which leaves the script's
# folder off ``sys.path``; the GPU scripts run Python that way).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header, parse_trees  # noqa: E402


def children_cpu() -> float:
    """User + sys seconds of every child process this one has waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cold_prove(python: str, jobs: int, only: str | None) -> dict:
    """One cold ``prove`` with ``python``'s tree: wall, CPU and each obligation's seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "prove.json"
        cmd = [python, "-m", "replayssm", "prove", "--no-cache", "--jobs", str(jobs), "--json", str(out)]
        if only is not None:
            cmd += ["--only", only]
        cpu, start = children_cpu(), time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - start, children_cpu() - cpu
        if done.returncode != 0 or not out.exists():  # prove's exit 2 (e.g. an --only matching none) stays 2
            print(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}",
                  file=sys.stderr)
            raise SystemExit(2 if done.returncode == 2 else 1)
        report = json.loads(out.read_text())
    seconds = {o["name"]: o["seconds"] for o in report["obligations"]}
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "obligation_seconds": round(sum(seconds.values()), 2),
            "obligations": seconds}


SEQUENTIAL = """
import json, sys, time
from replayssm.verify.catalog import obligations
from replayssm.verify.obligation import REGISTRY, prove
only = sys.argv[1] or None
names, done, cpu = [ob.name for ob in obligations(only)], set(), {}
for n in names:
    lemmas = [REGISTRY[m] for m in REGISTRY[n].lemmas if m in done]
    start = time.process_time()
    r = prove(REGISTRY[n], (0, 1), lemmas)
    cpu[n] = round(time.process_time() - start, 3)
    if r.status != "proved":
        sys.exit(f"{n}: {r.status} {r.detail}")
    done.add(n)
print(json.dumps(cpu))
"""
"""One process proving the obligations one after the other (the lemmas of
each that came before reused, as ``prove`` does), printing each one's CPU
seconds: per-obligation figures a loaded machine does not inflate."""


def sequential_prove(python: str, only: str | None) -> dict:
    """One :data:`SEQUENTIAL` run with ``python``'s tree: wall, CPU and each obligation's CPU seconds."""
    cmd = [python, "-c", SEQUENTIAL, only or ""]
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{python} (sequential proofs) exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    seconds = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "obligation_seconds": round(sum(seconds.values()), 2),
            "obligations": seconds}


def medians(runs: list[dict]) -> dict:
    """The median wall, CPU and summed obligation seconds of ``runs``, and each obligation's median."""
    names = runs[0]["obligations"]
    return {"wall": statistics.median(r["wall"] for r in runs), "cpu": statistics.median(r["cpu"] for r in runs),
            "obligation_seconds": statistics.median(r["obligation_seconds"] for r in runs),
            "obligations": {n: round(statistics.median(r["obligations"][n] for r in runs), 3) for n in names}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", action="append", default=[], metavar="LABEL=PYTHON",
                   help="a tree to time, by the interpreter that imports it (give two or more)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", default=None, metavar="TEXT", help="prove only the obligations whose name contains TEXT")
    p.add_argument("--sequential", action="store_true",
                   help="instead of prove --jobs N: one process proving the obligations in order, each one's CPU "
                        "seconds (in-process, so no load inflates them; --jobs is then unused)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    trees = parse_trees(args.tree)
    error = trees if isinstance(trees, str) else bad_options({"--repeat": args.repeat, "--jobs": args.jobs}, args.out)
    if error:
        print(error, file=sys.stderr)
        return 2
    assert isinstance(trees, dict)
    import z3

    runs: dict[str, list[dict]] = {label: [] for label in trees}
    for i in range(args.repeat):
        for label, python in trees.items():
            runs[label].append(sequential_prove(python, args.only) if args.sequential
                               else cold_prove(python, args.jobs, args.only))
            r = runs[label][-1]
            print(f"{label} run {i + 1}/{args.repeat}: wall {r['wall']} s, CPU {r['cpu']} s, "
                  f"obligations {r['obligation_seconds']} s", file=sys.stderr, flush=True)
    summary = {label: medians(rs) for label, rs in runs.items()}
    first, last = list(trees)[0], list(trees)[-1]
    change = {n: round(summary[last]["obligations"][n] - s, 3) for n, s in summary[first]["obligations"].items()
              if n in summary[last]["obligations"]}
    report = {**header(load_average=os.getloadavg(), z3=z3.get_version_string(),
                       jobs=None if args.sequential else args.jobs, only=args.only, sequential=args.sequential),
              "trees": trees,
              "medians": {label: {k: v for k, v in m.items() if k != "obligations"} for label, m in summary.items()},
              f"largest changes ({last} - {first}, median s)": dict(sorted(change.items(), key=lambda kv: kv[1])[:15]),
              "per_obligation_medians": {label: m["obligations"] for label, m in summary.items()},
              "runs": runs}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
