"""Cold ``prove`` of two source trees, interleaved in one run: wall, CPU and per-obligation seconds.

    python3 benchmarks/prove_before_after.py --tree before=/tmp/before/.venv/bin/python \\
        --tree after=.venv/bin/python [--repeat 3] [--jobs 2] [--only TEXT] [--out FILE]

Each ``--tree LABEL=PYTHON`` names an interpreter whose ``replayssm`` package
is the tree to time (a worktree with its own editable install). The runs
alternate between the trees (before, after, before, after, ...), so a load
that comes and goes on a shared machine falls on both alike. One run is
``PYTHON -m replayssm prove --no-cache --jobs N --json FILE``: its wall time,
its CPU time (user + sys of the process and of the workers it waited for),
from its JSON each obligation's seconds (worker wall time, summed over the
shards), and each obligation's CPU seconds (:data:`CPU_SPLIT`: the process
time of every shard, logged by a wrapper around the tree's own
``verify.runner.prove``, so a tree from before ``cpu_seconds`` was in the
JSON is split the same way), and the load average before and after each
run. On a loaded machine the CPU seconds are the figures to compare; the
wall time only when the machine is quiet. Prints and writes one JSON object:
every run, the medians per tree, and the obligations whose median CPU
changed most.

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


CPU_SPLIT = """
import os, sys, time
from replayssm.verify import runner
proved = runner.prove
def timed(ob, *args, **kwargs):
    start = time.process_time()
    try:
        return proved(ob, *args, **kwargs)
    finally:
        with open(os.environ["PROVE_CPU_LOG"], "a") as log:
            log.write(f"{ob.name} {time.process_time() - start:.4f}\\n")
runner.prove = timed
from replayssm.cli import main
sys.argv[0] = "replayssm"
sys.exit(main(sys.argv[1:]))
"""
"""``python -c CPU_SPLIT prove ...``: ``prove`` with each shard's process
time appended to the file ``$PROVE_CPU_LOG`` (one line per shard: the
obligation's name and its seconds; the workers are forked, so each inherits
the wrapper)."""


def cold_prove(python: str, jobs: int, only: str | None) -> dict:
    """One cold ``prove`` with ``python``'s tree: wall, CPU, the load
    average around it, each obligation's seconds and its CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out, log = Path(tmp) / "prove.json", Path(tmp) / "cpu.log"
        python = str(Path(python).absolute()) if os.sep in python else python  # it runs in ``tmp``
        cmd = [python, "-c", CPU_SPLIT, "prove", "--no-cache", "--jobs", str(jobs), "--json", str(out)]
        if only is not None:
            cmd += ["--only", only]
        load = os.getloadavg()[0]
        cpu, start = children_cpu(), time.perf_counter()
        # run in the temporary folder: ``-c`` puts the working folder first on sys.path, and a checkout's
        # root holds a ``replayssm/`` folder that would shadow the tree's own package
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp,
                              env={**os.environ, "PROVE_CPU_LOG": str(log)})
        wall, cpu = time.perf_counter() - start, children_cpu() - cpu
        if done.returncode != 0 or not out.exists():  # prove's exit 2 (e.g. an --only matching none) stays 2
            print(f"{' '.join(cmd[:2])} ... {' '.join(cmd[3:])} exited {done.returncode}:\n{done.stdout[-2000:]}"
                  f"{done.stderr[-2000:]}", file=sys.stderr)
            raise SystemExit(2 if done.returncode == 2 else 1)
        report = json.loads(out.read_text())
        split: dict[str, float] = {}
        for line in log.read_text().splitlines():
            name, seconds = line.rsplit(" ", 1)
            split[name] = split.get(name, 0.0) + float(seconds)
    seconds = {o["name"]: o["seconds"] for o in report["obligations"]}
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            "proved": sum(o["status"] == "proved" for o in report["obligations"]),
            "obligation_seconds": round(sum(seconds.values()), 2), "obligations": seconds,
            "obligation_cpu": round(sum(split.values()), 2), "cpu_split": {n: round(split.get(n, 0.0), 3) for n in seconds}}


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
    python = str(Path(python).absolute()) if os.sep in python else python  # it runs in the temporary folder
    cmd = [python, "-c", SEQUENTIAL, only or ""]
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{python} (sequential proofs) exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    seconds = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "obligation_seconds": round(sum(seconds.values()), 2),
            "obligations": seconds}


def medians(runs: list[dict]) -> dict:
    """The median wall, CPU and summed obligation seconds of ``runs``, and
    each obligation's median (its CPU seconds where the runs split them, else
    its seconds)."""
    per = "cpu_split" if all("cpu_split" in r for r in runs) else "obligations"
    names = runs[0][per]
    return {"wall": statistics.median(r["wall"] for r in runs), "cpu": statistics.median(r["cpu"] for r in runs),
            "obligation_seconds": statistics.median(r["obligation_seconds"] for r in runs),
            **({"obligation_cpu": statistics.median(r["obligation_cpu"] for r in runs)} if per == "cpu_split" else {}),
            "obligations": {n: round(statistics.median(r[per].get(n, 0.0) for r in runs), 3) for n in names}}


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
                  f"obligations {r['obligation_seconds']} s, load average {r.get('load_average')}",
                  file=sys.stderr, flush=True)
    summary = {label: medians(rs) for label, rs in runs.items()}
    first, last = list(trees)[0], list(trees)[-1]
    change = {n: round(summary[last]["obligations"][n] - s, 3) for n, s in summary[first]["obligations"].items()
              if n in summary[last]["obligations"]}
    report = {**header(load_average=os.getloadavg(), z3=z3.get_version_string(),
                       jobs=None if args.sequential else args.jobs, only=args.only, sequential=args.sequential),
              "trees": trees,
              "medians": {label: {k: v for k, v in m.items() if k != "obligations"} for label, m in summary.items()},
              f"largest changes ({last} - {first}, median {'s' if args.sequential else 'CPU s'})": dict(sorted(change.items(), key=lambda kv: kv[1])[:15]),
              "per_obligation_medians": {label: m["obligations"] for label, m in summary.items()},
              "runs": runs}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
