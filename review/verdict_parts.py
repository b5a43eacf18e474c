"""The typed parts a review verdict is built from, each made by one function.

A version's review has five kinds of parts (:class:`ReviewParts` holds them
as their producers return them): the lifecycle campaign's result
(:func:`lifecycle_result`), the kernel proofs' document and the findings read
from it (:func:`kernel_findings`), the probe outcomes
(:class:`ProbeOutcome`, by :mod:`.probe_runs`), the differences with a base (:class:`Difference`)
and the notes (a coverage shortfall; the parts not finished).
:func:`replayssm.review.verdicts.build_verdict` turns them into one
:class:`~replayssm.review.verdicts.Verdict`, once.

A property broken on a caller schedule is a :class:`Counterexample` wherever
it goes (the lifecycle campaign, a probe, the import of a version that
misbehaved); a failed kernel obligation whose counterexample replays is a
:class:`KernelFinding`; a reliance on what vLLM does not guarantee is a
:class:`LatentReliance` of its kind (a probe's or a kernel proof's). Each
record writes itself as the ``--json`` report holds it (``as_json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from replayssm.base.reports import replay_command

from .impact import Impact, of_kernel_launch

if TYPE_CHECKING:
    from .campaign import CampaignOutcome, Version

MIN_REQUEST_STEPS = 25
"""A campaign that judged fewer request-steps than this is a coverage shortfall."""

REQUIRED_SCENARIOS = ("checkpoint",)
"""Scenario classes a version's campaign must reach to count as covered."""


@dataclass(frozen=True)
class Counterexample:
    """A lifecycle property broken on a caller schedule: what broke, the saved
    trace (None for a fault at import: the message is the evidence), whether
    Hypothesis shrank it, and the command that replays it."""

    property: str
    message: str
    trace: str | None
    shrunk: bool
    replay: str | None
    impact: Impact | None = None
    """Whose state goes wrong and what the next forward pass computes (:mod:`.impact`)."""
    written_by: dict | None = None
    """The kernel store that wrote the cell it breaks, recorded on a replay
    (:meth:`ReviewParts.locate_stores`); None when unknown. :func:`.locations.locate` reports it there."""

    @classmethod
    def of(cls, prop: str, message: str, trace: str, source: str, shrunk: bool) -> Counterexample:
        """A counterexample of the version at ``source``, replayed by ``replayssm-verify replay``."""
        return cls(prop, message, trace, shrunk, replay_command(trace, source))

    def as_json(self) -> dict:
        return {"property": self.property, "message": self.message, "trace": self.trace, "shrunk": self.shrunk,
                "replay": self.replay, "impact": self.impact.as_json() if self.impact else None,
                "written_by": self.written_by}


@dataclass(frozen=True)
class ContractNote:
    """A deviation no consumer reads (a launch clause says so): a ``note``,
    never a finding unless ``--strict``; the trace shows the schedule up to it."""

    clause: str
    message: str
    trace: str
    replay: str

    def as_json(self) -> dict:
        return {"clause": self.clause, "message": self.message, "trace": self.trace, "replay": self.replay}


@dataclass(frozen=True)
class LifecycleResult:
    """The lifecycle campaign's part: its tally (the JSON's ``campaign``), each
    property held or broken (``held so far`` when it was cut short), its
    counterexamples (one per property broken), its coverage shortfall and
    its notes (one per launch clause)."""

    campaign: dict
    properties: dict[str, str]
    counterexamples: tuple[Counterexample, ...]
    coverage_shortfall: tuple[str, ...]
    seconds: float
    notes: tuple[ContractNote, ...] = ()


