"""Lifecycle campaigns: the fuzz callers against one version (or two, differentially).

:class:`LifecycleMachine` is a Hypothesis state machine whose rules are the
fuzz callers' actions (admit, model-runner steps, finish, preempt); each step
runs on every version under test through its adapter (:func:`run_step`). With
one version a broken lifecycle property is the failure; with two (``base``
and ``head``) a step where exactly one of them breaks one is, classified as a
``fix`` (base breaks, head does not) or a ``regression`` (the reverse); steps
where both break are counted, and that pair stops being compared. A failure
is shrunk by Hypothesis and saved as a review trace, which :func:`replay` runs
again without the callers.

Campaigns are counted, not timed: the convention combinations take turns, a
few examples each, until the campaign's examples are run, so that a campaign
finds the same failures on a slow and a fast machine; its ``budget`` of
seconds is only a watchdog (no turn starts after it: :attr:`CampaignOutcome.cut`).
A campaign keeps going after a failure: each distinct one (its kind and
property) is shrunk by a count of steps (:data:`SHRINKS`) and saved, and an
example that breaks a property already found is rejected, so the later turns
look for the others. The failure being shrunk is kept as first seen, so that
an interrupt while Hypothesis shrinks it still saves its trace
(:attr:`Failure.shrunk` false; see :mod:`replayssm.base.interrupts`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import torch
from hypothesis import HealthCheck, Phase, Verbosity, reject, settings
from hypothesis.errors import Flaky, Unsatisfiable
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine as hypothesis_engine
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from replayssm.fuzz.actions import BlockCopy, Migrate, Postprocess
from replayssm.fuzz.caller_shapes import GEOMETRIES, Features
from replayssm.fuzz.campaign_config import example_seed
from replayssm.fuzz.launcher import Setup
from replayssm.base.interrupts import Interrupted, signal_first
from replayssm.base.reports import fitting_name, write_text
from replayssm.base.traces import REVIEW_ID
from replayssm.spec.generations.contract import ALL as LAUNCH_CLAUSES
from replayssm.spec.geometry import Conventions, Geometry

from replayssm.spec.generations import Api
from .arguments import CallerStep
from .ghost import Ghost
from .harness import Harness
from .host_modes import launched_by, launches_executed_width
from .lifecycle import PropertyBroken, expectation, review_callers, run_step, state_copies
from .store_lines import StoreLog

MODEL_BLOCKS = 10
"""The callers' longest request, in blocks (its table as vLLM sizes it: ``Setup.sized``)."""
SHRINKS = 10
"""A failure is shrunk by at most this many successful shrinks of Hypothesis
(``MAX_SHRINKS``): a count, so the saved trace is the same on any machine."""
SHRINK_WATCHDOG_SECONDS = 120.0
"""Shrinking one failure stops after this long whatever the count: a watchdog
for a stalled machine, never the bound that decides the trace."""


@dataclass
class Version:
    """A version under test: its label, loaded module (in a process of its
    own: :class:`replayssm.base.remote.RemoteModule`) and launch API, and
    its kernels as read from its source for the proofs
    (:func:`replayssm.verify.kernels.source_module.kernel_module`)."""

    label: str
    source: str
    module: Any
    api: Api
    kernels: ModuleType | None = None


@dataclass
class Tally:
    """What a campaign exercised."""

    examples: int = 0
    steps: int = 0
    request_steps: int = 0
    both_broke: int = 0
    broken_steps: int = 0
    """Steps that broke a dropped assumption (in some row)."""
    scenarios: dict[str, int] = field(default_factory=dict)


class Diverged(AssertionError):
    """Exactly one of base and head broke a lifecycle property at a step."""

    def __init__(self, kind: str, finding: PropertyBroken, who: str) -> None:
        super().__init__(f"{kind}: {who} breaks {finding}")
        self.kind, self.finding, self.who = kind, finding, who


