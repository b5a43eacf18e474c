"""Cold time of one pair's kernel diff, and of one version's kernel obligations.

    python3 benchmarks/kernel_diff_times.py [--pairs BASE:HEAD,...] [--versions V,...] [--repeat 3]
                                            [--jobs 2] [--out FILE]

A pair's diff is what ``review HEAD --base BASE`` proves before its
campaigns (``review/kernel_diff.py``): both versions' kernels read from their
source and each version started in a process of its own, every kernel role
they share compared on every variant, a difference minimised and replayed on
both versions in their processes; each run is a fresh process (imports,
reading, the versions' processes, case building, solving and replay
included). A version's obligations are ``prove --kernels
--impl VERSION --no-cache --jobs N`` in a fresh process. The runs are
interleaved (every pair and version once per repeat), so a machine whose
speed drifts slows them alike; the medians are reported against the bounds
(60 s a pair, 30 s a version, 2 cores), with the 1-minute load average
before each run (a shared machine's). BASE, HEAD and V are corpus labels
(``A1``; ``reference`` is the reference page; ``$REPLAYSSM_CORPUS``, default
``../shared/reference``), files or module names. Defaults: the nine
consecutive pairs of the corpus and the reference page against ours; the
versions those pairs name.
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

PAIR_BOUND_S = 60.0
"""The bound on one pair's cold diff (2 cores)."""
VERSION_BOUND_S = 30.0
"""The bound on one version's cold kernel obligations (2 cores)."""

CONSECUTIVE = ("A1:A2", "A2:A3", "A3:A4", "A4:A5", "B1:B2", "B2:B3", "C1:C2", "D1:D2", "D2:D3",
               "reference:replayssm.impl.replayssm_utils")
"""The corpus's consecutive pairs inside each generation (``docs/results/reviewing-history.md``), and the reference against ours."""

DIFF = """
import json, os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
from replayssm.spec.generations import detect
from replayssm.verify.kernels.generation_roles import roles_of
from replayssm.review.kernel_diff import kind_of
from replayssm.base.isolation import load_isolated
from replayssm.verify.kernels.diff import diff_role, matched_roles
from replayssm.verify.kernels.source_module import kernel_module
remotes = tuple(load_isolated(s, launch_seconds=60.0) for s in sys.argv[1:3])
(base, base_api), (head, head_api) = [(kernel_module(s), detect(m)) for s, m in zip(sys.argv[1:3], remotes)]
out = []
for role, head_role in matched_roles(base, head, roles_of(base_api), roles_of(head_api)):
    r = diff_role(base, head, role, head_role=None if head_role is role else head_role, remotes=remotes)
    out.append({"role": r.role, "kind": kind_of(r), "seconds": round(r.seconds, 3), "summary": r.summary()})
print(json.dumps(out))
"""


def source(name: str) -> str:
    """A corpus label's file, else ``name`` itself (a file or a module)."""
    from replayssm.spec import corpus

    if name == "reference":
        return str(corpus.reference_page())
    labelled = corpus.versions() / f"{name}.py"
    return str(labelled) if labelled.is_file() else name


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (children included) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done


def diff_run(base: str, head: str) -> tuple[float, float, list]:
    wall, cpu, done = timed([sys.executable, "-c", DIFF, source(base), source(head)])
    if done.returncode != 0:
        raise SystemExit(f"the diff of {base} -> {head} failed:\n{done.stdout}{done.stderr}")
    return wall, cpu, json.loads(done.stdout.strip().splitlines()[-1])


