"""Fuzz campaigns: the parent that runs the supervised workers and keeps their findings.

:func:`run_campaign` checks the set-up (:mod:`.campaign_config`), splits the
32 convention combinations over ``jobs`` worker processes (:mod:`.workers`,
or Ray tasks: :mod:`.ray_pool`), each running :func:`.campaign_worker.run_worker`,
and keeps the books: a kernel that hangs or kills its process is a finding
like a discrepancy, and the first finding stops the other workers; each
finding's trace is saved (with the run as it first failed, when it was
shrunk), the statistics are merged and the summary made. Exit statuses, the
console report and the JSON summary: :mod:`.report`; replaying a saved
trace: :mod:`.replay`.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from replayssm.base.escape import one_line
from replayssm.base.interrupts import Interrupted, interruptible, stop_children, stop_interrupting
from replayssm.base.traces import TRACE_ID
from replayssm.spec.geometry import Conventions

from .campaign_config import (CampaignConfig, SetupError, check_setup, combinations_of, example_seed,
                              examples_per_combination, required_scenarios)
from .campaign_times import time_split
from .campaign_shares import SharedCounter
from .campaign_worker import run_pulling_worker, run_worker
from .launch_traces import spec_states
from .machine import Statistics
from .report import CampaignFinding, Cell, Progress, campaign_id, kernel_of, save_trace, summarize, unique_name
from .target import DEFAULT_TARGET
from .workers import Child, Supervisor

if TYPE_CHECKING:
    from .ray_pool import RayPool


def _merge(parts: list[dict]) -> Statistics:
    total = Statistics()
    for s in parts:
        total.examples += s["examples"]
        total.request_steps += s["request_steps"]
        total.kernel_seconds += s["kernel_seconds"]
        total.spec_seconds += s["spec_seconds"]
        for k, v in s["rules"].items():
            total.count(total.rules, k, v)
        for k, v in s["scenarios"].items():
            total.count(total.scenarios, k, v)
    return total


@dataclass
class _Campaign:
    """The parent's view of a running campaign."""

    config: CampaignConfig
    out: TextIO
    name: str
    findings: list[CampaignFinding]
    start: float
    supervisor: Supervisor | RayPool | None = None
    started_at: float = 0.0
    """The campaign's start, wall clock (``time.time()``: the time split's reference)."""
    spawned: dict[int, float] = field(default_factory=dict)
    """When each worker was started, wall clock."""
    counter: SharedCounter | None = None
    """The local workers' next run (held here: a worker opens it by name when it starts)."""
    share_of: dict[int, int] = field(default_factory=dict)
    """Each worker's current run, as its seed's index (:func:`.campaign_config.example_seed`)."""
    faulted: bool = False
    """A worker's hang or death was recorded (the first stops the others)."""

    def stop_others(self, child: Child) -> None:
        """The first finding stops the other workers (the finder goes on to shrink)."""
        assert self.supervisor is not None
        for other in self.supervisor.children:
            if other is not child:
                self.supervisor.stop(other)

    def failing(self, child: Child) -> None:
        """A worker's first failure: say so and stop the others while it shrinks."""
        assert child.failing is not None
        print(f"  worker {child.name} hit a failure ({child.failing['kind']}): {child.failing['reason']}; "
              "shrinking it, the other workers stop", file=self.out, flush=True)
        self.stop_others(child)

    def message(self, child: Child, message: tuple) -> None:
        """A worker's own message: ``("share", index)`` starts a run."""
        if message[0] == "share":
            self.share_of[child.name] = message[1]

    def seed_of(self, child: Child, combination: int) -> int:
        """The Hypothesis seed of the run a worker was in (its combination's first run's when it never said)."""
        return example_seed(self.config.seed, self.share_of.get(child.name, combination))

    def combination_of(self, child: Child) -> int:
        """The combination a worker was running (from its current example's conventions)."""
        if child.params is None:  # before its first launch: the run it said it started
            if child.name in self.share_of:
                return self.share_of[child.name] % len(Conventions.all())
            return combinations_of(child.name, self.config.jobs)[0]
        conv = Conventions(**child.params["conventions"])
        return Conventions.all().index(conv)

    def _save(self, found: dict, name: str) -> str | None:
        """Save the trace of ``found``'s ``log`` (with the spec's states and the
        finding's ``#meta``) as ``name``; None when no launch had started."""
        log = found["log"]
        if log["params"] is None:
            return None
        trace = {"#meta": {"format": TRACE_ID, "source": "fuzz"}, "params": log["params"], "actions": log["actions"]}
        try:
            trace["states"] = spec_states(trace)
        except Exception as e:  # noqa: BLE001 - the trace is saved anyway; the states are a convenience
            print(f"warning: the spec cannot run this trace ({type(e).__name__}: {e}); saved without states",
                  file=self.out)
        c = self.config
        trace["#meta"].update({"seed": found["seed"], "combination": found["combination"], "impl": self.impl(),
                               "level": c.level, "device": c.device, "failure": found["kind"],
                               "error": found.get("error", found["reason"]), "shrunk": found["shrunk"],
                               "deterministic": found.get("deterministic", True)})
        if "lockstep" in found:
            trace["#meta"]["lockstep"] = found["lockstep"]
        return save_trace(trace, c.failures_dir, name, self.out)

    def impl(self) -> str:
        """The target as a trace records it (a file by its absolute path)."""
        impl = self.config.impl or DEFAULT_TARGET
        return str(Path(impl).resolve()) if impl.endswith(".py") else impl

    def record(self, found: dict) -> None:
        """Save a finding's trace (and, when it was shrunk, its run as it first
        failed), print the finding, keep it. ``found["seed"]`` is the example
        seed of the run (:func:`.campaign_config.example_seed`), which names the trace."""
        log = found["log"]
        name = unique_name(self.name, found["kind"], found["seed"], found["combination"])
        finding = CampaignFinding(found["kind"], found["reason"], found["kernel"], found["combination"], found["seed"],
                          len(log["actions"]), found["shrunk"], [Cell(**x) for x in found.get("cells", [])])
        finding.trace = self._save(found, name)
        if "first_seen" in found:
            first = {**found["first_seen"], "seed": found["seed"], "combination": found["combination"],
                     "shrunk": False}
            finding.first_seen = self._save(first, unique_name(self.name, f"{found['kind']}-first-seen",
                                                               found["seed"], found["combination"]))
        finding.deterministic = found.get("deterministic", True)
        finding.seconds = round(time.perf_counter() - self.start, 3)
        self.findings.append(finding)
        print("\n".join(finding.lines(None if self.impl() == DEFAULT_TARGET else self.impl())), file=self.out,
              flush=True)
        if log["params"] is None and found.get("error", found["reason"]) != found["reason"]:  # the target's words
            print("\n".join(f"    {line}" for line in found["error"].splitlines()), file=self.out, flush=True)

    def fault(self, child: Child) -> None:
        """A worker hung or died: the finding is its log up to that launch. The
        first fault stops the other workers; one that a stopped worker had
        already reported in the same turn of the supervisor is not a second
        finding (a slow host's first launch past the watchdog, say)."""
        if self.faulted:
            return
        self.faulted = True
        self.stop_others(child)
        fault, n = child.fault, self.combination_of(child)
        assert fault is not None  # the supervisor calls this once it set the fault
        if fault["log"] is None:
            fault["log"] = {"params": None, "actions": []}
        action = fault["log"]["actions"][-1]["name"] if fault["log"]["actions"] else None
        where = "the target's import" if fault.get("error") and not child.ready else "the worker"
        self.record({**fault, "kernel": kernel_of(action, self.config.level) if action else where,
                     "combination": n, "seed": self.seed_of(child, n), "shrunk": False})


