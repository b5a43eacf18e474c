"""Probes: does a version rely on a caller assumption, and does vLLM guarantee it?

A :class:`Probe` drops one caller assumption, or a set of them that is needed
only jointly (``verify/assumption_sets.py``), and runs a campaign whose
callers break it (:func:`~replayssm.review.lifecycle.review_policy`). A
counterexample there counts as reliance only if the same schedule, up to the
same failing step, with the assumption restored on the rows that broke it
passes (:func:`restored`, :func:`confirm`, ``review/attribution.py``); when
the restored trace still fails, it is a finding of the version, found by the
probe. What reliance means depends on the assumption's provenance
(``spec/assumptions.py``): relying on an assumption vLLM does not guarantee
is ``latent`` (a bug vLLM's scheduler can trigger), relying on one it
guarantees is information only.

:data:`PROBE_OUTCOMES` are a probe's possible results; :func:`run_probe`
runs one within its share of the budget (:func:`share`), and a probe that
broke its assumption in fewer than :data:`MIN_BROKEN_STEPS` steps in that
time is ``not finished``, never a pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replayssm.fuzz.caller_shapes import GEOMETRIES
from replayssm.spec import assumptions as env
from replayssm.spec.assumption_record import Reach
from replayssm.spec.geometry import Conventions, Geometry

from . import campaign as campaigns  # by module: a test's stand-in campaign reaches the probes too
from .attribution import restore_rows
from .campaign import MODEL_BLOCKS, CampaignOutcome, Failure, Version

MIN_BROKEN_STEPS = 3
"""A probe whose callers broke its assumption in fewer steps than this, and found
no counterexample, is ``not finished``: it had too little time to say anything."""

WEIGHT_NOT_GUARANTEED = 3
"""A probe of an assumption vLLM does not guarantee gets this many shares of the
probes' budget, one of a guaranteed assumption one (only the former can make a
verdict ``latent``)."""

PROBE_OUTCOMES = {
    "latent": "relied on, and vLLM does not guarantee it",
    "relies on a guarantee": "relied on, and vLLM guarantees it (information only)",
    "finding": "a counterexample that stays with the assumption restored",
    "no counterexample": "broke the assumption and every property held",
    "not finished": "its share of the budget ran out before it broke the assumption often enough",
    "not probed": "the version breaks a property with every assumption kept",
    "interrupted": "the review stopped during the probe",
}
"""A probe's possible results, as the JSON's ``outcome`` names them."""


@dataclass(frozen=True)
class Probe:
    """The assumptions one probe drops (one, or a set needed only jointly)."""

    assumptions: tuple[str, ...]

    @property
    def name(self) -> str:
        return "+".join(self.assumptions)

    @property
    def reach(self) -> Reach:
        """Where the callers can break the set (its record's, or its set's, ``reach``)."""
        if len(self.assumptions) == 1:
            return env.named(self.assumptions[0]).reach
        return next(s.reach for s in env.SETS if frozenset(s.names) == frozenset(self.assumptions))

    @property
    def model_blocks(self) -> int:
        """The longest request of its campaigns, in blocks."""
        return self.reach.model_blocks or MODEL_BLOCKS

    @property
    def guaranteed(self) -> bool:
        """vLLM can break the set only by breaking every member: it is guaranteed when one member is."""
        return any(guaranteed(a) for a in self.assumptions)


def guaranteed(name: str) -> bool:
    """Whether vLLM guarantees caller assumption ``name`` (its provenance in
    ``spec/assumptions.py``; a contradicted one is not)."""
    return env.named(name).provenance.is_guaranteed


def probes() -> list[Probe]:
    """A probe per droppable assumption (those the caller model breaks, then those
    one row breaks, as ``fuzz --drop`` does) and per set needed only jointly,
    all read from the records (``spec/assumptions.py``)."""
    singles = [*env.caller_model_drops(), *env.per_request_drops()]
    return [Probe((a.name,)) for a in singles] + [Probe(s.names) for s in env.SETS]


def share(probe: Probe, left: list[Probe], seconds: float) -> float:
    """``probe``'s share of the ``seconds`` left to the probes ``left`` (itself
    first), by :data:`WEIGHT_NOT_GUARANTEED`: a probe that ends early (a
    counterexample) leaves its time to the later ones, one that overruns takes it."""
    def weight(p: Probe) -> int:
        return 1 if p.guaranteed else WEIGHT_NOT_GUARANTEED

    return max(0.0, seconds) * weight(probe) / sum(weight(p) for p in left)


def _tracker_copies(step: dict, pad: int) -> list:
    copies = []
    for b, row in enumerate(step["rows"]):
        if row is None or row["source_col"] < 0 or row["source_col"] == row["live_col"]:
            continue
        for g, table in enumerate(step["table"]):
            s, d = table[b][row["source_col"]], table[b][row["live_col"]]
            if pad not in (s, d) and s != d:
                copies.append([g, s, d])
    return copies


def restored(trace: dict, probe: Probe) -> dict:
    """``trace`` rewritten so that its callers keep ``probe``'s assumptions on the rows that broke
    them, up to the same failing step: block copies that carry the trackers, state copies on live
    moves, or (any other) each breaking row restored as :func:`.attribution.restore_rows` says."""
    dropped = frozenset(probe.assumptions)
    how = next((how for names, how in env.caller_model_breaks() if names == dropped), None)
    if how is None or how.restored_by != "copies":
        return restore_rows(trace, dropped)
    out = json.loads(json.dumps(trace))
    out["#meta"]["dropped"] = [d for d in out["#meta"].get("dropped", []) if d not in dropped]
    if ("tracker_copies", "every") in how.kept:
        pad = out["params"]["geometry"]["pad_slot"]
        for step in out["steps"]:
            step["copies"] = _tracker_copies(step, pad)
    for step in out["steps"]:  # a live move's state copies follow "#meta.dropped"
        step["breaks"] = [b for b in step.get("breaks", []) if b not in dropped]
    return out


def confirm(trace_path: str, probe: Probe, version: Version, device: str) -> tuple[bool, Failure | None]:
    """``(relied_on, independent)``: whether the probe's counterexample goes away when the same
    schedule, up to the same failing step, keeps the assumption on the rows that broke it
    (:func:`restored`); if it does not, what the restored schedule breaks, with its trace: a
    failure inside the contract, a finding of its own."""
    kept = restored(json.loads(Path(trace_path).read_text()), probe)
    broken = campaigns.run_trace(kept, version, device)
    if broken is not None:
        kept["#meta"]["failure"] = str(broken)[:4000]
    path = Path(trace_path).with_name(Path(trace_path).stem + "-restored.json")
    path.write_text(json.dumps(kept))
    return broken is None, None if broken is None else Failure("finding", broken.prop, str(broken), str(path), False)


def outcome_of(probe: Probe, result: CampaignOutcome, relied: bool, independent: Failure | None) -> str:
    """The :data:`PROBE_OUTCOMES` name of a probe campaign's ``result``."""
    if independent:
        return "finding"
    if relied:
        return "relies on a guarantee" if probe.guaranteed else "latent"
    return "no counterexample" if result.tally.broken_steps >= MIN_BROKEN_STEPS else "not finished"