def lifecycle_result(outcome: CampaignOutcome, source: str, interrupted: bool) -> LifecycleResult:
    """The lifecycle part of the campaign ``outcome`` on the version at
    ``source`` (``interrupted``: the campaign so far; no coverage is judged)."""
    from .lifecycle import PROPERTIES

    tally = outcome.tally
    campaign = {"examples": tally.examples, "steps": tally.steps, "request_steps": tally.request_steps,
                "seconds": round(outcome.seconds, 2), "scenarios": tally.scenarios}
    properties = {p: "held so far" if interrupted else "held" for p in PROPERTIES}
    found = tuple(Counterexample.of(f.prop, f.message, f.trace, source, f.shrunk) for f in outcome.failures)
    properties.update({c.property: "broken" for c in found})
    shortfall = []
    if outcome.cut:
        shortfall.append(f"the watchdog (--budget) cut the campaign after {tally.examples} examples")
    if not found and not interrupted:
        if tally.request_steps < MIN_REQUEST_STEPS:
            shortfall.append(f"{tally.request_steps} request-steps < {MIN_REQUEST_STEPS}")
        shortfall += [f"never reached: {s}" for s in REQUIRED_SCENARIOS if not tally.scenarios.get(s)]
    notes = tuple(ContractNote(n.clause, n.message, n.trace, replay_command(n.trace, source)) for n in outcome.notes)
    return LifecycleResult(campaign, properties, found, tuple(shortfall), outcome.seconds, notes)


@dataclass(frozen=True)
class KernelFinding:
    """A kernel obligation that failed with a counterexample the real kernel
    shows on replay: proved, inside the whole caller contract."""

    property: str
    case: str
    violated: str
    replayed: str
    message: str
    trace: str
    replay: str
    explanation: str
    impact: Impact | None = None
    """Whose state goes wrong and what the next forward pass computes (:func:`.impact.of_kernel_launch`)."""

    def as_json(self) -> dict:
        return {"property": self.property, "evidence": "proved", "case": self.case, "violated": self.violated,
                "replayed": self.replayed, "message": self.message, "trace": self.trace, "replay": self.replay,
                "explanation": self.explanation, "impact": self.impact.as_json() if self.impact else None}


def kernel_findings(kernel_proofs: dict | None) -> tuple[KernelFinding, ...]:
    """The findings in a kernel-proofs document (:mod:`.kernel_proofs`): each
    failed obligation whose counterexample replays as a finding."""
    from .kernel_proofs import REPLAYED_FINDINGS

    out = []
    for r in (kernel_proofs or {}).get("results", ()):
        if r["status"] != "failed" or r.get("replayed") not in REPLAYED_FINDINGS:
            continue
        shown = (f"the counterexample {r['replayed']} on the real kernel" if "fault" not in r else
                 f"replaying the counterexample, the version's kernel is a {r['fault']['kind']}: "
                 f"{r['fault']['report']}")
        out.append(KernelFinding(r["obligation"], r["case"], r["violated"], r["replayed"],
                                 f"{r['obligation']} failed ({r['case']}: {r['violated']}); {shown}",
                                 r["trace"], r["replay"], r.get("explanation", ""),
                                 _kernel_impact(r["trace"], r.get("cell"), r.get("null_block_only", False))))
    return tuple(out)


