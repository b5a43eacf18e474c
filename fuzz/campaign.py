"""Fuzz campaigns: profiles, seeds, supervised worker processes, findings, traces.

A campaign splits the 32 convention combinations over ``jobs`` worker
processes (:mod:`.workers`): a kernel that hangs or kills its process is a
finding like a discrepancy, and the first finding stops the other workers.
Exit statuses, the console report and the JSON summary: :mod:`.report`;
replaying a saved trace: :mod:`.replay`.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from dataclasses import asdict, astuple, dataclass, replace
from itertools import combinations
from pathlib import Path
from typing import Any, TextIO

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from replayssm.base.isolation import TargetFault
from replayssm.base.reports import check_output_file, check_output_folder
from replayssm.base.traces import TRACE_ID
from replayssm.spec.geometry import Conventions

from .actions import Action, action_to_json
from .containment import check_drop, compare_outside
from .example_db import Namespaced
from .lockstep import LockstepMachine, check_systems, widen_choices
from .launch_traces import spec_states
from .machine import ReplaySSMMachine, Statistics
from .report import Cell, Finding, Progress, campaign_id, kernel_of, save_trace, summarize, unique_name
from .target import DEFAULT_TARGET, isolates, load_target
from .workers import Child, Reporter, Supervisor

PROFILES = {
    "ci": {"examples": 128, "max_steps": 12},
    "dev": {"examples": 150, "max_steps": 20},
    "nightly": {"examples": 2000, "max_steps": 40},
}

WATCHDOG_SECONDS = {
    "cpu": {"ci": 10.0, "dev": 20.0, "nightly": 60.0},
    "cuda": {"ci": 300.0, "dev": 300.0, "nightly": 300.0},
}
"""Default per-launch watchdog by device and profile (``--watchdog`` overrides).
CPU: the slowest launch of a ci campaign under the Triton interpreter takes
well under a second (``slowest_launch_seconds`` in the summary, docs/fuzz.md);
ci keeps a hang's time to kill short, the longer unattended profiles trade
that for a wider margin against a loaded machine. CUDA: the first launch of
each of the 32 constexpr combinations compiles its kernels."""

SHRINK_SECONDS = {"ci": 5.0, "dev": 30.0, "nightly": 300.0}
"""How long Hypothesis may shrink a finding, per profile (``--shrink-seconds``):
ci reports fast (a partly shrunk trace still replays), nightly shrinks as far
as Hypothesis's own limit."""

MAX_JOBS = len(Conventions.all())
"""A worker takes whole convention combinations: more workers than the 32 would idle."""

SCENARIOS = (
    "checkpoint",
    "ring wrap",
    "boundary with checkpoint",
    "boundary without checkpoint",
    "live == destination publish",
    "multi-column prefill reset",
    "prefix hit",
    "migration to a fresh slot",
    "migration to a copied slot",
    "padding row",
    "null column",
    "table full",
    "live column is the last column",
    "stale slot past the live column",
    "block size 1",
    "one-column table",
    "mode-none chunk past the first block",
    *(f"conventions {c.label()}" for c in Conventions.all()),
)
"""Every scenario class a campaign must reach."""


def required_scenarios(drop: str | None) -> tuple[str, ...]:
    """:data:`SCENARIOS`, and under ``--drop NAME`` a row that broke it."""
    return SCENARIOS + ((f"broke {drop}",) if drop else ())


