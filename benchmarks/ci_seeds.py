"""Every seed of the ci profile passes on the correct implementation and reaches every scenario class.

    python3 benchmarks/ci_seeds.py [--seeds 0-49] [--jobs 2] [--impl MODULE] [--out docs/results/ci_seeds.json]

Runs ``replayssm-verify fuzz --profile ci --seed S`` (in process, CPU,
Triton's interpreter) for each seed, prints one line per seed (passed, the
classes it never reached, findings, seconds) and writes the runs with their
provenance (date, commit, machine, versions, command) as JSON. Exit 0 when
every seed passed with every class reached, 1 otherwise, 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

# The sibling module, also under ``python3 -P``.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, header  # noqa: E402


def seed_range(text: str) -> list[int]:
    """``0-49`` or ``0,4,10,12`` as a list of seeds, or a ``ValueError`` naming ``--seeds``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            seeds += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise ValueError(f"--seeds must look like 0-49 or 0,4,10 (ints >= 0), got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"--seeds must name at least one seed >= 0, got {text!r}")
    return seeds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="0-49", help="seeds to run: a range 0-49 or a list 0,4,10 (default 0-49)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes per campaign (default 2)")
    p.add_argument("--impl", default=None, help="the implementation (default: replayssm.impl.replayssm_utils)")
    p.add_argument("--out", default="docs/results/ci_seeds.json", help="where the JSON goes")
    args = p.parse_args()
    try:
        seeds = seed_range(args.seeds)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    error = bad_options({"--jobs": args.jobs}, None)  # --out's folder is made below
    if error:
        print(error, file=sys.stderr)
        return 2
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import hypothesis
    import torch
    import triton

    from replayssm.fuzz.campaign import run_campaign

    from replayssm.fuzz.campaign_config import PROFILES, CampaignConfig, SetupError

    profile = PROFILES["ci"]
    out: dict = {**header(torch=torch.__version__, triton=triton.__version__, hypothesis=hypothesis.__version__),
                 "profile": {"name": "ci", **profile}, "impl": args.impl or "replayssm.impl.replayssm_utils",
                 "jobs": args.jobs, "runs": []}
    with tempfile.TemporaryDirectory() as failures, open(os.devnull, "w") as quiet:
        for seed in seeds:
            config = CampaignConfig(args.impl, "cpu", profile["examples"], profile["max_steps"], seed, args.jobs,
                                    failures)
            try:
                r = run_campaign(config, out=quiet)
            except SetupError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            run = {"seed": seed, "passed": r["passed"], "missing_scenarios": r["missing_scenarios"],
                   "findings": len(r["failures"]), "seconds": r["seconds"], "request_steps": r["request_steps"],
                   "rarest": sorted((n, c) for c, n in r["scenarios"].items()
                                    if not c.startswith("conventions "))[:3]}
            out["runs"].append(run)
            print(f"seed {seed:>3}: {'passed' if r['passed'] else 'FAILED'} in {r['seconds']:.1f} s"
                  f"{', never reached: ' + ', '.join(r['missing_scenarios']) if r['missing_scenarios'] else ''}"
                  f"{', findings: ' + str(len(r['failures'])) if r['failures'] else ''}", flush=True)
    out["all_passed"] = all(run["passed"] for run in out["runs"])
    seconds = sorted(run["seconds"] for run in out["runs"])
    out["median_seconds"] = seconds[len(seconds) // 2]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"{sum(run['passed'] for run in out['runs'])}/{len(seeds)} seeds passed with every class reached "
          f"(median {out['median_seconds']:.1f} s); written to {args.out}")
    return 0 if out["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