def run_campaign(config: CampaignConfig, *, out: TextIO = sys.stdout) -> dict:
    """Run a campaign on ``jobs`` supervised processes; report and return its
    summary (see :mod:`.report`; ``exit_code`` is the CLI's status). Set-up
    problems (including an unwritable failures folder) raise
    :class:`~.campaign_config.SetupError` before any work; the command line
    checks its report files itself (``base/reports.py``, as every command does).
    SIGINT or SIGTERM at any point, before the workers start included, ends
    in an interrupted summary of what was done."""
    start, started_at = time.perf_counter(), time.time()
    pool: RayPool | None = None
    started: tuple[_Campaign, Supervisor | RayPool, Progress] | None = None
    try:
        with interruptible():
            check_setup(config, load=False)  # the target: loaded by each worker, in a process of its own
            if config.ray is not None:
                from .ray_pool import RayPool

                pool = RayPool(config, out)  # connected (else a SetupError), with jobs counted from the cluster
                config = pool.config
            started = _start(config, pool, out, start)
            started[0].started_at = started_at
            started[1].run()  # from its start to its end, the supervisor takes the signals itself
            stop_interrupting()  # the summary is written from here on: a signal must not cut it short
    except Interrupted as e:
        stop_children()  # those started before the supervisor took the signals
        if started is None:
            if pool:
                pool.close()
            print("interrupted before the workers started", file=out, flush=True)
            return summarize(config.as_json(), Statistics(), [], [], e.signum, time.perf_counter() - start, out)
        started[1].signal = started[1].signal or e.signum
    if pool:
        pool.close()
    return _summary(config, pool, *started, start, out)


