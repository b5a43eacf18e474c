"""Verified request-steps per second: the stateful campaign and the wide runner.

    python3 benchmarks/fuzz_throughput.py --device cpu  [--rows 16 --steps 10 --jobs 2]
    python3 benchmarks/fuzz_throughput.py --device cuda [--rows 4096 --steps 50 --jobs 8]

Prints one JSON object: for each runner, request-steps, seconds, verified
request-steps/s, time in the implementation's kernels and the harness's share
on top of it ((wall - kernels) / kernels), measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

# The sibling module, also under ``python3 -P`` (which leaves the script's
# folder off ``sys.path``; the GPU scripts run Python that way).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import commit  # noqa: E402


def _wide(args: tuple) -> dict:
    impl, device, rows, steps, seed = args
    from replayssm.fuzz.wide import run_wide

    r = run_wide(impl, device, rows, steps, seed=seed)
    return {"request_steps": r.request_steps, "seconds": r.seconds, "kernel_seconds": r.kernel_seconds,
            "discrepancies": r.discrepancies}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--impl", default=None)
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--stateful-examples", type=int, default=64)
    args = p.parse_args()
    for name in ("rows", "steps", "jobs", "stateful_examples"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import triton

    from replayssm.fuzz.campaign import CampaignConfig, run_campaign

    out: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": commit(),
                 "machine": platform.node(), "cpus": os.cpu_count(),
                 "python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
                 "device": args.device, "command": " ".join(sys.argv)}
    if args.device == "cuda":
        out["gpu"] = torch.cuda.get_device_name(0)
    with open(os.devnull, "w") as quiet:
        s = run_campaign(CampaignConfig(args.impl, args.device, args.stateful_examples, 12, 0, args.jobs,
                                        "out/bench-failures"), out=quiet)
    wall = s["seconds"]
    out["stateful"] = {"request_steps": s["request_steps"], "seconds": wall,
                       "request_steps_per_s": round(s["request_steps"] / wall, 1),
                       "kernel_seconds": s["kernel_seconds"], "spec_seconds": s["spec_seconds"],
                       "worker_seconds": s["worker_seconds"],
                       "harness_over_kernels": (round((s["worker_seconds"] - s["kernel_seconds"]) / s["kernel_seconds"], 4)
                                                if s["kernel_seconds"] else None),
                       "passed": s["passed"]}
    ctx = multiprocessing.get_context("spawn" if args.device == "cuda" else "fork")
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
        parts = list(pool.map(_wide, [(args.impl, args.device, args.rows, args.steps, seed) for seed in range(args.jobs)]))
    wall = time.perf_counter() - start
    steps = sum(x["request_steps"] for x in parts)
    kernel = sum(x["kernel_seconds"] for x in parts)
    busy = sum(x["seconds"] for x in parts)
    out["wide"] = {"rows": args.rows, "steps_per_process": args.steps, "processes": args.jobs,
                   "request_steps": steps, "seconds": round(wall, 3),
                   "request_steps_per_s": round(steps / wall, 1),
                   "kernel_seconds": round(kernel, 3), "process_seconds": round(busy, 3),
                   "harness_over_kernels": round((busy - kernel) / kernel, 4) if kernel else None,
                   "discrepancies": sum(x["discrepancies"] for x in parts)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