def _kernel_impact(path: str, cell: list | None, null_block_only: bool) -> Impact | None:
    """A kernel finding's impact, from its saved launch and the cell its violated part names
    (``null_block_only``: proved to store outside its frame only to the null block,
    :func:`.kernel_proofs.beside_the_null_block`; None: the launch cannot be read)."""
    try:
        trace = json.loads(Path(path).read_text())
        return of_kernel_launch(trace, trace["#meta"]["property"], cell, null_block_only)
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe's outcome (:data:`replayssm.review.probes.PROBE_OUTCOMES`):
    ``summary`` is its entry in the JSON's ``assumptions`` as the probe wrote
    it; the fields are what the verdict reads of it; ``independent`` is the
    finding it found that stays with the assumption restored."""

    name: str
    summary: dict
    independent: Counterexample | None = None

    @property
    def outcome(self) -> str:
        return str(self.summary["outcome"])

    @property
    def guaranteed(self) -> bool:
        return bool(self.summary["guaranteed"])

    @property
    def message(self) -> str | None:
        return self.summary.get("message")

    @property
    def trace(self) -> str | None:
        return self.summary.get("trace")

    @property
    def why(self) -> str | None:
        return self.summary.get("why")

    @property
    def seconds(self) -> float:
        return float(self.summary.get("seconds", 0.0))

    @property  # last: the name hides the builtin in the rest of the class body
    def property(self) -> str | None:
        return self.summary.get("property")


PROBE, KERNEL_PROOF = "probe", "kernel proof"
"""Where a latent reliance comes from (:attr:`LatentReliance.kind`): a probe whose counterexample needs an
assumption vLLM does not guarantee, or a kernel obligation proved only under a launch clause it does not."""


@dataclass(frozen=True)
class LatentReliance:
    """A reliance on what vLLM does not guarantee (the verdict's ``latent``), of either ``kind``
    (:data:`PROBE`: the probe's counterexample, its trace and replay; :data:`KERNEL_PROOF`: the clause an
    obligation is proved only under, with no trace: the proof without it names it). It writes itself as
    the ``--json`` report's ``latent`` entry holds it (the kind is not written there)."""

    kind: str
    assumption: str
    property: str | None
    message: str | None
    trace: str | None = None
    replay: str | None = None
    impact: dict | None = None

    def as_json(self) -> dict:
        return {"assumption": self.assumption, "property": self.property, "message": self.message,
                "trace": self.trace, "replay": self.replay, "impact": self.impact}


@dataclass(frozen=True)
class Difference:
    """A behavioural difference between base and head: ``kind`` (``fix``,
    ``regression``, ``neutral``, or a kernel role's class: :mod:`.kernel_diff`),
    ``evidence`` (``proved`` by the kernel diff, ``sampled`` by a campaign),
    with the trace that shows it and its replay; ``assumption`` for a change
    of reliance; ``request_steps`` for the neutral count; ``kernel_diff`` the
    kernel diff's record of the role."""

    kind: str
    evidence: str
    message: str
    property: str | None = None
    assumption: str | None = None
    trace: str | None = None
    replay: str | None = None
    request_steps: int | None = None
    kernel_diff: dict | None = None

    @classmethod
    def from_kernel_diff(cls, entry: dict) -> Difference:
        """A kernel role compared by proof (:func:`.kernel_diff.kernel_differences`' entry)."""
        return cls(entry["kind"], entry["evidence"], entry["message"], entry["property"], trace=entry.get("trace"),
                   replay=entry.get("replay"), kernel_diff=entry["kernel_diff"])

    def as_json(self) -> dict:
        if self.kind == "neutral":
            return {"kind": self.kind, "evidence": self.evidence, "request_steps": self.request_steps,
                    "message": self.message}
        if self.kernel_diff is not None:
            shown = {"trace": self.trace, "replay": self.replay} if self.trace is not None else {}
            return {"kind": self.kind, "evidence": self.evidence, "property": self.property, "message": self.message,
                    "kernel_diff": self.kernel_diff, **shown}
        return {"kind": self.kind, "evidence": self.evidence, "property": self.property,
                "assumption": self.assumption, "message": self.message, "trace": self.trace, "replay": self.replay}


@dataclass
class ReviewParts:
    """One version's parts as their producers return them, each set once by
    ``review_version`` (probes and differences one by one as each ends, so
    that an interrupt leaves what was reviewed so far); ``done``: the parts
    finished; ``timings``: the JSON ``campaign``'s ``differential_seconds`` and
    ``total_seconds``."""

    lifecycle: LifecycleResult | None = None
    kernel_proofs: dict | None = None
    probes: list[ProbeOutcome] = field(default_factory=list)
    base_probes: list[ProbeOutcome] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    fault: Counterexample | None = None
    """A version that misbehaved at import: its only part."""
    done: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def locate_stores(self, v: Version, device: str) -> None:
        """Each lifecycle finding the verdict reports (the campaign's, then the probes' that stay with
        the assumption restored: the first of each property whose impact is read, as
        :func:`.verdicts.build_verdict` picks them) with the kernel store that wrote the cell it
        breaks (:attr:`Counterexample.written_by`), its saved trace replayed once on ``v``
        (:func:`.campaign.broken_store`); the others are left as they are."""
        from .campaign import broken_store

        seen = {self.fault.property} if self.fault is not None else set()

        def located(c: Counterexample) -> Counterexample:
            if c.impact is not None and not c.impact.read:  # a note (nobody reads what it breaks)
                return c
            first = c.property not in seen
            seen.add(c.property)
            if not first or c.trace is None or c.written_by is not None:
                return c
            return replace(c, written_by=broken_store(json.loads(Path(c.trace).read_text()), v, device))

        if self.lifecycle is not None:
            self.lifecycle = replace(self.lifecycle, counterexamples=tuple(
                located(c) for c in self.lifecycle.counterexamples))
        self.probes = [replace(p, independent=located(p.independent)) if p.independent is not None else p
                       for p in self.probes]