def run_probe(probe: Probe, v: Version, *, budget: float, seed: int, out_dir: Path, device: str,
              examples: int, known: frozenset[str] = frozenset(),
              within: Callable[[Conventions], bool] | None = None, geometries: tuple[Geometry, ...] = GEOMETRIES,
              cache_mode: str | None = None, group_counts: tuple[int, int] = (1, 3), tag: str = ""
              ) -> tuple[dict, CampaignOutcome, Failure | None]:
    """One probe of ``v`` within ``budget`` seconds: ``(summary, campaign outcome,
    independent trace)``, the summary as the JSON's ``assumptions`` entry holds it;
    ``known``: the properties the version breaks with every assumption kept, not looked for again;
    ``within``, ``geometries``, ``cache_mode``, ``group_counts``: one serving configuration's systems
    (``review --matrix``; the probe's reach narrows them further), ``tag`` its name in the traces'.
    An :class:`~replayssm.base.interrupts.Interrupted` passes with the campaign so far."""
    reach = probe.reach
    result = campaigns.campaign((v,), budget=budget, seed=seed, out_dir=out_dir,
                                tag=f"{v.label}{tag}-without-{probe.name}", device=device,
                                dropped=frozenset(probe.assumptions),
                                where=reach.conventions if within is None else
                                (lambda c: reach.conventions(c) and within(c)),
                                geometries=tuple(g for g in geometries if reach.geometry(g)),
                                model_blocks=probe.model_blocks, shrink=False, examples=examples,
                                known=known, cache_mode=cache_mode, group_counts=group_counts)
    relied, independent = (False, None) if result.trace is None else confirm(result.trace, probe, v, device)
    outcome = outcome_of(probe, result, relied, independent)
    summary = {"assumptions": list(probe.assumptions), "guaranteed": probe.guaranteed, "outcome": outcome,
               "relied_on": relied if outcome != "not finished" else None,
               "property": result.prop if relied else None, "trace": result.trace if relied else None,
               "message": result.failure if relied else None, "independent_finding": independent.trace if independent else None,
               "broken_steps": result.tally.broken_steps, "seconds": round(result.seconds, 2),
               "budget_seconds": round(budget, 2)}
    if outcome == "not finished":
        summary["why"] = not_finished_why(result, budget)
    return summary, result, independent


