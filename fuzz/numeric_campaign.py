"""The numeric campaign (``replayssm-verify fuzz --numeric``): the numeric
machine (:mod:`.numeric`) over every convention combination, in one process,
within a time budget.

With a budget (``--numeric-seconds``) each combination gets an equal share of
the time left when it starts and stops at its share, mid-example if need be
(:class:`.numeric.BudgetSpent`); a campaign that ran out of time is a result
with its counts (``stopped: budget``), not an error. A progress line is
printed after each combination and every 10 seconds within one, and the JSON
summary is rewritten with each line (``finished: false`` until the end), so a
run killed from outside still leaves its counts.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from replayssm.base.interrupts import Interrupted, interruptible, signal_first, stop_interrupting
from replayssm.base.isolation import TargetFault, TargetGone
from replayssm.base.reports import (
    EXIT_COVERAGE,
    EXIT_FINDING,
    EXIT_PASSED,
    EXIT_USAGE,
    STDOUT,
    JunitCase,
    status_after_writing,
    write_json,
    write_junit,
    write_reports,
)
from replayssm.spec.geometry import Conventions, Geometry

from .campaign_config import example_seed
from .machine import StatefulFailure, Statistics
from .numeric import MATERIALIZE_PLANTS, PLANTS, Budget, BudgetSpent, NumericMachine, NumericStats
from .numeric_math import SIZINGS, Dims, Sizing
from .target import DEFAULT_TARGET

NUMERIC_SCHEMA = "replayssm-fuzz-numeric/1"
"""``schema`` of the numeric campaign's summary (``fuzz --numeric --json``;
its fields: docs/fuzz.md); the major version changes when a field changes meaning."""

CALL_SECONDS = {"cpu": 120.0, "cuda": 300.0}
"""The watchdog of each call into the target's context (its process ended
and the call a ``hang`` finding past it): the numeric campaign runs in this
process, without the fuzz workers' supervisor. Generous: the first call of a
CUDA combination compiles its kernels, a loaded CPU runs the interpreter slowly."""


@dataclass(frozen=True)
class NumericConfig:
    """One numeric campaign."""

    impl: str | None
    device: str
    examples: int
    max_steps: int
    seed: int
    sizing: Sizing = SIZINGS["small"]
    plant: str | None = None
    shrink: bool = True
    forward: str = "torch"
    """The decode forward: ``torch`` (the reference) or ``flashinfer`` (``checkpointing_ssu``, CUDA)."""
    seconds: float | None = None
    """The time budget (None: none): each combination stops at its equal share of what is left."""


def ready_flashinfer(sizing: Sizing, device: torch.device) -> float:
    """Load (or JIT-build) FlashInfer's ``checkpointing_ssu`` for the sizing's
    dims and window with one call on scratch caches, and its
    ``replayssm_materialize`` module; the seconds it took.
    Raises ValueError when FlashInfer cannot be imported, built or run."""
    try:
        from flashinfer.mamba import checkpointing_ssu
    except ImportError as e:
        raise ValueError(f"--numeric-forward flashinfer needs an importable FlashInfer: {e}") from None
    d, t0 = sizing.dims, time.perf_counter()
    geometry = (sizing.geometries or (Geometry(max_num_reqs=4, block_size=8, window=16, ring_len=20),))[0]
    try:
        _scratch_decode(checkpointing_ssu, d, device, geometry.window, geometry.ring_len)
    except Exception as e:  # noqa: BLE001 - a build or launch failure of the set-up, before any example
        raise ValueError(f"FlashInfer's checkpointing_ssu failed on scratch inputs: {type(e).__name__}: {e}") from e
    try:  # the materialize module of the same specialization (its builder is private: skipped if it moved)
        from flashinfer.mamba.replayssm_materialize import _module

        _module(d.state_dtype, torch.bfloat16, torch.float32, d.dim, d.dstate, d.heads_per_group, geometry.window, 0)
    except (ImportError, TypeError):
        pass
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def _scratch_decode(checkpointing_ssu: Callable[..., Any], d: Dims, device: torch.device, window: int,
                    ring: int) -> None:
    """One decode token of slot 1 of a two-slot cache of zeros (the varlen call the forward makes)."""
    def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.zeros(*shape, dtype=dtype, device=device)

    q, ints = 1, zeros(2, dtype=torch.int32)
    x, b = zeros(1, q, d.heads, d.dim, dtype=torch.bfloat16), zeros(1, q, d.groups, d.dstate, dtype=torch.bfloat16)
    checkpointing_ssu(
        zeros(2, d.heads, d.dim, d.dstate, dtype=d.state_dtype), zeros(2, d.heads, ring, d.dim, dtype=torch.bfloat16),
        zeros(2, d.groups, ring, d.dstate, dtype=torch.bfloat16), zeros(2, d.heads, ring), ints, ints.clone(),
        x, zeros(1, q, d.heads, 1).expand(1, q, d.heads, d.dim),
        (-torch.ones(d.heads, device=device))[:, None, None].expand(d.heads, d.dim, d.dstate),
        b, b.clone(), zeros(1, q, d.heads, d.dim, dtype=torch.bfloat16),
        state_batch_indices=torch.tensor([1], dtype=torch.int32, device=device), pad_slot_id=-1,
        cu_seqlens=torch.tensor([0, q], dtype=torch.int32, device=device), max_seqlen=ring - window,
        algorithm="monolith")


class _Run:
    """One campaign's counters and its summary."""

    def __init__(self, config: NumericConfig, combos: list[Conventions]) -> None:
        self.config, self.combos = config, combos
        self.stats, self.numeric = Statistics(), NumericStats()
        self.start = time.perf_counter()
        self.done = self.cut = 0
        self.failure: str | None = None
        self.ready_seconds: float | None = None
        self.signal: int | None = None
        """The signal that interrupted the campaign, if one did."""
        self.target: Any = None
        """The loaded target (its process), once loaded."""

    def line(self, what: str) -> str:
        n = self.numeric
        return (f"  [{time.perf_counter() - self.start:.1f} s] {what}: {self.stats.examples} runs, "
                f"{self.stats.request_steps} request-steps, {n.checks} slot checks, "
                f"worst error / bound {n.worst_ratio:.3f}")

    def summary(self, finished: bool) -> dict:
        c, dims = self.config, self.config.sizing.dims
        stopped = None if not finished else ("interrupted" if self.signal is not None else
                                             "failure" if self.failure else
                                             "budget" if self.cut or self.done < len(self.combos) else "complete")
        return {"schema": NUMERIC_SCHEMA, "finished": finished, "stopped": stopped,
                "interrupted": self.signal is not None, "combinations": self.done,
                "combinations_total": len(self.combos), "combinations_cut_by_budget": self.cut,
                "examples": self.stats.examples, "request_steps": self.stats.request_steps,
                "seconds": round(time.perf_counter() - self.start, 3), "budget_seconds": c.seconds,
                "flashinfer_ready_seconds": None if self.ready_seconds is None else round(self.ready_seconds, 3),
                "checks": self.numeric.checks, "worst_error_over_bound": self.numeric.worst_ratio,
                "worst_abs_error": self.numeric.worst_abs, "forwards": dict(self.numeric.forwards),
                "state_dtype": str(dims.state_dtype).replace("torch.", ""),
                "dims": [dims.heads, dims.dim, dims.dstate, dims.groups],
                "geometries": None if c.sizing.geometries is None else
                [[g.block_size, g.window, g.ring_len] for g in c.sizing.geometries], "layers_per_group_cap": c.sizing.layers_per_group,
                "forward": c.forward, "device": c.device, "seed": c.seed, "plant": c.plant, "failure": self.failure}


