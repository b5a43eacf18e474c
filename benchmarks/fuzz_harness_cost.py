"""The stateful campaign's own cost per verified request-step, without any kernel.

    python3 -P benchmarks/fuzz_harness_cost.py [--systems 1 16 64] [--examples 8] [--out FILE]

Runs the campaign's state machine (``fuzz --systems K``; one process, no
worker supervision) with the implementation side replaced by a second copy
of the spec, over 4 convention combinations (0, 13, 22, 31) with
``--examples`` examples each and ``--steps`` rules per example (12): what is left is the
harness (Hypothesis's draws and bookkeeping, the callers, the layout, the
spec, the comparison, the invariants), which on a GPU runs beside the
kernels in every worker. Reports per K the request-steps, the CPU seconds of
the runs (this process, imports excluded) and per request-step, and the
spec's share. The values run one after another in one process: compare them
on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header  # noqa: E402

COMBINATIONS = (0, 13, 22, 31)
"""Convention combinations run per K: none, align with idx_mapping, and the two extremes."""


def harness_cost(systems: int, examples: int, steps: int = 12) -> dict:
    """Request-steps and CPU seconds of the state machine with a spec for an implementation."""
    from hypothesis.stateful import run_state_machine_as_test

    from replayssm.fuzz import bulk_choices, launcher, lockstep, machine
    from replayssm.fuzz.campaign_config import CampaignConfig
    from replayssm.fuzz.campaign_worker import hypothesis_settings, machine_class
    from replayssm.fuzz.launcher import SpecSide
    from replayssm.fuzz.machine import Statistics
    from replayssm.spec.geometry import Conventions

    class SecondSpec(SpecSide):
        """The spec standing in for the implementation: no kernel runs."""

        def __init__(self, setup: launcher.Setup, target: object, device: object) -> None:
            super().__init__(setup)

    for module in (launcher, lockstep, machine):
        module.LEVELS = {**module.LEVELS, "kernel": SecondSpec}
    rows: list[bulk_choices.BulkDraw] = []

    def counted_rows(data: object, systems: int) -> list[bulk_choices.BulkDraw]:
        drawn = bulk_choices.rows_of(data, systems)
        rows.extend(drawn)
        return drawn

    lockstep.rows_of = counted_rows
    config = CampaignConfig(None, "cpu", 32 * examples, steps, 0, 1, "out/bench-failures", systems=systems)
    stats = Statistics()
    cpu = time.process_time()
    for n in COMBINATIONS:
        run_state_machine_as_test(machine_class(config, None, n, Conventions.all()[n], stats, None),
                                  settings=hypothesis_settings(examples, steps))
    cpu = time.process_time() - cpu
    return {"systems": systems, "steps": steps, "examples": stats.examples, "request_steps": stats.request_steps,
            "cpu_seconds": round(cpu, 2),
            "cpu_ms_per_request_step": round(1000 * cpu / stats.request_steps, 3) if stats.request_steps else None,
            "spec_seconds": round(stats.spec_seconds, 2), "second_spec_seconds": round(stats.kernel_seconds, 2),
            "choice_rows": len(rows), "row_refills": sum(r.refills for r in rows)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--examples", type=int, default=8, help="examples per convention combination")
    p.add_argument("--steps", type=int, default=12, help="rules per example")
    p.add_argument("--out", help="also write the JSON report here")
    args = p.parse_args()
    error = bad_options({"--examples": args.examples, "--steps": args.steps, "--systems": min(args.systems)}, args.out)
    if error is None and max(args.systems) > 256:
        error = f"error: --systems must be in [1, 256], got {max(args.systems)}"
    if error:
        print(error, file=sys.stderr)
        return 2
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    report = {**header(torch=torch.__version__),
              "runs": [harness_cost(k, args.examples, args.steps) for k in args.systems]}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
