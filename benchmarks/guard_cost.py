"""What the fuzz harness's guarded memory costs: campaigns with and without guards, interleaved.

    python3 benchmarks/guard_cost.py --device cpu  [--profile ci --seeds 0 1 2 --repeat 2 --jobs 2]
    python3 benchmarks/guard_cost.py --device cuda [--profile ci --seeds 0 1 2 --repeat 2 --jobs 8]

Runs the same campaigns (profile, seeds, level) with the guards on and off
(``REPLAYSSM_FUZZ_GUARDS=0``, the switch that exists for this measurement
only), alternating which goes first, so a machine that slows down during the
run slows both sides alike. Both sides must pass and run the same examples
(the guards change no draw). Prints one JSON object: each campaign's wall and
kernel seconds, the medians per side and the guards' cost, ``median(on) /
median(off) - 1`` (goal: at most 0.10). Needs a quiet machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, header  # noqa: E402

GOAL = 0.10
"""The guards may add at most this share to a campaign's time."""


def _campaign(guards: bool, impl: str | None, device: str, level: str, profile: str, seed: int,
              jobs: int) -> dict:
    from replayssm.fuzz.campaign import run_campaign
    from replayssm.fuzz.campaign_config import PROFILES, CampaignConfig

    os.environ["REPLAYSSM_FUZZ_GUARDS"] = "1" if guards else "0"
    p = PROFILES[profile]
    with tempfile.TemporaryDirectory() as failures:
        r = run_campaign(CampaignConfig(impl, device, p["examples"], p["max_steps"], seed=seed, jobs=jobs,
                                        failures_dir=failures, level=level, profile=profile), out=io.StringIO())
    return {"guards": guards, "seed": seed, "passed": r["passed"], "examples": r["examples"],
            "request_steps": r["request_steps"], "seconds": r["seconds"], "kernel_seconds": r["kernel_seconds"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--impl", default=None)
    p.add_argument("--level", choices=["kernel", "context"], default="kernel")
    p.add_argument("--profile", choices=["ci", "dev", "nightly"], default="ci")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    error = bad_options({"--repeat": args.repeat, "--jobs": args.jobs}, None)
    if error is None and any(s < 0 for s in args.seeds):
        error = f"error: --seeds must be >= 0, got {args.seeds}"
    if error:
        print(error, file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import triton

    runs = []
    for r in range(args.repeat):
        for i, seed in enumerate(args.seeds):
            first = (r + i) % 2 == 0  # alternate which side goes first
            for guards in (first, not first):
                run = _campaign(guards, args.impl, args.device, args.level, args.profile, seed, args.jobs)
                runs.append(run)
                print(f"seed {seed} guards {'on ' if guards else 'off'}: {run['seconds']:.1f} s "
                      f"({run['examples']} examples, {'passed' if run['passed'] else 'FAILED'})", file=sys.stderr)
    on = [x["seconds"] for x in runs if x["guards"]]
    off = [x["seconds"] for x in runs if not x["guards"]]
    same = all(a["examples"] == b["examples"] and a["request_steps"] == b["request_steps"]
               for a, b in zip(sorted((x for x in runs if x["guards"]), key=lambda x: x["seed"]),
                               sorted((x for x in runs if not x["guards"]), key=lambda x: x["seed"])))
    cost = statistics.median(on) / statistics.median(off) - 1
    out = {**header(torch=torch.__version__, triton=triton.__version__), "device": args.device,
           "level": args.level, "profile": args.profile, "seeds": args.seeds, "repeat": args.repeat,
           "jobs": args.jobs, "runs": runs, "median_seconds_guarded": round(statistics.median(on), 3),
           "median_seconds_unguarded": round(statistics.median(off), 3), "guard_cost": round(cost, 4),
           "goal": GOAL, "within_goal": cost <= GOAL, "all_passed": all(x["passed"] for x in runs),
           "same_examples": same}
    print(json.dumps(out, indent=2))
    return 0 if out["all_passed"] and same else 1


if __name__ == "__main__":
    sys.exit(main())