def run_numeric(config: NumericConfig, conventions: list[Conventions] | None = None, progress: Any = None,
                report: Callable[[dict], None] | None = None) -> dict:
    """Run the numeric campaign in this process (every convention combination,
    ``examples`` spread over them, within ``config.seconds``; with a plant
    in materialize, the align-mode ones); returns its
    summary, whose ``failure`` is the finding's message (None: none).
    ``progress``: a stream for the progress lines; ``report``: called with the
    summary so far at each progress line. Raises ValueError on a bad
    ``--impl``, plant or FlashInfer set-up (before any example); an
    :class:`~replayssm.base.interrupts.Interrupted` that stops it carries the
    partial summary (``partial``, ``stopped`` "interrupted")."""
    if config.plant is not None and config.plant not in PLANTS:
        raise ValueError(f"--numeric-plant must be one of {', '.join(PLANTS)}; got {config.plant!r}")
    device = torch.device(config.device)
    combos = [c for c in conventions or Conventions.all()
              if c.materialize_prefixes or config.plant not in MATERIALIZE_PLANTS]
    run = _Run(config, combos)
    try:
        return _combinations(run, device, progress, report)
    except Interrupted as e:  # stopped between or inside examples: what was done is the partial summary
        run.signal = e.signum
        if run.target is not None:
            run.target.close()
        e.partial = run.summary(True)
        raise