@dataclass(frozen=True)
class CampaignConfig:
    """One campaign's parameters. ``watchdog`` and ``shrink_seconds`` default
    to the ``profile``'s (:data:`WATCHDOG_SECONDS`, :data:`SHRINK_SECONDS`)."""

    impl: str | None
    device: str
    examples: int
    max_steps: int
    seed: int
    jobs: int
    failures_dir: str
    level: str = "kernel"
    profile: str = "ci"
    watchdog: float | None = None
    shrink_seconds: float | None = None
    drop: str | None = None
    """A per-request caller assumption broken on purpose (:mod:`.containment`)."""
    database: str | None = None
    """The folder of the Hypothesis example database the workers share (:mod:`.example_db`); None: none."""
    ray: str | None = None
    """Run the workers as Ray tasks (:mod:`.ray_pool`): a cluster's address, or "" for a local Ray;
    None: the local process pool. With Ray, ``jobs`` None is one worker per GPU (cuda) or CPU the cluster has."""
    systems: int = 1
    """Independent small systems per launch, driven in lockstep (:mod:`.lockstep`)."""

    @property
    def watchdog_seconds(self) -> float:
        """``watchdog``, else the profile's; on CPU times ``systems // 4`` from 8
        systems on (the interpreter's time grows with a launch's rows)."""
        if self.watchdog is not None:
            return self.watchdog
        scale = max(1, self.systems // 4) if self.device == "cpu" else 1
        return WATCHDOG_SECONDS[self.device][self.profile] * scale

    @property
    def shrink_limit(self) -> float:
        return self.shrink_seconds if self.shrink_seconds is not None else SHRINK_SECONDS[self.profile]

    def as_json(self) -> dict:
        return {"impl": self.impl or DEFAULT_TARGET, "level": self.level, "device": self.device, "seed": self.seed,
                "profile": self.profile, "budget": {"examples": self.examples, "max_steps": self.max_steps},
                "jobs": self.jobs, "watchdog_seconds": self.watchdog_seconds, "shrink_seconds": self.shrink_limit,
                "drop": self.drop, "database": self.database, "systems": self.systems,
                **({"ray": self.ray} if self.ray is not None else {})}


def _settings(examples: int, max_steps: int, database: ExampleDatabase | None = None) -> settings:
    """With a ``database``, Hypothesis first replays the examples stored in it."""
    return settings(
        max_examples=examples,
        stateful_step_count=max_steps,
        deadline=None,
        database=database,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.reuse] * (database is not None) + [Phase.generate, Phase.shrink],
        report_multiple_bugs=False,
    )


class SupervisedMachine(ReplaySSMMachine):
    """The state machine as a campaign worker runs it: each launch is
    announced to the parent (:class:`Reporter`) before it runs, and the
    latest failure is described as a :class:`Finding` (Hypothesis runs the
    shrunk example last, so after a failed run it is the shrunk one's)."""

    reporter: Reporter | None = None
    last_failure: dict | None = None
    first_failure: dict | None = None
    """The campaign's first failure as it first appeared (with its run's
    ``log``), kept through shrinking: a fault that does not recur when
    Hypothesis runs it again is reported from it (:func:`_shrunk_finding`)."""

    def __init__(self) -> None:
        super().__init__()
        type(self).last_failure = None

    def execute(self, action: Action) -> None:
        if self.reporter is not None:
            self.reporter.launching(self.trace, action_to_json(action))
        try:
            super().execute(action)
        except Exception as e:
            failure = describe_failure(e, action, self)
            type(self).last_failure = failure
            if type(self).first_failure is None:
                type(self).first_failure = {**failure, "error": f"{type(e).__name__}: {e}"[:4000],
                                            "log": {"params": self.trace["params"],
                                                    "actions": list(self.trace["actions"])}}
            if self.reporter is not None:
                self.reporter.failing(failure)
            raise
        if self.reporter is not None:
            self.reporter.landed()
            self.reporter.stats(lambda: asdict(self.stats))


def describe_failure(error: BaseException, action: Action | None, machine: Any = None) -> dict:
    """Kind, reason, kernel and first differing cells of a failure raised
    while running ``action`` (None: outside a launch, e.g. an invariant)."""
    kind = getattr(error, "kind", "exception")
    lines = str(error).splitlines() or [""]
    if isinstance(error, TargetFault):  # the target's own words: what it raised, or how it changed its process
        reason = error.reason
    else:
        reason = lines[0].rstrip(":") if kind != "exception" else f"{type(error).__name__}: {lines[0]}"
    name = action.NAME if action else None
    cells: list[Cell] = []
    if kind == "discrepancy" and machine is not None:
        cells = [Cell(d.buffer, list(d.index), d.spec, d.impl)
                 for d in compare_outside(machine.spec.state(), machine.impl.state(),
                                          getattr(action, "contained", None))[:4]]
    level = machine.level if machine is not None else "kernel"
    kernel = getattr(error, "kernel", None) or (
        kernel_of(name, level, cells[0].buffer if cells else None) if name else "the spec's invariants")
    return {"kind": kind, "reason": reason[:500], "kernel": kernel, "cells": [asdict(c) for c in cells]}


def _machine(config: CampaignConfig, target: Any, seed: int, conv: Conventions,
             stats: Statistics, reporter: Reporter | None) -> type[SupervisedMachine]:
    import torch

    attrs = {"target": target, "device": torch.device(config.device), "level": config.level, "stats": stats,
             "last_trace": None, "first_failure": None, "conventions": (conv,), "reporter": reporter, "drop": config.drop,
             "systems": config.systems}
    widen_choices(config.systems)
    bases = (SupervisedMachine,) if config.systems == 1 else (SupervisedMachine, LockstepMachine)
    return hypothesis_seed(seed)(type("Campaign", bases, attrs))


