"""Cold wall time of the kernel-source proofs, and the time per kernel variant.

    python3 benchmarks/kernel_proof_times.py [--repeat 3] [--jobs 2] [--impl MODULE_OR_FILE] [--out FILE]

Each repeat runs ``replayssm-verify prove --kernels --no-cache --jobs N`` in
a fresh process (imports, case building and solving included: the cold time the
acceptance bound of 10 s on 2 cores is about). Then one fresh process times
every kernel x constexpr variant alone (its four obligations, its programs
built from nothing) for the median per variant (bound: 1 s). Prints a table
of the figures against those bounds, and one JSON object with the date,
machine, versions, command and every figure: to ``--out`` when given, else
after the table. Run it on a quiet machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import json
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
from provenance import bad_options, header, write  # noqa: E402

COLD_BOUND_S = 10.0
"""The acceptance bound on a cold ``prove --kernels`` (2 cores)."""
VARIANT_BOUND_S = 1.0
"""The acceptance bound on one kernel variant's four obligations."""

PER_VARIANT = """
import json, sys, time
from replayssm.verify.kernels import obligations as O
from replayssm.verify.obligation import Obligation, prove
impl = sys.argv[1] if len(sys.argv) > 1 else None
module = O._ours()
if impl:
    from replayssm.base.targets import load_target
    module = load_target(impl, label="--impl")
times = {}
for role in [r for r in O.ROLES if r.jit(module)]:
    for label, params in O.variants(role):
        O._CASES.clear()
        start = time.perf_counter()
        for prop in O.properties(role):
            claim = O._one(module, role, prop, label, params).claim
            r = prove(Obligation(f"{role.name}.{prop}", role.name, "", lambda claim=claim: [claim]))
            if r.status != "proved":
                raise SystemExit(f"{role.name} {label} {prop}: {r.status}")
        times[f"{role.name} {label}"] = time.perf_counter() - start
print(json.dumps(times))
"""


def cold_run(jobs: int, impl: str | None) -> tuple[float, float, dict]:
    """Wall seconds of one fresh ``prove --kernels`` process, its CPU seconds
    (workers included: what a loaded machine does not inflate), and its JSON report."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "r.json"
        cmd = [sys.executable, "-m", "replayssm.cli", "prove", "--kernels", "--no-cache", "--jobs", str(jobs),
               "--json", str(out)]
        if impl:
            cmd += ["--impl", impl]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:  # the CLI's exit 2 (a bad --impl) stays a set-up error
            print(f"prove --kernels failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
            raise SystemExit(2 if done.returncode == 2 else 1)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return seconds, cpu, json.loads(out.read_text())


def table(report: dict) -> str:
    """The report for people: the cold runs against :data:`COLD_BOUND_S`, then
    one row per kernel variant (slowest first) against :data:`VARIANT_BOUND_S`."""

    def verdict(seconds: float, bound: float) -> str:
        return "within" if seconds <= bound else "OVER"

    runs = ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c in zip(report["cold_runs_s"], report["cold_cpu_s"]))
    lines = [f"{report['date']}  {report['machine']} ({report['cpus']} CPUs)  commit {report['commit']}  "
             f"Python {report['python']}, Z3 {report['z3']}, Triton {report['triton']}  impl {report['impl']}",
             f"cold prove --kernels --jobs {report['jobs']}: median {report['cold_median_s']:.2f} s wall "
             f"({verdict(report['cold_median_s'], COLD_BOUND_S)} the {COLD_BOUND_S:.0f} s bound), "
             f"CPU median {report['cold_cpu_median_s']:.2f} s; runs: {runs}",
             f"per variant ({report['variants']}; bound {VARIANT_BOUND_S:.0f} s): median "
             f"{report['per_variant_median_s']:.3f} s, max {report['per_variant_max_s']:.3f} s"]
    variants = sorted(report["per_variant_s"].items(), key=lambda kv: -kv[1])
    width = max(len(name) for name, _ in variants)
    lines += [f"  {'variant'.ljust(width)}  seconds"]
    lines += [f"  {name.ljust(width)}  {seconds:7.3f}  {verdict(seconds, VARIANT_BOUND_S)}" for name, seconds in variants]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--impl", default=None, metavar="MODULE_OR_FILE", help="time a target's kernels (default: ours)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    error = bad_options({"--repeat": args.repeat, "--jobs": args.jobs}, args.out)
    if error:
        print(error, file=sys.stderr)
        return 2
    import triton
    import z3

    report: dict = header(z3=z3.get_version_string(), triton=triton.__version__, jobs=args.jobs,
                          impl=args.impl or "ours")
    runs, cpus, per_obligation = [], [], {}
    for n in range(args.repeat):
        seconds, cpu, result = cold_run(args.jobs, args.impl)
        runs.append(round(seconds, 3))
        cpus.append(round(cpu, 3))
        per_obligation = {o["name"]: o["seconds"] for o in result["obligations"]}
        print(f"cold prove --kernels run {n + 1}: {seconds:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    report.update(cold_runs_s=runs, cold_median_s=statistics.median(runs), cold_cpu_s=cpus,
                  cold_cpu_median_s=statistics.median(cpus), per_obligation_s_last_run=per_obligation)
    done = subprocess.run([sys.executable, "-c", PER_VARIANT, *([args.impl] if args.impl else [])],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"per-variant timing failed:\n{done.stdout}{done.stderr}")
    variants = json.loads(done.stdout.strip().splitlines()[-1])
    report.update(per_variant_s={k: round(v, 4) for k, v in variants.items()},
                  per_variant_median_s=round(statistics.median(variants.values()), 4),
                  per_variant_max_s=round(max(variants.values()), 4), variants=len(variants))
    print(table(report))
    if args.out:
        write(report, args.out)
        print(f"the JSON report: {args.out}")
    else:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