def _inputs(action: Any) -> dict:
    """A launch record's inputs by name (those the conventions leave out as None)."""
    return {f.name: getattr(action, f.name) for f in fields(action) if f.name != "caller"}


def _state_copies(dropped: frozenset[str]) -> bool:
    return state_copies(dropped)


class LifecycleMachine(RuleBasedStateMachine):
    """Set ``versions`` (one, or base and head), ``device``, ``conventions``,
    ``dropped``, ``tally`` and (for the progress line of a failure)
    ``progress``/``shrinking`` on a subclass."""

    versions: tuple[Version, ...]
    device: torch.device = torch.device("cpu")
    conventions: tuple[Conventions, ...] = tuple(Conventions.all())
    geometries: tuple[Geometry, ...] = GEOMETRIES
    model_blocks: int = MODEL_BLOCKS
    cache_mode: str | None = None
    """The systems' cache mode (None: the one each convention combination serves by default)."""
    group_counts: tuple[int, int] = (1, 3)
    """The fewest and most Mamba cache groups a system has."""
    dropped: frozenset[str] = frozenset()
    executed_width: bool = False
    """Every version's host may run FlashInfer at a fixed executed width (``host_modes.launches_executed_width``):
    some examples then do."""
    known: frozenset[tuple[str, str]] = frozenset()
    """Failures already found, as ``(kind, property)``: an example that breaks one is rejected."""
    tally: Tally = Tally()
    last_trace: dict | None = None
    first_failure: tuple[dict, Exception] | None = None
    """The first failing example's trace and failure, as Hypothesis first saw it."""
    progress: TextIO | None = None
    shrinking: str = ""
    notes: list[tuple[str, str, dict]] = []
    """Each launch clause's first note (``Ghost.notes``: a deviation no consumer
    reads) as ``(clause, message, the trace up to its step)``, over the campaign."""

    @initialize(data=st.data())
    def build_system(self, data: Any) -> None:
        geo = data.draw(st.sampled_from(self.geometries), label="geometry")
        conv = data.draw(st.sampled_from(self.conventions), label="conventions")
        fewest, most = self.group_counts
        layers = tuple(data.draw(st.lists(st.integers(1, 3), min_size=fewest, max_size=most), label="layers per group"))
        features = Features(*(data.draw(st.booleans(), label=f) for f in
                              ("prefix_hits", "padding_rows", "block_copies", "null_columns")))
        executed = self.executed_width and data.draw(st.booleans(), label="executed width")
        self.callers, self.record = review_callers(
            Setup.sized(geo, conv, layers, model_blocks=self.model_blocks, num_slots=48, cache_mode=self.cache_mode),
            features, self.dropped, executed)
        self.setup = self.callers.kernel_setup
        self.sides = [(v, Harness(self.setup, v.module, v.api, self.device),
                       Ghost(layers, geo.ring_len, geo.window, geo.pad_slot)) for v in self.versions]
        self.broken: list[PropertyBroken | None] = [None] * len(self.versions)
        self.notes_seen = 0
        self.trace: dict[str, Any] = {
            "#meta": {"format": REVIEW_ID, "versions": [[v.label, v.source, v.api.name] for v in self.versions],
                      "dropped": sorted(self.dropped)},
            "params": self.setup.as_json(), "steps": []}
        type(self).last_trace = self.trace
        self.tally.examples += 1

    @precondition(lambda self: len(self.callers.requests) < self.setup.geometry.max_num_reqs)
    @rule(data=st.data())
    def admit(self, data: Any) -> None:
        self.callers.admit(data.draw)

    @precondition(lambda self: bool(self.callers.requests))
    @rule(data=st.data())
    def model_steps(self, data: Any) -> None:
        for _ in range(data.draw(st.integers(1, 4), label="steps")):
            if not self.callers.requests:
                return
            actions = self.callers.step(data.draw)
            if not actions:
                continue
            copies = [c for a in actions if isinstance(a, BlockCopy) for c in a.copies]
            migrate = next(a for a in actions if isinstance(a, Migrate))
            post = next(a for a in actions if isinstance(a, Postprocess))
            step = CallerStep(self.record.rows, post.block_table, copies, _inputs(migrate), _inputs(post))
            expect = expectation(self.callers)
            self.trace["steps"].append({**step.as_json(), "expect": expect, "breaks": self.record.breaks,
                                        "row_breaks": self.record.row_breaks})
            self.tally.steps += 1
            self.tally.request_steps += sum(r is not None for r in step.rows)
            self.tally.broken_steps += bool(self.record.breaks)
            self._run(step, expect)

    def _run(self, step: CallerStep, expect: dict) -> None:
        newly: list[PropertyBroken | None] = [None] * len(self.sides)
        for i, (version, harness, ghost) in enumerate(self.sides):
            if self.broken[i] is None:
                try:
                    run_step(harness, ghost, step, expect, state_copies=_state_copies(self.dropped))
                except PropertyBroken as f:
                    newly[i] = self.broken[i] = f
        if len(self.sides) == 1:
            self._note(self.sides[0][2])
            if newly[0] is not None:
                raise self._failed(newly[0])
            return
        (base, head) = newly
        if base is not None and head is not None:
            self.tally.both_broke += 1
        elif base is not None and self.broken[1] is None:
            raise self._failed(Diverged("fix", base, "base"))
        elif head is not None and self.broken[0] is None:
            raise self._failed(Diverged("regression", head, "head"))

    def _note(self, ghost: Ghost) -> None:
        """Keep the first note of each launch clause the ghost's new notes name (one version's campaign)."""
        new, self.notes_seen = ghost.notes[self.notes_seen:], len(ghost.notes)
        for message in new:
            clause = next((c.name for c in LAUNCH_CLAUSES if c.name in message), message)
            if clause not in {n[0] for n in self.notes}:
                self.notes.append((clause, message, json.loads(json.dumps(self.trace))))

    def _failed(self, error: PropertyBroken | Diverged) -> PropertyBroken | Diverged:
        """``error``, after noting the campaign's first failure (and saying so on the progress output);
        an example whose failure was already found is rejected instead (it tells nothing new)."""
        cls = type(self)
        if (_kind(error), _prop(error)) in cls.known:
            reject()
        if cls.first_failure is None:
            cls.first_failure = (self.trace, error)
            if cls.progress is not None:
                print(f"    counterexample found ({_prop(error)} broken){cls.shrinking}", file=cls.progress,
                      flush=True)
        return error

    @precondition(lambda self: len(self.callers.requests) >= 2)
    @rule(data=st.data())
    def finish(self, data: Any) -> None:
        rid = data.draw(st.sampled_from(sorted(self.callers.requests)), label="request")
        self.callers.finish(rid, preempt=data.draw(st.booleans(), label="preempt"))

    def teardown(self) -> None:
        if hasattr(self, "callers"):
            for k, v in self.callers.scenarios.items():
                self.tally.scenarios[k] = self.tally.scenarios.get(k, 0) + v