def prove_run(version: str, jobs: int) -> tuple[float, float, dict]:
    """One cold ``prove --kernels --impl``; its statuses (exit 2: no role has a contract for it)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "r.json"
        wall, cpu, done = timed([sys.executable, "-m", "replayssm.cli", "prove", "--kernels", "--no-cache", "--jobs",
                                 str(jobs), "--impl", source(version), "--json", str(out)])
        if done.returncode == 2:
            return wall, cpu, {"none": (done.stderr.strip().splitlines() or ["exit 2"])[-1]}
        if not out.exists():
            raise SystemExit(f"prove --kernels --impl {version} failed:\n{done.stdout}{done.stderr}")
        return wall, cpu, {o["name"]: o["status"] for o in json.loads(out.read_text())["obligations"]}


def bound(seconds: float, limit: float) -> str:
    return f"{'within' if seconds <= limit else 'OVER'} the {limit:.0f} s bound"


def median_of(runs: list[tuple[float, float]]) -> dict:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return {"wall_s": [round(w, 2) for w in walls], "cpu_s": [round(c, 2) for c in cpus],
            "wall_median_s": round(statistics.median(walls), 2), "cpu_median_s": round(statistics.median(cpus), 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", default=",".join(CONSECUTIVE), help="BASE:HEAD,... (default: the consecutive pairs)")
    p.add_argument("--versions", default=None, help="V,... whose obligations are timed (default: the pairs'; '': none)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    error = bad_options({"--repeat": args.repeat, "--jobs": args.jobs}, args.out)
    pairs = [tuple(x.split(":", 1)) for x in args.pairs.split(",") if x]
    if error is None and (not pairs or any(len(x) != 2 or not all(x) for x in pairs)):
        error = f"error: --pairs must be BASE:HEAD,... got {args.pairs!r}"
    if error:
        print(error, file=sys.stderr)
        return 2
    versions = ([v for v in args.versions.split(",") if v] if args.versions is not None
                else list(dict.fromkeys(v for x in pairs for v in x)))
    import triton
    import z3

    from replayssm.spec import corpus

    report = header(z3=z3.get_version_string(), triton=triton.__version__, jobs=args.jobs,
                    corpus=str(corpus.root()), shared_machine="other sessions' work ran beside it")
    diffs: dict = {f"{b}->{h}": [] for b, h in pairs}
    proofs: dict = {v: [] for v in versions}
    outcome: dict = {}
    loads: dict = {k: [] for k in [*diffs, *proofs]}
    for n in range(args.repeat):
        for b, h in pairs:
            loads[f"{b}->{h}"].append(round(os.getloadavg()[0], 2))
            wall, cpu, roles = diff_run(b, h)
            diffs[f"{b}->{h}"].append((wall, cpu))
            outcome[f"{b}->{h}"] = roles
            said = ", ".join(f"{r['role']} {r['kind']}" for r in roles) or "no shared role"
            print(f"run {n + 1} diff {b} -> {h}: {wall:.1f} s wall, {cpu:.1f} s CPU "
                  f"(load {loads[f'{b}->{h}'][-1]}): {said}", flush=True)
        for v in versions:
            loads[v].append(round(os.getloadavg()[0], 2))
            wall, cpu, statuses = prove_run(v, args.jobs)
            proofs[v].append((wall, cpu))
            outcome[v] = statuses
            print(f"run {n + 1} prove --kernels --impl {v}: {wall:.1f} s wall, {cpu:.1f} s CPU "
                  f"(load {loads[v][-1]})", flush=True)
    report["pairs"] = {k: {**median_of(runs), "load_1min_before": loads[k], "bound_s": PAIR_BOUND_S,
                           "roles": outcome[k]} for k, runs in diffs.items()}
    report["versions"] = {v: {**median_of(runs), "load_1min_before": loads[v], "bound_s": VERSION_BOUND_S,
                              "obligations": outcome[v]} for v, runs in proofs.items()}
    for k, r in report["pairs"].items():
        said = bound(r["wall_median_s"], PAIR_BOUND_S) if r["roles"] else "no shared kernel role"
        print(f"diff {k}: median {r['wall_median_s']} s wall ({said}), {r['cpu_median_s']} s CPU")
    for v, r in report["versions"].items():
        said = bound(r["wall_median_s"], VERSION_BOUND_S) if "none" not in r["obligations"] else \
            "no kernel role has a contract for it"
        print(f"prove --kernels --impl {v}: median {r['wall_median_s']} s wall ({said}), {r['cpu_median_s']} s CPU")
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
