"""The Hypothesis state machine: callers' actions as rules, the spec as judge.

Each rule is a caller action (admit with prefix hits, a model-runner step with
prefill chunks, decode steps, live-column moves with block copies and
migration and padding rows, finish, preempt). A step's launch actions run on
the spec and on the implementation; every entry of every state buffer must
agree. The ``@invariant``s check the refinement against FlashInfer's own view
of each live slot, and that published slots stay canonical. Optional caller
behaviours are switched on and off per run (swarm testing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

import torch
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from replayssm.base.isolation import TargetFault
from replayssm.base.traces import TRACE_ID
from replayssm.spec.geometry import Conventions

from .actions import Action, SetState, action_to_json
from .caller_shapes import Features, systems
from .callers import Callers
from .containment import compare_outside
from .launcher import LEVELS, Discrepancy, Setup, SpecSide, compare
from .report import Cell, kernel_of

@dataclass
class Statistics:
    """What a campaign exercised, merged over examples."""

    examples: int = 0
    request_steps: int = 0
    rules: dict[str, int] = field(default_factory=dict)
    scenarios: dict[str, int] = field(default_factory=dict)
    kernel_seconds: float = 0.0
    spec_seconds: float = 0.0

    def count(self, table: dict[str, int], key: str, n: int = 1) -> None:
        table[key] = table.get(key, 0) + n


RUNNING_REQUEST = hs.runner().flatmap(lambda machine: hs.sampled_from(sorted(machine.callers.requests)))
"""The id of one running request of the machine that draws it."""


class StatefulFailure(AssertionError):
    """A finding of the stateful run: ``kind`` is ``discrepancy`` (the
    implementation's buffers differ from the spec's: ``discrepancies`` are the
    differing entries, as the launch's comparison found them) or ``invariant``
    (the spec's trackers differ from the callers' view of FlashInfer)."""

    def __init__(self, message: str, kind: str, discrepancies: Sequence[Discrepancy] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.discrepancies = list(discrepancies)


def fuzz_trace(params: dict, actions: list[Action] | tuple = ()) -> dict:
    """A trace the fuzzer made: ``params`` (a setup's JSON) and ``actions`` as JSON."""
    return {"#meta": {"format": TRACE_ID, "source": "fuzz"}, "params": params,
            "actions": [action_to_json(a) for a in actions]}


def discrepancy(action: Action, wrong: list) -> StatefulFailure:
    """The failure of a launch after which ``wrong`` entries differ from the spec's (the first 12 shown)."""
    shown = "\n  ".join(str(d) for d in wrong[:12])
    return StatefulFailure(f"{action.NAME} disagrees with the spec in {len(wrong)} entries:\n  {shown}", "discrepancy",
                   wrong)


CELLS_SHOWN = 4
"""How many differing entries a finding names (its ``cells``)."""


def describe_failure(error: BaseException, action: Action | None, level: str = "kernel") -> dict:
    """Kind, reason, kernel and first differing cells (a :class:`StatefulFailure`'s
    ``discrepancies``) of a failure raised while running ``action`` (None:
    outside a launch, e.g. an invariant) at harness ``level``."""
    kind = getattr(error, "kind", "exception")
    lines = str(error).splitlines() or [""]
    if isinstance(error, TargetFault):  # the target's own words: what it raised, or how it changed its process
        reason = error.reason
    else:
        reason = lines[0].rstrip(":") if kind != "exception" else f"{type(error).__name__}: {lines[0]}"
    name = action.NAME if action else None
    wrong = error.discrepancies if isinstance(error, StatefulFailure) and kind == "discrepancy" else []
    cells = [Cell(d.buffer, list(d.index), d.spec, d.impl) for d in wrong[:CELLS_SHOWN]]
    kernel = getattr(error, "kernel", None) or (
        kernel_of(name, level, cells[0].buffer if cells else None) if name else "the spec's invariants")
    return {"kind": kind, "reason": reason[:500], "kernel": kernel, "cells": [asdict(c) for c in cells]}


class ReplaySSMMachine(RuleBasedStateMachine):
    """Set ``target``, ``device`` and ``level`` on a subclass before running."""

    target: ModuleType
    device: torch.device = torch.device("cpu")
    level: str = "kernel"
    conventions: tuple[Conventions, ...] = tuple(Conventions.all())
    stats: Statistics = Statistics()
    last_trace: dict | None = None
    """The trace of the latest run (the failing one, after Hypothesis shrinks)."""
    drop: str | None = None
    """The per-request assumption some requests break (``fuzz --drop``): each
    launch is then judged outside the violators' footprint (:mod:`.containment`)."""

    @initialize(system=hs.runner().flatmap(lambda machine: systems(machine.conventions)), data=hs.data())
    def build_system(self, system: tuple[Setup, Features], data: Any) -> None:
        """A system (``caller_shapes.systems``: geometry, conventions, table, aim) with its first request."""
        type(self).last_trace = None
        self.setup, features = system
        conv = self.setup.conventions
        self.trace = fuzz_trace(self.setup.as_json())
        type(self).last_trace = self.trace
        self.spec = SpecSide(self.setup)
        self.impl = LEVELS[self.level](self.setup, self.target, self.device)
        self.callers = Callers(self.setup, features, drop=self.drop)
        self.stats.examples += 1
        self.stats.count(self.stats.scenarios, f"conventions {conv.label()}")
        self.admit(data)  # every run starts with a request, whichever rules its swarm enables

    def _fail(self, message: str, kind: str = "invariant") -> None:
        raise StatefulFailure(message, kind)

    def execute(self, action: Action) -> None:
        """Run one launch action on both sides and compare every state buffer."""
        self.trace["actions"].append(action_to_json(action))
        t0 = time.perf_counter()
        self.spec.run(action)
        t1 = time.perf_counter()
        self.impl.run(action)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # kernel time, not launch time
        t2 = time.perf_counter()
        self.stats.spec_seconds += t1 - t0
        self.stats.kernel_seconds += t2 - t1
        spec_state = self.spec.state()
        contained = getattr(action, "contained", None)
        wrong = compare_outside(spec_state, self.impl.state(), contained)
        if wrong:
            raise discrepancy(action, wrong)
        if contained and compare(spec_state, self.impl.state()):
            self.execute(SetState({b: v.tolist() for b, v in spec_state.items()},
                                  ["both sides take the spec's state inside the violators' footprint"]))

    def _rule(self, name: str) -> None:
        self.stats.count(self.stats.rules, name)

    @precondition(lambda self: len(self.callers.requests) < self.setup.geometry.max_num_reqs)
    @rule(data=hs.data())
    def admit(self, data: Any) -> None:
        """A new request (its prompt and prefix hit depend on what is running)."""
        if self.callers.admit(data.draw):
            self._rule("admit")

    @precondition(lambda self: bool(self.callers.requests))
    @rule(steps=hs.integers(1, 4), data=hs.data())
    def model_steps(self, steps: int, data: Any) -> None:
        """``steps`` consecutive model-runner steps (each schedules what is running)."""
        for _ in range(steps):
            if not self.callers.requests:
                return
            actions = self.callers.step(data.draw)
            if actions:
                self._rule("model_step")
                self.stats.request_steps += sum(c != "padding" for c in actions[-1].caller)
            for action in actions:
                self.execute(action)

    @precondition(lambda self: len(self.callers.requests) >= 2)
    @rule(rid=RUNNING_REQUEST)
    def finish(self, rid: int) -> None:
        self._rule("finish")
        self.callers.finish(rid, preempt=False)

    @precondition(lambda self: len(self.callers.requests) >= 2)
    @rule(rid=RUNNING_REQUEST)
    def preempt(self, rid: int) -> None:
        self._rule("preempt")
        self.callers.finish(rid, preempt=True)

    @invariant()
    def live_slots_refine_requests(self) -> None:
        """Each running request's live slot holds FlashInfer's view of it in
        every group: ring start, and ``P + committed = N``."""
        if hasattr(self, "callers"):
            wrong = live_slot_mismatch(self.callers, self.spec.buffers)
            if wrong:
                self._fail(wrong)

    @invariant()
    def published_slots_stay_canonical(self) -> None:
        """A published slot keeps trackers (0, 0) in every group."""
        if hasattr(self, "callers"):
            wrong = published_slot_mismatch(self.callers, self.spec.buffers)
            if wrong:
                self._fail(wrong)

    def teardown(self) -> None:
        if hasattr(self, "callers"):
            for k, v in self.callers.scenarios.items():
                self.stats.count(self.stats.scenarios, k, v)


def live_slot_mismatch(callers: Callers, buffers: dict, slot: Callable[[int], int] = int) -> str | None:
    """The first running request (keeping the contract) whose live slot does
    not hold FlashInfer's view of it, ring start and ``P + committed = N``, in
    some group of the spec's ``buffers`` (``slot``: where the callers' slot
    ids sit in those buffers)."""
    for r in callers.requests.values():
        if r.live_col < 0 or not callers.keeps_contract(r):
            continue
        for g, cols in enumerate(r.cols):
            at = slot(cols[r.live_col])
            got = (int(buffers["ring_start"][g, at]), int(buffers["num_committed"][g, at]))
            want = (r.ring_start, r.computed - r.checkpoint_pos)
            if got != want:
                return (f"request {r.rid} group {g} live slot {cols[r.live_col]}: trackers {got}, "
                        f"FlashInfer's view (start, N - P) = {want}")
    return None


def published_slot_mismatch(callers: Callers, buffers: dict, slot: Callable[[int], int] = int) -> str | None:
    """The first published slot whose trackers in the spec's ``buffers`` are not (0, 0)."""
    for (stream, col), slots in callers.published.items():
        for g, s in enumerate(slots):
            at = slot(s)
            got = (int(buffers["ring_start"][g, at]), int(buffers["num_committed"][g, at]))
            if got != (0, 0) and (g, s) not in callers.tainted_slots:
                return f"published slot {s} (stream {stream}, column {col}) of group {g} has trackers {got}"
    return None