def _prop(error: PropertyBroken | Diverged) -> str:
    return (error.finding if isinstance(error, Diverged) else error).prop


def _settings(examples: int, max_steps: int, shrink: bool) -> settings:
    return settings(max_examples=examples, stateful_step_count=max_steps, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck),
                    phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
                    report_multiple_bugs=False, verbosity=Verbosity.quiet)


@dataclass(frozen=True)
class Failure:
    """One distinct failure of a campaign: its kind (``finding``, or ``fix`` /
    ``regression`` of two versions), the property broken, what broke, the
    saved trace's path, and whether Hypothesis shrank it (false for one saved
    as first seen by an interrupt)."""

    kind: str
    prop: str
    message: str
    trace: str
    shrunk: bool


@dataclass(frozen=True)
class Note:
    """A deviation no consumer reads, as a launch clause of
    ``spec/generations/contract.py`` says (``Ghost.notes``): the clause, what
    deviated, and the saved trace of the schedule up to its step."""

    clause: str
    message: str
    trace: str


@dataclass
class CampaignOutcome:
    """A campaign's result: its tally, each distinct failure in the order found,
    each launch clause's first note, and whether the watchdog cut it (``cut``:
    fewer examples than asked were run)."""

    tally: Tally
    seconds: float
    failures: list[Failure] = field(default_factory=list)
    cut: bool = False
    notes: list[Note] = field(default_factory=list)

    @property
    def first(self) -> Failure | None:
        return self.failures[0] if self.failures else None

    @property
    def failure(self) -> str | None:
        """The first failure's message (None: every property held)."""
        return self.first.message if self.first else None

    @property
    def kind(self) -> str | None:
        return self.first.kind if self.first else None

    @property
    def prop(self) -> str | None:
        return self.first.prop if self.first else None

    @property
    def trace(self) -> str | None:
        return self.first.trace if self.first else None


