"""One worker process of a fuzz campaign: its convention combinations' examples, until a finding.

:func:`run_worker` runs a worker's share (:mod:`.campaign_shares`):
for each of its runs (a convention combination's examples, or part of them), a Hypothesis run of the state machine
(:class:`SupervisedMachine`, made per combination by :func:`machine_class`;
with ``--systems K`` also a :class:`.lockstep.LockstepMachine`) seeded by
:func:`.campaign_config.example_seed`. Each launch is announced to the
parent (:class:`.workers.Reporter`) before it runs, so a hang or a crash
leaves its action log behind. The first failure is shrunk and returned as a
finding dict with its trace's ``log``; a lockstep failure that no single
system reproduces is searched for again with one system per launch
(:func:`one_system_search`). The parent that starts the workers and keeps
their findings is :mod:`.campaign`.
"""

from __future__ import annotations

import resource
import threading
import time
from dataclasses import asdict, replace
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from replayssm.spec.geometry import Conventions

from .actions import Action, action_to_json
from .campaign_config import CampaignConfig, SetupError, check_setup, example_seed, examples_per_combination
from .campaign_shares import SharedCounter, taken_shares
from .example_db import Namespaced
from .lockstep import LockstepMachine, widen_choices
from .machine import ReplaySSMMachine, Statistics, describe_failure
from .workers import Reporter