def _start(config: CampaignConfig, pool: RayPool | None, out: TextIO,
           start: float) -> tuple[_Campaign, Supervisor | RayPool, Progress]:
    """Announce the campaign and start its workers (processes, or Ray tasks on ``pool``)."""
    examples = examples_per_combination(config.examples) * len(Conventions.all())
    print(f"fuzzing {one_line(config.impl or DEFAULT_TARGET)} ({config.level} level) on {config.device}: {examples} examples "
          f"x <= {config.max_steps} steps, seed {config.seed}, {config.jobs} process(es), "
          f"{config.watchdog_seconds:g} s watchdog per launch", file=out, flush=True)
    if config.drop:
        print(f"dropping {config.drop}: some requests break it; the others are judged by containment",
              file=out, flush=True)
    campaign = _Campaign(config, out, campaign_id(), [], start)
    progress = Progress(out, examples)

    def tick() -> None:
        s = _merge([c.stats for c in supervisor.children if c.stats])
        progress.update(s.examples, s.request_steps, len(campaign.findings))

    supervisor: Supervisor | RayPool
    if pool is not None:
        supervisor = pool.supervisor(on_fault=campaign.fault, on_failing=campaign.failing, on_tick=tick)
    else:
        context = worker_context(config.device)
        campaign.counter = counter = SharedCounter(context, config.jobs)
        supervisor = Supervisor(context, config.watchdog_seconds, on_message=campaign.message,
                                on_fault=campaign.fault, on_failing=campaign.failing, on_tick=tick)
    campaign.supervisor = supervisor
    for w in range(config.jobs):
        campaign.spawned[w] = time.time()
        if pool is not None:  # Ray tasks share no memory: each takes every jobs-th run
            supervisor.start(w, run_worker, (config, w, None))  # the target: loaded there
        else:
            supervisor.start(w, run_pulling_worker, (config, w, counter))
    return campaign, supervisor, progress


WORKER_PRELOAD = ["replayssm.fuzz.campaign_worker"]
"""What the CUDA workers' fork server imports once (torch, Hypothesis, the
harness; never CUDA), so that each worker starts as a fork of it instead of
a fresh interpreter importing them (4-6 s each, 16 at once, on the H200
machine: docs/gpu.md, 2026-12-06)."""


def worker_context(device: str) -> Any:
    """The local workers' process context: a fork of this process on CPU; on
    CUDA (a CUDA context does not survive a fork) forks of a fork server that
    has imported :data:`WORKER_PRELOAD` and made no CUDA context."""
    if device != "cuda":
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


def _summary(config: CampaignConfig, pool: RayPool | None, campaign: _Campaign, supervisor: Supervisor | RayPool,
             progress: Progress, start: float, out: TextIO) -> dict:
    """The campaign's summary from what its workers returned (or had reported when stopped)."""
    ended_at = time.time()
    progress.close()
    parts, errors = [], []
    for child in supervisor.children:
        if child.error is not None:
            errors.append(child.error)
        if isinstance(child.result, dict):
            parts.append(child.result["stats"])
            for found in child.result["findings"]:
                campaign.record(found)
        elif child.stats:
            parts.append(child.stats)  # stopped early: what it had done by its last report
        if child.result is None and child.fault is None and child.failing is not None \
                and child.failing_log is not None:
            # stopped (an interrupt) while shrinking: the failing run as it was first seen
            n = campaign.combination_of(child)
            campaign.record({**child.failing, "combination": n, "seed": campaign.seed_of(child, n),
                             "shrunk": False, "log": child.failing_log})
    unusable = [c.unusable for c in supervisor.children if c.unusable is not None]
    if unusable and not campaign.findings and supervisor.signal is None:
        raise SetupError(unusable[0])
    if errors and not campaign.findings and supervisor.signal is None:
        raise SetupError("a fuzz worker failed outside the implementation:\n" + errors[0])
    stats = _merge(parts)
    missing = [s for s in required_scenarios(config.drop) if not stats.scenarios.get(s)]
    summary = summarize(config.as_json(), stats, missing, campaign.findings, supervisor.signal,
                        time.perf_counter() - start, out)
    summary["worker_seconds"] = round(sum(c.result["seconds"] for c in supervisor.children
                                          if isinstance(c.result, dict)), 3)
    summary["worker_cpu_seconds"] = round(sum(c.result.get("cpu_seconds", 0.0) for c in supervisor.children
                                              if isinstance(c.result, dict)), 3)
    summary["slowest_launch_seconds"] = round(max(c.slowest_launch for c in supervisor.children), 3)
    if pool:
        summary["ray_tasks"] = sorted(pool.tasks, key=lambda t: t["worker"])
    else:  # local workers: their clocks and the parent's are one machine's
        summary["time_split"] = time_split(campaign.started_at, ended_at, campaign.spawned,
                                           {c.name: c.result for c in supervisor.children
                                            if isinstance(c.result, dict) and "clock" in c.result})
    return summary
