"""Many independent small systems per launch, driven in lockstep (``fuzz --systems K``).

One Hypothesis example draws one small system's shape and K caller models
(:class:`.callers.Callers` with :data:`LOCKSTEP_POLICY`, each with its own
swarm of features). Every rule applies to all K systems, each with its own
choices (which requests admit, step, finish or are preempted, and how),
decoded from its row of the bytes the rule draws once for all K
(:mod:`.bulk_choices`); a model step lays the K
systems' launch actions side by side (:mod:`.lockstep_layout`) and runs them
as one launch on the spec (numpy lanes over the whole launch) and on the
implementation, guards on. Every entry of every state buffer is compared; a
differing entry is attributed to the system that owns it, and the invariants
are checked per system after every rule.

A failure is still one small system's trace. Hypothesis shrinks the whole
example; then :meth:`LockstepMachine.isolate` takes the failing system's own
launch actions, first *alone* (its local actions: exactly a ``--systems 1``
trace) and, when that does not reproduce (the bug depends on where the system
sits, e.g. a slot range or a row index), *in place* (its rows at their place
in the K systems' buffers, the other systems' rows padding or absent), and
re-runs each on the spec and the implementation until one fails. That trace
is the finding. Only a failure no single system reproduces (one system's row
disturbing another's state) keeps the K-system trace.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import assume
from hypothesis import strategies as hs
from hypothesis.internal.conjecture import engine as _engine
from hypothesis.stateful import initialize, invariant, precondition, rule

from .actions import Action, action_from_json
from .bulk_choices import rows_of
from .caller_policy import CallerPolicy, Draw, integer
from .caller_shapes import features_for, shapes
from .callers import Callers
from .launcher import LEVELS, Setup, SpecSide, compare
from .lockstep_layout import Layout, Parts, combine
from .machine import (ReplaySSMMachine, StatefulFailure, describe_failure, discrepancy, fuzz_trace, live_slot_mismatch,
                      published_slot_mismatch)

MAX_SYSTEMS = 256
"""The most systems one launch carries (``--systems``)."""

SCHEDULED = (0, 3)
"""Whether a running request takes part in a step (a decision in this range): any value but 0, as a
scheduler runs most running requests every step (more verified rows per
step for the same per-step costs); 0, where shrinking starts, leaves it out."""

IDLE = hs.integers(0, 63)
"""Each system's first draw: 0 leaves it idle for the whole example (no
request ever). Generation rarely draws 0; shrinking tries it first, so
Hypothesis drops every system a failure does not need."""

_CHOICE_BUDGET = _engine.BUFFER_SIZE
"""Hypothesis's budget of drawn choices per example (its engine's ``BUFFER_SIZE``)."""


def widen_choices(systems: int) -> None:
    """Give an example ``systems`` times Hypothesis's choice budget, so that
    each system of a lockstep run may draw as much as one system alone
    (otherwise the state machine would stop after fewer steps, or overrun)."""
    from hypothesis import stateful

    _engine.BUFFER_SIZE = stateful.BUFFER_SIZE = _CHOICE_BUDGET * systems


def check_systems(systems: Any, drop: str | None) -> None:
    """A ``ValueError`` naming ``--systems`` unless it is an int in ``[1, MAX_SYSTEMS]``
    (and 1 under ``--drop``, whose containment judges one system's violators)."""
    if isinstance(systems, bool) or not isinstance(systems, int) or not 1 <= systems <= MAX_SYSTEMS:
        raise ValueError(f"--systems must be an int in [1, {MAX_SYSTEMS}] (independent small systems per launch), "
                         f"got {systems!r}")
    if systems > 1 and drop:
        raise ValueError(f"--systems must be 1 with --drop (containment judges one system), got {systems}")


def system_trace(layout: Layout, steps: list[Parts], system: int, placement: str) -> dict:
    """One system's launch actions of a lockstep run: ``alone`` (its local
    actions and shape) or ``in place`` (laid in the K systems' buffers, alone there)."""
    if placement == "alone":
        return fuzz_trace(layout.local.as_json(), [a for parts in steps if system in parts for a in parts[system]])
    if placement == "in place":
        return fuzz_trace(layout.setup.as_json(), [a for parts in steps if system in parts
                                               for a in combine(layout, {system: parts[system]})[0]])
    raise ValueError(f"placement must be 'alone' or 'in place', got {placement!r}")


def judge(trace: dict, target: Any, device: torch.device, level: str) -> dict | None:
    """Run ``trace`` on the spec and on the implementation (in this process);
    the first failure described as a campaign finding (kind, reason, kernel,
    cells: :func:`.machine.describe_failure`), or None when the implementation
    agrees throughout."""
    setup = Setup.from_json(trace["params"])
    spec = SpecSide(setup)
    try:
        side = LEVELS[level](setup, target, device)
    except Exception as e:  # noqa: BLE001 - the implementation's failure is the finding
        return describe_failure(e, None, level)
    for n, raw in enumerate(trace["actions"]):
        action = action_from_json(raw, f"trace.actions[{n}]")
        spec.run(action)
        try:
            side.run(action)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception as e:  # noqa: BLE001 - the implementation's failure is the finding
            return describe_failure(e, action, level)
        wrong = compare(spec.state(), side.state())
        if wrong:
            return describe_failure(discrepancy(action, wrong), action, level)
    return None


def scheduled_rows(draw: Draw, rids: list[int]) -> list[int]:
    """Each running request scheduled or not (:data:`SCHEDULED`); the first one when none is."""
    return [r for r in rids if integer(draw, *SCHEDULED) > 0] or rids[:1]


def shuffled(draw: Draw, n: int) -> list[int]:
    """A Fisher-Yates shuffle of ``range(n)``."""
    order = list(range(n))
    for i in range(n - 1):
        j = integer(draw, i, n - 1)
        order[i], order[j] = order[j], order[i]
    return order


LOCKSTEP_POLICY = CallerPolicy(choose_rows=scheduled_rows, batch_order=shuffled)
"""One lockstep system's callers: the same decisions as the fuzz campaign's,
with the step's choice of rows and their batch order made of single
decisions that decode from a system's row of choice bytes
(:mod:`.bulk_choices`): :func:`scheduled_rows` and :func:`shuffled`. Both
shrink to the simplest step (one request, in order)."""


class LockstepMachine(ReplaySSMMachine):
    """K small systems of one shape, one launch per step for all of them.
    Set ``systems`` (and what :class:`ReplaySSMMachine` needs) on a subclass."""

    systems: int = 2
    last_run: dict | None = None
    """The latest run's layout and per-step local actions (the failing run's, after shrinking)."""
    failing_system: int | None = None
    """The system the latest failure was attributed to (None: not attributable)."""

    @initialize(shape=hs.runner().flatmap(lambda machine: shapes(machine.conventions)), data=hs.data())
    def build_system(self, shape: tuple, data: Any) -> None:
        """K systems of one drawn shape, each with its own caller features and a first request."""
        cls = type(self)
        cls.last_trace, cls.last_run, cls.failing_system = None, None, None
        local, aim = shape
        self.layout = Layout(local, self.systems)
        self.setup = self.layout.setup
        self.trace = fuzz_trace(self.setup.as_json())
        self.steps: list[Parts] = []
        self.row_owner: list[int] = []
        cls.last_trace = self.trace
        cls.last_run = {"layout": self.layout, "steps": self.steps}
        self.spec = SpecSide(self.setup)
        self.impl = LEVELS[self.level](self.setup, self.target, self.device)
        self.idle = {k for k in range(self.systems) if data.draw(IDLE) == 0}
        assume(len(self.idle) < self.systems)  # some system runs
        rows = rows_of(data, self.systems)
        self.group = [Callers(local, features_for(row, aim), policy=LOCKSTEP_POLICY) for row in rows]
        self.stats.examples += 1
        self.stats.count(self.stats.scenarios, f"conventions {local.conventions.label()}")
        for k, callers in enumerate(self.group):  # every system that runs starts with a request
            if k not in self.idle and callers.admit(rows[k]):
                self._rule("admit")

    def execute(self, action: Action) -> None:
        """Run one combined launch on both sides; a discrepancy names the system it belongs to."""
        try:
            super().execute(action)
        except StatefulFailure as e:
            if e.kind != "discrepancy":
                raise
            k = self.layout.owner(compare(self.spec.state(), self.impl.state()), self.row_owner)
            type(self).failing_system = k
            where = f"system {k} of {self.systems}" if k is not None else f"none of the {self.systems} systems alone"
            raise StatefulFailure(f"{where}: {e}", e.kind, e.discrepancies) from None

    @precondition(lambda self: any(len(c.requests) < c.geo.max_num_reqs
                                   for k, c in enumerate(self.group) if k not in self.idle))
    @rule(data=hs.data())
    def admit(self, data: Any) -> None:
        """Each system may admit a request (its own choice, prompt and prefix hit)."""
        rows = rows_of(data, self.systems)
        for k, callers in enumerate(self.group):
            if k not in self.idle and len(callers.requests) < callers.geo.max_num_reqs and rows[k].boolean() \
                    and callers.admit(rows[k]):
                self._rule("admit")

    @precondition(lambda self: any(c.requests for c in self.group))
    @rule(steps=hs.integers(1, 4), data=hs.data())
    def model_steps(self, steps: int, data: Any) -> None:
        """``steps`` model-runner steps of every system, one combined launch each."""
        for _ in range(steps):
            if not any(c.requests for c in self.group):
                return
            parts: Parts = {}
            rows = rows_of(data, self.systems)
            for k, callers in enumerate(self.group):
                actions = callers.step(rows[k]) if callers.requests else []
                if actions:
                    parts[k] = actions
                    self._rule("model_step")
                    self.stats.request_steps += sum(c != "padding" for c in actions[-1].caller)
            if not parts:
                continue
            launches, self.row_owner = combine(self.layout, parts)
            self.steps.append(parts)
            for action in launches:
                self.execute(action)

    def _leave(self, data: Any, preempt: bool) -> None:
        for callers, draw in zip(self.group, rows_of(data, self.systems)):
            if len(callers.requests) >= 2 and draw.boolean():
                self._rule("preempt" if preempt else "finish")
                callers.finish(draw.element(sorted(callers.requests)), preempt=preempt)

    @precondition(lambda self: any(len(c.requests) >= 2 for c in self.group))
    @rule(data=hs.data())
    def finish(self, data: Any) -> None:
        """Each system with two running requests or more may finish one."""
        self._leave(data, preempt=False)

    @precondition(lambda self: any(len(c.requests) >= 2 for c in self.group))
    @rule(data=hs.data())
    def preempt(self, data: Any) -> None:
        """Each system with two running requests or more may preempt one."""
        self._leave(data, preempt=True)

    def _check_systems(self, check: Any) -> None:
        if not hasattr(self, "group"):
            return
        for k, callers in enumerate(self.group):
            wrong = check(callers, self.spec.buffers, lambda s, k=k: self.layout.slot(k, s))
            if wrong:
                type(self).failing_system = k
                self._fail(f"system {k} of {self.systems}: {wrong}")

    @invariant()
    def live_slots_refine_requests(self) -> None:
        """In every system, each running request's live slot holds FlashInfer's view of it."""
        self._check_systems(live_slot_mismatch)

    @invariant()
    def published_slots_stay_canonical(self) -> None:
        """In every system, a published slot keeps trackers (0, 0) in every group."""
        self._check_systems(published_slot_mismatch)

    def teardown(self) -> None:
        for callers in getattr(self, "group", []):
            for k, v in callers.scenarios.items():
                self.stats.count(self.stats.scenarios, k, v)

    @classmethod
    def isolate(cls, described: dict) -> dict | None:
        """The latest failing run as one small system's finding: ``described``
        (the lockstep failure) re-judged on the failing system's own trace,
        alone and then in place, the attributed system first (see the module
        docstring). Returns the finding with its ``log`` (params and actions)
        and ``lockstep`` (systems, system, placement); when no single system
        reproduces it, the systems together (``placement`` ``together``, the
        lockstep run's own trace). None before any run recorded a layout."""
        run = cls.last_run
        if run is None:
            return None
        layout, steps = run["layout"], run["steps"]
        failing = cls.failing_system
        if described["kind"] == "invariant" and failing is not None:
            # the spec against the callers' view, which replay does not re-judge: the system's own trace
            trace = system_trace(layout, steps, failing, "alone")
            return {**described, "log": trace,
                    "lockstep": {"systems": layout.systems, "system": failing, "placement": "alone"}}
        ran = sorted({k for parts in steps for k in parts})
        for k in ([failing] if failing in ran else []) + [k for k in ran if k != failing]:
            for placement in ("alone", "in place"):
                trace = system_trace(layout, steps, k, placement)
                found = judge(trace, cls.target, cls.device, cls.level)
                if found is not None:
                    reason = f"system {k} of {layout.systems} ({placement}): {found['reason']}"
                    return {**found, "reason": reason, "log": trace,
                            "lockstep": {"systems": layout.systems, "system": k, "placement": placement}}
        return {**described, "log": {"params": layout.setup.as_json(), "actions": cls.last_trace["actions"]},
                "lockstep": {"systems": layout.systems, "system": failing, "placement": "together"}}