def not_finished_why(result: CampaignOutcome, budget: float, examples_option: str = "--examples") -> str:
    """Why a probe campaign is ``not finished``, naming the limit that stopped it: the watchdog, its share
    of ``--budget`` (``budget`` seconds), when it cut the campaign (``result.cut``); else the example
    count, set by ``examples_option``, every example of which ran."""
    broke = (f"broke it in {result.tally.broken_steps} step(s) (fewer than {MIN_BROKEN_STEPS}) in "
             f"{result.tally.examples} examples")
    if result.cut:
        return f"{broke}, cut by the watchdog: its share of --budget, {budget:.1f} s, ran out: raise --budget"
    return f"{broke}, all it was asked for (within its share of {budget:.1f} s): raise {examples_option}"


def not_probed(probe: Probe, why: str, outcome: str = "not probed") -> dict:
    """A probe's summary when it did not run."""
    return {"assumptions": list(probe.assumptions), "guaranteed": probe.guaranteed, "outcome": outcome,
            "relied_on": None, "why": why}


@dataclass(frozen=True)
class RelianceChange:
    """A change of reliance on an assumption vLLM does not guarantee, between base and head: ``kind``
    ``regression`` (head relies) or ``fix`` (base relies), the probe's ``name``, the relying side's probe
    summary (``relying``; its trace passes on the other side) and the other side's (``other``; None when it
    was not probed)."""

    kind: str
    name: str
    relying: dict
    other: dict | None

    @property
    def message(self) -> str:
        """The change in one sentence, true to both sides' probes: the relying side's counterexample, that
        the other side passes it, and what the other side's own probe found (it may rely on the
        assumption too, through another schedule)."""
        who, other = ("head", "base") if self.kind == "regression" else ("base", "head")
        said = f"{who} relies on {self.name} (not guaranteed by vLLM): {self.relying['message']}; " \
               f"{other} passes this schedule"
        theirs = self.other or {}
        outcome = theirs.get("outcome")
        if outcome == "latent":
            return f"{said}, but its own probe relies on {self.name} too ({theirs['property']}, {theirs['trace']})"
        if outcome == "no counterexample":
            return f"{said}, and its own probe broke {self.name} with every property held: {other} does not rely on it"
        return f"{said} (its own probe of {self.name}: {outcome or 'not run'})"


def reliance_changes(base: Version, head: Version, base_probes: dict[str, dict], head_probes: dict[str, dict],
                     device: str) -> list[RelianceChange]:
    """With a base: each assumption vLLM does not guarantee that head starts relying on (a
    ``regression``: head's counterexample, replayed on base, passes) or stops relying on (a ``fix``:
    base's, replayed on head, passes)."""
    out = []
    for name, h in head_probes.items():
        if h.get("outcome") == "latent" and campaigns.replay(h["trace"], [base], device)[0]:
            out.append(RelianceChange("regression", name, h, base_probes.get(name)))
    for name, b in base_probes.items():
        if b.get("outcome") == "latent" and head_probes.get(name, {}).get("outcome") != "latent" \
                and campaigns.replay(b["trace"], [head], device)[0]:
            out.append(RelianceChange("fix", name, b, head_probes.get(name)))
    return out