class SetupError(ValueError):
    """The campaign cannot start (device, target, level, output paths): not a finding."""


def examples_per_combination(examples: int) -> int:
    """Each convention combination runs the same number of examples, at least
    one: ``examples`` rounded up to a multiple of the combination count."""
    return max(1, -(-examples // len(Conventions.all())))


def combinations_of(worker: int, jobs: int) -> list[int]:
    """The convention combinations (indices into ``Conventions.all()``) that
    ``worker`` of ``jobs`` runs, in order. The workers take turns picking,
    each the combination that adds the most value pairs of two flags to those
    its own earlier ones cover (lowest index on ties): every worker meets each
    pair of flag values within its first few combinations, so a bug that
    needs two flags set some way is met early by whichever worker runs, and
    together the workers run each combination once."""
    combos = Conventions.all()

    def pairs(n: int) -> set:
        flags = astuple(combos[n])
        return {(i, j, flags[i], flags[j]) for i, j in combinations(range(len(flags)), 2)}

    every_pair = set().union(*(pairs(n) for n in range(len(combos))))
    remaining = list(range(len(combos)))
    covered: list[set] = [set() for _ in range(jobs)]
    taken: list[list[int]] = [[] for _ in range(jobs)]
    turn = 0
    while remaining:
        best = max(remaining, key=lambda n: (len(pairs(n) - covered[turn]), -n))
        covered[turn] |= pairs(best)
        if covered[turn] == every_pair:
            covered[turn] = set()
        taken[turn].append(best)
        remaining.remove(best)
        turn = (turn + 1) % jobs
    return taken[worker]


def check_device(device: str) -> None:
    """A :class:`SetupError` unless ``device`` is ``cpu``, or ``cuda`` with a CUDA device present."""
    import torch

    if device not in ("cpu", "cuda"):
        raise SetupError(f"--device must be cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise SetupError("--device cuda: this torch sees no CUDA device")


def check_budget(examples: Any, max_steps: Any) -> None:
    """A :class:`SetupError` unless both are ints >= 1 (named as ``fuzz``'s options)."""
    for option, value in (("--examples", examples), ("--max-steps", max_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SetupError(f"{option} must be >= 1 (an int), got {value!r}")


def check_setup(config: CampaignConfig, json_path: str | None = None, load: bool = True) -> Any:
    """The campaign's target (``load`` false: None, the options only), or a
    :class:`SetupError` naming what is wrong with the device, the budget, the
    output paths, the target or the level."""
    if config.ray is None or config.device != "cuda":  # under Ray the workers' machines need CUDA, not this one
        check_device(config.device)
    check_budget(config.examples, config.max_steps)
    if config.ray is not None and config.jobs is None:
        pass  # one worker per GPU or CPU of the cluster, counted once connected (.ray_pool)
    elif isinstance(config.jobs, bool) or not isinstance(config.jobs, int) or not 1 <= config.jobs <= MAX_JOBS:
        raise SetupError(f"--jobs must be in [1, {MAX_JOBS}] (one worker per convention combination at most), "
                         f"got {config.jobs!r}")
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) or config.seed < 0:
        raise SetupError(f"seed must be an int >= 0, got {config.seed!r}")
    try:
        check_drop(config.drop)
        check_systems(config.systems, config.drop)
    except ValueError as e:
        raise SetupError(str(e)) from e
    if config.profile not in PROFILES:
        raise SetupError(f"--profile must be one of {sorted(PROFILES)}, got {config.profile!r}")
    for name in ("watchdog", "shrink_seconds"):
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise SetupError(f"--{name.replace('_', '-')} must be a number of seconds > 0, got {value!r}")
    try:
        check_output_file(json_path, "--json", stdout_ok=True)
        check_output_folder(config.failures_dir, "--failures")
        if config.database is not None:
            check_output_folder(config.database, "--database")
        if config.ray is not None:
            from .ray_pool import require_ray

            require_ray()
        if not isinstance(config.impl, (str, type(None))) or config.impl is not None and not config.impl.strip():
            raise ValueError(f"--impl must name a module or a .py file, got {config.impl!r}")
        if not load:
            return None
        return load_target(config.impl, cuda=config.device == "cuda" and config.ray is None, level=config.level)
    except ValueError as e:
        raise SetupError(str(e)) from e


def _limit_shrinking(seconds: float) -> None:
    """Hypothesis shrinks for at most ``MAX_SHRINKING_SECONDS`` (a module
    constant of its engine, 300 s); a campaign's profile sets its own."""
    from hypothesis.internal.conjecture import engine

    if hasattr(engine, "MAX_SHRINKING_SECONDS"):
        engine.MAX_SHRINKING_SECONDS = seconds


def run_worker(config: CampaignConfig, worker: int, target: Any = None, reporter: Reporter | None = None,
               database: ExampleDatabase | None = None) -> dict | None:
    """One process's share of a campaign: every ``jobs``-th convention
    combination of :func:`combinations_of`, each with its share of the
    examples (so every combination is reached whatever the example count),
    until the first finding. Returns statistics and findings (each with its
    shrunk trace). ``target``: the loaded implementation (loaded here when None);
    ``database``: the shared example database (default: ``config.database``'s folder, if any).
    A target that is no usable input is said to ``reporter`` (``unusable``) and None returned."""
    try:
        target = target if target is not None else check_setup(config)
    except SetupError as e:
        if reporter is None:
            raise
        reporter.send("unusable", str(e))
        return None
    _limit_shrinking(config.shrink_limit)
    if reporter is not None:
        reporter.ready()
    combos = Conventions.all()
    per_combo = examples_per_combination(config.examples)
    if database is None and config.database is not None:
        database = DirectoryBasedExampleDatabase(config.database)
    stats, findings = Statistics(), []
    start = time.perf_counter()
    for n in combinations_of(worker, config.jobs):
        seed = config.seed * 1000 + n
        machine = _machine(config, target, seed, combos[n], stats, reporter)
        try:
            run_state_machine_as_test(machine, settings=_settings(
                per_combo, config.max_steps, None if database is None else Namespaced(database, _namespace(config, n))))
        except Exception as e:  # noqa: BLE001 - any failure of the implementation is a finding
            found = _shrunk_finding(machine, seed, n, e)
            if found.get("lockstep", {}).get("placement") == "together":
                found = _one_system_search(config, target, seed, n, reporter) or found
            findings.append(found)
            break
    return {"stats": asdict(stats), "findings": findings, "seconds": time.perf_counter() - start}


def _namespace(config: CampaignConfig, combination: int) -> str:
    """A combination's key prefix in the example database (a lockstep example means another run)."""
    return f"combination {combination}" + (f", {config.systems} systems per launch" if config.systems > 1 else "")


def _one_system_search(config: CampaignConfig, target: Any, seed: int, combination: int,
                       reporter: Reporter | None) -> dict | None:
    """A lockstep failure that no single system reproduces (one system's rows
    disturbing another's state) is looked for with one system per launch in
    the same combination and seed, over as many systems as the lockstep share
    ran (``systems`` times its examples): that finding, shrunk, or None."""
    one = replace(config, systems=1)
    machine = _machine(one, target, seed, Conventions.all()[combination], Statistics(), reporter)
    try:
        budget = examples_per_combination(config.examples) * config.systems  # as many systems as the lockstep run's
        run_state_machine_as_test(machine, settings=_settings(budget, config.max_steps))
    except Exception as e:  # noqa: BLE001 - any failure of the implementation is a finding
        found = _shrunk_finding(machine, seed, combination, e)
        return {**found, "reason": f"{found['reason']} (searched with one system per launch after a "
                                   f"{config.systems}-system failure no single system reproduced)",
                "lockstep": {"systems": config.systems, "system": None, "placement": "searched alone"}}
    return None


def _shrunk_finding(machine: type[SupervisedMachine], seed: int, combination: int, error: Exception) -> dict:
    """The finding of a failed Hypothesis run, with the shrunk run's trace
    (Hypothesis runs the shrunk example last). A failure before that run
    recorded its parameters is the harness's, raised."""
    first = machine.first_failure
    if isinstance(error, Flaky) and first is not None:  # it failed once, then not again: never the spec's fault
        return {**first, "reason": f"{first['reason']} (non-deterministic: the same run passed when Hypothesis "
                                   "repeated it; the trace is the run as it first failed)",
                "combination": combination, "seed": seed, "shrunk": False, "deterministic": False}
    trace = machine.last_trace
    if trace is None:
        raise RuntimeError(f"the fuzz harness failed before its run recorded a trace (seed {seed}): "
                           f"{type(error).__name__}: {error}") from error
    described = machine.last_failure or describe_failure(error, None)
    if getattr(machine, "systems", 1) > 1:  # lockstep: the failing system's own trace (:mod:`.lockstep`)
        isolated = machine.isolate(described)
        if isolated is not None:
            return {**isolated, "combination": combination, "seed": seed, "shrunk": True,
                    "error": f"{type(error).__name__}: {error}"[:4000]}
    found = {**described, "combination": combination, "seed": seed, "shrunk": True,
             "error": f"{type(error).__name__}: {error}"[:4000], "log": {"params": trace["params"],
                                                                           "actions": trace["actions"]}}
    if first is not None and first["log"] != found["log"]:
        found["first_seen"] = first  # the run as it first failed, saved beside the shrunk one
    return found


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
    findings: list[Finding]
    start: float
    supervisor: Supervisor | None = None
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

    def combination_of(self, child: Child) -> int:
        """The combination a worker was running (from its current example's conventions)."""
        if child.params is None:
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
        impl = c.impl or DEFAULT_TARGET
        if impl.endswith(".py"):
            impl = str(Path(impl).resolve())
        trace["#meta"].update({"seed": found["seed"], "combination": found["combination"], "impl": impl,
                               "level": c.level, "device": c.device, "failure": found["kind"],
                               "error": found.get("error", found["reason"]), "shrunk": found["shrunk"],
                               "deterministic": found.get("deterministic", True)})
        if "lockstep" in found:
            trace["#meta"]["lockstep"] = found["lockstep"]
        return save_trace(trace, c.failures_dir, name, self.out)

    def record(self, found: dict) -> None:
        """Save a finding's trace (and, when it was shrunk, its run as it first
        failed), print the finding, keep it."""
        log = found["log"]
        name = unique_name(self.name, found["kind"], found["seed"], found["combination"])
        finding = Finding(found["kind"], found["reason"], found["kernel"], found["combination"], found["seed"],
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
        print("\n".join(finding.lines()), file=self.out, flush=True)
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
        if fault["log"] is None:
            fault["log"] = {"params": None, "actions": []}
        action = fault["log"]["actions"][-1]["name"] if fault["log"]["actions"] else None
        where = "the target's import" if child.fault.get("error") and not child.ready else "the worker"
        self.record({**fault, "kernel": kernel_of(action, self.config.level) if action else where,
                     "combination": n, "seed": self.config.seed * 1000 + n, "shrunk": False})


def run_campaign(config: CampaignConfig, *, out: TextIO = sys.stdout, json_path: str | None = None) -> dict:
    """Run a campaign on ``jobs`` supervised processes; report and return its
    summary (see :mod:`.report`; ``exit_code`` is the CLI's status). Set-up
    problems (including unwritable ``json_path`` or failures folder) raise
    :class:`SetupError` before any work."""
    start = time.perf_counter()
    target = check_setup(config, json_path, load=not isolates(config.level))  # an isolated target: in each worker
    pool = None
    if config.ray is not None:
        from .ray_pool import RayPool

        pool = RayPool(config, out)  # connected (else a SetupError), with jobs counted from the cluster
        config = pool.config
    examples = examples_per_combination(config.examples) * len(Conventions.all())
    print(f"fuzzing {config.impl or DEFAULT_TARGET} ({config.level} level) on {config.device}: {examples} examples "
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

    fork = config.device != "cuda" and pool is None
    callbacks = {"on_fault": campaign.fault, "on_failing": campaign.failing, "on_tick": tick}
    supervisor = pool.supervisor(**callbacks) if pool else Supervisor(
        multiprocessing.get_context("fork" if fork else "spawn"), config.watchdog_seconds, **callbacks)
    campaign.supervisor = supervisor
    for w in range(config.jobs):
        supervisor.start(w, run_worker, (config, w, target if fork else None))
    supervisor.run()
    if pool:
        pool.close()
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
        if child.result is None and child.fault is None and child.failing_log is not None:
            # stopped (an interrupt) while shrinking: the failing run as it was first seen
            n = campaign.combination_of(child)
            campaign.record({**child.failing, "combination": n, "seed": config.seed * 1000 + n,
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
    summary["slowest_launch_seconds"] = round(max(c.slowest_launch for c in supervisor.children), 3)
    if pool:
        summary["ray_tasks"] = sorted(pool.tasks, key=lambda t: t["worker"])
    return summary