def hypothesis_settings(examples: int, max_steps: int, database: ExampleDatabase | None = None) -> settings:
    """A worker's Hypothesis settings; with a ``database``, Hypothesis first replays the examples stored in it."""
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
    latest failure is described as a finding (:func:`.machine.describe_failure`;
    Hypothesis runs the shrunk example last, so after a failed run it is the
    shrunk one's)."""

    reporter: Reporter | None = None
    clock: dict[str, float] | None = None
    """The worker's clock marks (:func:`run_worker`): ``first_launch``, the
    wall-clock time its first launch landed, is set here."""
    last_failure: dict | None = None
    first_failure: dict | None = None
    """The campaign's first failure as it first appeared (with its run's
    ``log``), kept through shrinking: a fault that does not recur when
    Hypothesis runs it again is reported from it (:func:`shrunk_finding`)."""

    def __init__(self) -> None:
        super().__init__()
        type(self).last_failure = None

    def execute(self, action: Action) -> None:
        if self.reporter is not None:
            self.reporter.launching(self.trace, action_to_json(action))
        try:
            super().execute(action)
        except Exception as e:
            failure = describe_failure(e, action, self.level)
            type(self).last_failure = failure
            if type(self).first_failure is None:
                type(self).first_failure = {**failure, "error": f"{type(e).__name__}: {e}"[:4000],
                                            "log": {"params": self.trace["params"],
                                                    "actions": list(self.trace["actions"])}}
            if self.reporter is not None:
                self.reporter.failing(failure)
            raise
        if self.clock is not None and "first_launch" not in self.clock:
            self.clock["first_launch"] = time.time()
        if self.reporter is not None:
            self.reporter.landed()
            self.reporter.stats(lambda: asdict(self.stats))


def machine_class(config: CampaignConfig, target: Any, seed: int, conv: Conventions,
                  stats: Statistics, reporter: Reporter | None,
                  clock: dict[str, float] | None = None) -> type[SupervisedMachine]:
    """The state machine of one Hypothesis run: a :class:`SupervisedMachine`
    subclass (and a lockstep one with ``config.systems`` above 1) whose class
    attributes are the run's target, device, level, conventions, statistics
    and reporter (Hypothesis makes a fresh instance per example), seeded ``seed``;
    ``clock``: the worker's clock marks, if it keeps them (:func:`run_worker`)."""
    import torch

    attrs = {"target": target, "device": torch.device(config.device), "level": config.level, "stats": stats,
             "last_trace": None, "first_failure": None, "conventions": (conv,), "reporter": reporter, "drop": config.drop,
             "systems": config.systems, "clock": clock}
    widen_choices(config.systems)
    bases = (SupervisedMachine,) if config.systems == 1 else (SupervisedMachine, LockstepMachine)
    return hypothesis_seed(seed)(type("Campaign", bases, attrs))


def _limit_shrinking(seconds: float) -> None:
    """Hypothesis shrinks for at most ``MAX_SHRINKING_SECONDS`` (a module
    constant of its engine, 300 s); a campaign's profile sets its own."""
    from hypothesis.internal.conjecture import engine

    if hasattr(engine, "MAX_SHRINKING_SECONDS"):
        engine.MAX_SHRINKING_SECONDS = seconds


def run_worker(config: CampaignConfig, worker: int, target: Any = None, reporter: Reporter | None = None,
               database: ExampleDatabase | None = None, *, counter: SharedCounter | None = None) -> dict | None:
    """One process's share of a campaign: Hypothesis runs of the convention
    combinations (:mod:`.campaign_shares`: each combination's examples in one
    run or several, so every combination is reached whatever the example
    count), until the first finding; with a ``counter`` shared with the other
    local workers it takes the next run when it finishes one, else every
    ``jobs``-th. Returns statistics and findings (each with its shrunk trace).
    ``target``: the loaded implementation (loaded here when None);
    ``database``: the shared example database (default: ``config.database``'s folder, if any).
    A target that is no usable input is said to ``reporter`` (``unusable``) and None returned.
    Each run is announced to ``reporter`` as ``("share", index)`` (its seed's index,
    :func:`.campaign_config.example_seed`). The result's ``clock`` holds wall-clock
    marks (``time.time()``) for the campaign's time split (:mod:`.campaign_times`):
    ``entered`` (this function called: the process started and imported), ``ready``
    (target loaded), ``first_launch`` (its first launch landed; absent without one)
    and ``end``; ``combinations``: ``[combination, part, seconds]`` of each run;
    ``cpu_seconds``: this process's CPU time (:func:`_cpu_seconds`)."""
    clock = {"entered": time.time()}
    warm = _warm_cuda() if config.device == "cuda" and target is None else None
    try:
        target = target if target is not None else check_setup(config)
    except SetupError as e:
        if reporter is None:
            raise
        reporter.send("unusable", str(e))
        return None
    finally:
        if warm is not None:
            warm.join()
    _limit_shrinking(config.shrink_limit)
    if reporter is not None:
        reporter.ready()
    combos = Conventions.all()
    if database is None and config.database is not None:
        database = DirectoryBasedExampleDatabase(config.database)
    stats, findings, took = Statistics(), [], []
    start = time.perf_counter()
    clock["ready"] = time.time()
    for share in taken_shares(worker, config.jobs, config.examples, counter):
        n, seed = share.combination, example_seed(config.seed, share.index)
        if reporter is not None:
            reporter.send("share", share.index)
        machine = machine_class(config, target, seed, combos[n], stats, reporter, clock)
        began = time.perf_counter()
        try:
            run_state_machine_as_test(machine, settings=hypothesis_settings(
                share.examples, config.max_steps,
                None if database is None else Namespaced(database, _namespace(config, n, share.part))))
        except Exception as e:  # noqa: BLE001 - any failure of the implementation is a finding
            found = shrunk_finding(machine, seed, n, e)
            if found.get("lockstep", {}).get("placement") == "together":
                found = one_system_search(config, target, seed, n, reporter, share.examples) or found
            findings.append(found)
            break
        finally:
            took.append([n, share.part, round(time.perf_counter() - began, 3)])
    clock["end"] = time.time()
    return {"stats": asdict(stats), "findings": findings, "seconds": time.perf_counter() - start,
            "clock": clock, "combinations": took, "cpu_seconds": _cpu_seconds()}


def _cpu_seconds() -> float:
    """This process's CPU time (user + system) and that of its children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_pulling_worker(config: CampaignConfig, worker: int, counter: SharedCounter,
                       reporter: Reporter | None = None) -> dict | None:
    """:func:`run_worker` of a local worker that takes its runs from ``counter`` (the supervisor's entry point)."""
    return run_worker(config, worker, None, reporter, counter=counter)


def _warm_cuda() -> threading.Thread:
    """Make this process's CUDA context in a thread while the target loads in its
    own process (the worker's first example would otherwise wait for it); a
    failure here is left to the set-up checks and the first example to report."""
    def body() -> None:
        try:
            import torch

            torch.zeros(1, device="cuda")
        except Exception:  # noqa: BLE001, S110 - check_setup and the first launch report a CUDA problem
            pass

    thread = threading.Thread(target=body, name="warm-cuda", daemon=True)
    thread.start()
    return thread


def _namespace(config: CampaignConfig, combination: int, part: int = 0) -> str:
    """A run's key prefix in the example database (a lockstep example means another run; part 0
    keeps the combination's prefix of before the split)."""
    return (f"combination {combination}" + (f", {config.systems} systems per launch" if config.systems > 1 else "")
            + (f", part {part}" if part else ""))


def one_system_search(config: CampaignConfig, target: Any, seed: int, combination: int,
                      reporter: Reporter | None, examples: int | None = None) -> dict | None:
    """A lockstep failure that no single system reproduces (one system's rows
    disturbing another's state) is looked for with one system per launch in
    the same combination and seed, over as many systems as the lockstep run
    ran (``systems`` times its ``examples``; None: the combination's): that finding, shrunk, or None."""
    one = replace(config, systems=1)
    machine = machine_class(one, target, seed, Conventions.all()[combination], Statistics(), reporter)
    try:
        examples = examples if examples is not None else examples_per_combination(config.examples)
        budget = examples * config.systems  # as many systems as the lockstep run's
        run_state_machine_as_test(machine, settings=hypothesis_settings(budget, config.max_steps))
    except Exception as e:  # noqa: BLE001 - any failure of the implementation is a finding
        found = shrunk_finding(machine, seed, combination, e)
        return {**found, "reason": f"{found['reason']} (searched with one system per launch after a "
                                   f"{config.systems}-system failure no single system reproduced)",
                "lockstep": {"systems": config.systems, "system": None, "placement": "searched alone"}}
    return None


def shrunk_finding(machine: type[SupervisedMachine], seed: int, combination: int, error: Exception) -> dict:
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
    if issubclass(machine, LockstepMachine):  # the failing system's own trace (:mod:`.lockstep`)
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