def _combinations(run: _Run, device: torch.device, progress: Any, report: Callable[[dict], None] | None) -> dict:
    """The campaign's body: the target loaded, then each convention combination in turn."""
    from .target import load_target

    config, combos = run.config, run.combos
    try:  # in a process of its own, each call under the watchdog (:mod:`replayssm.base.isolation`)
        run.target = target = load_target(config.impl, cuda=device.type == "cuda", level="context",
                                          launch_seconds=CALL_SECONDS[device.type])
    except TargetFault as e:  # it ended, hung, raised or changed its process at import: a finding
        run.failure = f"{e.kind}: {e.report()}"
        return run.summary(True)
    run.start = time.perf_counter()  # the budget is the campaign's, not the target host's start (a fork server's)
    if report is not None:
        report(run.summary(False))  # a run killed while FlashInfer builds leaves this
    if config.forward == "flashinfer":
        run.ready_seconds = ready_flashinfer(config.sizing, device)
        run.start = time.perf_counter()  # the budget is the campaign's, not the module build's

    def show(what: str) -> None:
        if progress is not None:
            print(run.line(what), file=progress, flush=True)
        if report is not None:
            report(run.summary(False))

    budget = Budget(report=lambda: show(f"combination {run.done + 1}/{len(combos)} running"))
    # Hypothesis's first example of a run is its minimal one (no model step): at least one more.
    per_combo = max(2, -(-config.examples // len(combos)))
    for n, conv in enumerate(combos):
        if config.seconds is not None:
            left = config.seconds - (time.perf_counter() - run.start)
            if left <= 0:
                break
            budget.deadline = time.perf_counter() + left / (len(combos) - n)
        attrs = {"target": target, "device": device, "stats": run.stats, "numeric": run.numeric, "budget": budget,
                 "conventions": (conv,), "sizing": config.sizing, "plant": config.plant, "last_trace": None,
                 "numeric_seed": config.seed, "forward": config.forward}
        machine = hypothesis_seed(example_seed(config.seed, n))(type("Numeric", (NumericMachine,), attrs))
        try:
            with signal_first():
                run_state_machine_as_test(machine, settings=settings(
                    max_examples=per_combo, stateful_step_count=config.max_steps, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck),
                    phases=[Phase.generate, Phase.shrink] if config.shrink else [Phase.generate],
                    report_multiple_bugs=False))
        except StatefulFailure as e:
            run.failure = f"{e.kind}: {e}"
        except BudgetSpent:
            run.cut += 1
            if run.numeric.first_failure is not None:
                run.failure = f"{run.numeric.first_failure}\n(not shrunk: the budget ran out while shrinking)"
        except TargetGone as e:  # the target's process ended or hung in a call
            run.failure = f"{e.fault.kind}: {e.fault.report()}"
        except TargetFault as e:  # the target raised or changed its process in a call: a finding, shrunk
            run.failure = f"{e.kind}: {e.report()}"
        except Exception as e:  # the implementation or FlashInfer raised: a finding with its error
            run.failure = f"error: {type(e).__name__}: {e}"
        run.done = n + 1
        show(f"combination {n + 1}/{len(combos)} ({conv.label()}) done")
        if run.failure:
            break
    return run.summary(True)


def run_numeric_command(args: Any, examples: int, max_steps: int) -> int:
    """``replayssm-verify fuzz --numeric`` (always the context level): run,
    print progress and the summary (and keep ``--json`` current), write
    ``--json`` and ``--junit`` (``base/reports.py``); exit 0 passed, 1 a
    finding, 2 a set-up or usage error, 3 nothing was checked."""
    cuda = args.device == "cuda"
    sizing = SIZINGS[args.numeric_dims or ("realistic" if cuda else "small")]
    sizing = dataclasses.replace(sizing, dims=dataclasses.replace(sizing.dims,
                                                                  state_dtype=getattr(torch, args.state_dtype or "float32")))
    forward = args.numeric_forward or ("flashinfer" if cuda else "torch")
    if forward == "flashinfer" and not cuda:
        print("error: --numeric-forward flashinfer needs --device cuda", file=sys.stderr)
        return EXIT_USAGE
    config = NumericConfig(args.impl, args.device, examples, max_steps, args.seed, sizing,
                           plant=args.numeric_plant, shrink=args.numeric_plant is None, forward=forward,
                           seconds=args.numeric_seconds)

    def keep_current(summary: dict) -> None:
        """The summary so far (``--json -`` gets the final one only); one that cannot
        be written is not an error yet: the final write reports it."""
        if args.json and args.json != STDOUT:
            try:
                write_json(args.json, NUMERIC_SCHEMA, summary)
            except OSError:
                pass

    d = sizing.dims
    print(f"numeric campaign: {d.state_dtype} state, {d.heads} heads x {d.dim} x {d.dstate} in {d.groups} groups, "
          f"{forward} decode forward on {args.device}, {examples} examples x <= {max_steps} steps, "
          f"budget {args.numeric_seconds or 'none'} s" + (f", plant: {args.numeric_plant}" if args.numeric_plant
                                                          else ""), flush=True)
    interrupted: Interrupted | None = None
    with interruptible():
        try:
            result = run_numeric(config, progress=sys.stdout, report=keep_current)
        except ValueError as e:  # a bad --impl, plant or FlashInfer set-up
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except Interrupted as e:
            interrupted, result = e, e.partial
        stop_interrupting()  # the reports are written from here on: a signal must not cut them short
        written = write_reports([
            ("--json", args.json, lambda: write_json(args.json, NUMERIC_SCHEMA, result)),
            ("--junit", args.junit, lambda: write_junit(args.junit, NUMERIC_SUITE,
                                                        [numeric_junit_case(args.impl, result)],
                                                        interrupted is not None)),
        ], "the summary is printed below")
    ready = result["flashinfer_ready_seconds"]
    print(f"numeric campaign ({result['state_dtype']} state, {d.heads} heads x {d.dim} x {d.dstate}, "
          f"{forward} decode forward on {args.device}"
          + (f", FlashInfer ready in {ready:.1f} s" if ready is not None else "") + "): "
          f"{result['combinations']}/{result['combinations_total']} combinations "
          f"({result['combinations_cut_by_budget']} stopped by the budget), "
          f"{result['examples']} runs, {result['request_steps']} request-steps, {result['checks']} slot checks, "
          f"forward {result['forwards']}, worst error / bound {result['worst_error_over_bound']:.3f} "
          f"(worst |error| {result['worst_abs_error']:.3e}), {result['seconds']:.1f} s, stopped: {result['stopped']}")
    if interrupted is not None:
        print(f"INTERRUPTED by {signal.Signals(interrupted.signum).name} (partial summary"
              + (f"; finding: {result['failure']}" if result["failure"] else "") + ")")
        return status_after_writing(interrupted.status, written)
    if result["failure"]:
        print(f"FAILED: {result['failure']}")
        return status_after_writing(EXIT_FINDING, written)
    if not result["checks"]:
        print(f"NOTHING CHECKED: {NOTHING_CHECKED}")
        return status_after_writing(EXIT_COVERAGE, written)
    print("PASSED")
    return status_after_writing(EXIT_PASSED, written)


NUMERIC_SUITE = "replayssm-verify fuzz --numeric"
"""The JUnit test suite of ``fuzz --numeric --junit``."""

NOTHING_CHECKED = "no slot reached a numeric check"


def numeric_junit_case(impl: str | None, summary: dict) -> JunitCase:
    """``fuzz --numeric --junit``'s one test case: a failure for a finding, an error when nothing was
    checked (by a run that was not interrupted: its own ``interrupted`` case says what did not finish)."""
    name = f"{impl or DEFAULT_TARGET} numeric {summary['state_dtype']} seed {summary['seed']}"
    if summary["failure"]:
        return JunitCase(name, summary["seconds"], summary["failure"])
    if summary["interrupted"]:
        return JunitCase(name, summary["seconds"], None)
    return JunitCase(name, summary["seconds"], None if summary["checks"] else NOTHING_CHECKED, "error")