def campaign(versions: tuple[Version, ...], *, budget: float, seed: int, out_dir: Path, tag: str,
             examples: int, device: str = "cpu", dropped: frozenset[str] = frozenset(), max_steps: int = 10,
             examples_per_turn: int = 2, where: Callable[[Conventions], bool] | None = None,
             geometries: tuple[Geometry, ...] = GEOMETRIES, model_blocks: int = MODEL_BLOCKS, shrink: bool = True,
             known: frozenset[str] = frozenset(), progress: TextIO | None = None, cache_mode: str | None = None,
             group_counts: tuple[int, int] = (1, 3)) -> CampaignOutcome:
    """Run ``examples`` examples of the lifecycle machine, in turns of
    ``examples_per_turn`` (``where``, ``geometries``, ``model_blocks``: the
    systems drawn, by default every convention combination and fuzzed geometry
    with requests of up to :data:`MODEL_BLOCKS` blocks; a probe narrows them to
    where its callers can break its assumption; ``cache_mode`` and
    ``group_counts``: one serving configuration's systems, for ``review
    --matrix``), keeping each distinct failure
    (``known``: properties already found elsewhere, not looked for again;
    ``shrink``: let Hypothesis shrink each failure, :data:`SHRINKS` steps at
    most, before it is saved; ``progress``: where to say that a counterexample
    was found). ``budget`` seconds is a watchdog: no turn starts after it
    (:attr:`CampaignOutcome.cut`). An :class:`~replayssm.base.interrupts.Interrupted`
    passes with the campaign so far as its ``partial`` :class:`CampaignOutcome`, a
    failure being shrunk saved as first seen."""
    start, tally = time.perf_counter(), Tally()
    hosts = [launched_by(v.api, v.source) for v in versions]  # each version under its own launch contract
    combos = [c for c in Conventions.all() if (where is None or where(c)) and all(h(c) for h in hosts)]
    if not combos:
        return CampaignOutcome(tally, 0.0)
    found: list[Failure] = []
    notes: list[tuple[str, str, dict]] = []
    turns, turn, cut = -(-examples // examples_per_turn), 0, False
    shrinking = f"; shrinking it (at most {SHRINKS} steps)" if shrink else ""
    machine = None
    try:
        while turn < turns:
            if time.perf_counter() - start >= budget:
                cut = True
                break
            conv = combos[(seed + turn) % len(combos)]
            seen = frozenset((f.kind, f.prop) for f in found) | {("finding", p) for p in known}
            attrs = {"versions": versions, "device": torch.device(device), "conventions": (conv,),
                     "geometries": geometries, "model_blocks": model_blocks, "cache_mode": cache_mode,
                     "group_counts": group_counts, "dropped": dropped, "known": seen,
                     "executed_width": all(launches_executed_width(v.api, v.module) for v in versions),
                     "tally": tally, "last_trace": None, "first_failure": None, "progress": progress,
                     "shrinking": shrinking, "notes": notes}
            machine = hypothesis_seed(example_seed(seed, turn))(type("Review", (LifecycleMachine,), attrs))
            turn += 1
            saved = hypothesis_engine.MAX_SHRINKS, hypothesis_engine.MAX_SHRINKING_SECONDS
            hypothesis_engine.MAX_SHRINKS, hypothesis_engine.MAX_SHRINKING_SECONDS = SHRINKS, SHRINK_WATCHDOG_SECONDS
            try:
                with signal_first():
                    run_state_machine_as_test(machine, settings=_settings(examples_per_turn, max_steps, shrink))
            except (PropertyBroken, Diverged) as e:
                path = _save(machine.last_trace, e, out_dir, f"{tag}-seed{example_seed(seed, turn - 1)}")
                found.append(Failure(_kind(e), _prop(e), str(e), path, shrink))
            except Unsatisfiable:  # every example of the turn broke a property already found: nothing new
                pass
            except Flaky as e:  # it failed, then passed when Hypothesis repeated the run (a target that only
                if machine.first_failure is None:  # sometimes fails): kept as first seen, not a crash of the review;
                    if progress is not None:  # with none seen (data drawn differently on a repeat): the campaign
                        print(f"    the campaign stops: Hypothesis could not repeat a run ({type(e).__name__}); "
                              f"{turn - 1} of {turns} turns ran", file=progress, flush=True)
                    cut = True  # stops there, cut short, and says so
                    break
                trace, error = machine.first_failure
                path = _save(trace, error, out_dir, f"{tag}-seed{example_seed(seed, turn - 1)}-first-seen")
                found.append(Failure(_kind(error), _prop(error), f"{error} (non-deterministic: the same run "
                                     "passed when Hypothesis repeated it; the trace is the run as it first failed)",
                                     path, False))
            finally:
                hypothesis_engine.MAX_SHRINKS, hypothesis_engine.MAX_SHRINKING_SECONDS = saved
    except Interrupted as e:
        e.partial = CampaignOutcome(tally, time.perf_counter() - start, list(found), notes=_saved_notes(notes, out_dir, tag))
        if machine is not None and machine.first_failure is not None:
            trace, error = machine.first_failure
            if (_kind(error), _prop(error)) not in {(f.kind, f.prop) for f in found}:
                name = f"{tag}-seed{example_seed(seed, turn - 1)}-unshrunk"
                e.partial.failures.append(Failure(_kind(error), _prop(error), str(error),
                                                  _save(trace, error, out_dir, name), False))
        raise
    return CampaignOutcome(tally, time.perf_counter() - start, found, cut, _saved_notes(notes, out_dir, tag))


def _saved_notes(notes: list[tuple[str, str, dict]], out_dir: Path, tag: str) -> list[Note]:
    return [Note(clause, message, _save(trace, ValueError(message), out_dir, f"{tag}-note-{clause}"))
            for clause, message, trace in notes]


def _kind(error: PropertyBroken | Diverged) -> str:
    return error.kind if isinstance(error, Diverged) else "finding"


def _save(trace: dict | None, error: Exception, out_dir: Path, name: str) -> str:
    if trace is None:
        raise RuntimeError(f"the review harness failed before recording a trace: {error}") from error
    trace["#meta"]["failure"] = str(error)[:4000]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / fitting_name(f"review-{name.replace('/', '_')}.json")  # a version's file name of 244 bytes
    write_text(str(path), json.dumps(trace))  # whole or not at all
    return str(path)


def describe_rows(step: CallerStep) -> str:
    """A step's scheduled rows in one line: each request's phase, computed count ``N``,
    query length ``q``, accepted tokens and live column."""
    return "; ".join(f"req {r.rid} {'prefill' if r.prefilling else 'decode'} N={r.computed_before} q={r.query_len} "
                     f"accepted={r.accepted} live_col={r.live_col}" for r in step.rows if r is not None)


def describe_schedule(path: str) -> list[str]:
    """A review trace's counterexample as text, without running it: its system
    (geometry, conventions, layers, dropped assumptions) and its caller schedule,
    one line per step."""
    trace = json.loads(Path(path).read_text())
    params, meta = trace["params"], trace["#meta"]
    conventions = ", ".join(f"{k}={v}" for k, v in params["conventions"].items())
    lines = [f"system: geometry {params['geometry']}, layers per group {params['layers_per_group']}",
             f"conventions: {conventions}",
             f"assumptions dropped: {', '.join(meta.get('dropped', [])) or 'none'}"]
    lines += [f"step {n}: {describe_rows(CallerStep.from_json(s)) or 'no request'}" for n, s in enumerate(trace["steps"])]
    return lines


def replay(source: str | dict, versions: list[Version], device: str = "cpu") -> tuple[bool, str]:
    """Run a review trace's steps (the trace, or the file holding it) on each
    version; ``(False, report)`` when a version breaks a property."""
    trace = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    lines: list[str] = []
    broken = [run_trace(trace, v, device, lines) for v in versions]
    return all(b is None for b in broken), "\n".join(lines)


def _system(trace: dict, v: Version, device: str) -> tuple[Harness, Ghost, bool]:
    """A fresh harness of ``v`` and ghost for a review trace's system, and whether its steps copy state."""
    setup = Setup.from_json(trace["params"])
    geo = setup.geometry
    return (Harness(setup, v.module, v.api, torch.device(device)),
            Ghost(setup.layers_per_group, geo.ring_len, geo.window, geo.pad_slot),
            _state_copies(frozenset(trace["#meta"].get("dropped", []))))


def run_trace(trace: dict, v: Version, device: str = "cpu", lines: list[str] | None = None) -> PropertyBroken | None:
    """Run a review trace's steps on ``v``: the first property it breaks (None: every one held),
    each step said on ``lines``."""
    said = lines if lines is not None else []
    harness, ghost, copies = _system(trace, v, device)
    for n, s in enumerate(trace["steps"]):
        step = CallerStep.from_json(s)
        said.append(f"{v.label} step {n}: {describe_rows(step)}")
        try:
            run_step(harness, ghost, step, s["expect"], state_copies=copies)
        except PropertyBroken as f:
            said.append(f"  {f}")
            said.append(f"{v.label}: finding reproduced at step {n}")
            return f
    said.append(f"{v.label}: every lifecycle property holds on every step")
    return None


def broken_store(trace: dict, v: Version, device: str = "cpu") -> dict | None:
    """The kernel store that wrote the cell a saved finding's trace breaks:
    ``trace`` replayed once on ``v``, its last step with the stores recorded
    in the target's process (:mod:`.store_lines`, as the HTML timeline records
    them), and of the tracker cells its failure names (a tracker entry such
    as ``ring_start.g0[48]`` first, then each named slot's two trackers:
    :func:`.timeline.broken_slots`) the first one a store in the version's own
    source wrote, as ``{"cell", "file", "line", "text", "function", "kernel"}``.
    None when that is not known: on a GPU (no interpreter runs: nothing is
    recorded), when the replay does not break the same way at the same step,
    when the failure names no cell, or when no kernel store in the version's
    source wrote one (the scheduler's block copy)."""
    from .timeline import _source_file, broken_slots

    steps, failure = trace.get("steps", []), trace["#meta"].get("failure")
    if device != "cpu" or not steps or not failure:
        return None
    harness, ghost, copies = _system(trace, v, device)
    for n, s in enumerate(steps):
        if n == len(steps) - 1:
            harness.stores = StoreLog(harness.arena, _source_file(v.source))
        try:
            run_step(harness, ghost, CallerStep.from_json(s), s["expect"], state_copies=copies)
        except PropertyBroken as f:
            if n != len(steps) - 1 or str(f)[:4000] != failure:
                return None
            break
    else:
        return None
    cells = [f"{t}.g{g}[{slot}]" for g, slot in broken_slots(failure) for t in ("ring_start", "num_committed")]
    assert harness.stores is not None
    return harness.stores.first_stored(sorted(cells, key=lambda c: c not in failure))  # a named entry first
