"""Proof obligations: declared as data, discharged by Z3, reported one per line.

An :class:`Obligation` names a (transition x property) pair. Its ``build``
returns :class:`Claim` cases (one per convention combination, say); each case
holds when its named assumptions imply its goal. Every obligation also carries
a non-vacuity check: the assumptions together with the case's ``cover``
(the situation the property is about, e.g. "a plan is active") are
satisfiable, and the result keeps that witness.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3

from .memory import SymbolicMemory
from .terms import lift

TIMEOUT_MS = 20_000


@dataclass
class Claim:
    """One case of an obligation: ``assumptions => goal``.

    ``goal`` is a term or a list of named parts (a name may be a callable,
    evaluated only for a counterexample); a counterexample names the parts it
    violates."""

    goal: Any
    assumptions: list[tuple[str, Any]]
    cover: Any = True
    case: str = ""
    show: dict[str, Any] = field(default_factory=dict)
    memories: list[SymbolicMemory] = field(default_factory=list)
    preprocess: bool = False
    """Check the whole goal in one query after Z3's equation solving and
    simplification (:data:`PREPROCESS`); for large claims whose assumptions
    pin many variables (the system step shapes). Otherwise each goal part is
    checked on its own, incrementally."""


@dataclass(frozen=True)
class Obligation:
    """A named property of one transition."""

    name: str
    transition: str
    statement: str
    build: Callable[[], Iterable[Claim]]


@dataclass
class Result:
    """The outcome of one obligation."""

    name: str
    status: str
    seconds: float
    assumptions: list[str]
    cases: int = 0
    counterexample: dict | None = None
    witness: dict | None = None
    detail: str = ""

    def as_json(self) -> dict:
        out = {
            "name": self.name,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "assumptions": self.assumptions,
            "cases": self.cases,
        }
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        if self.detail:
            out["detail"] = self.detail
        return out


REGISTRY: dict[str, Obligation] = {}


def obligation(name: str, transition: str, statement: str) -> Callable[[Callable[[], Iterable[Claim]]], Callable[[], Iterable[Claim]]]:
    """Register ``build`` as the obligation ``name``."""

    def register(build: Callable[[], Iterable[Claim]]) -> Callable[[], Iterable[Claim]]:
        if name in REGISTRY:
            raise ValueError(f"obligation {name!r} is declared twice ({REGISTRY[name].build.__qualname__} and {build.__qualname__})")
        REGISTRY[name] = Obligation(name, transition, statement, build)
        return build

    return register


PREPROCESS = z3.Then("simplify", "propagate-values", "solve-eqs", "elim-uncnstr", "simplify", "smt")
"""Substitute the equalities away (shape pins, cut definitions), drop
unconstrained terms, then search."""


def _solver(facts: Iterable[Any], preprocess: bool = False) -> z3.Solver:
    s = PREPROCESS.solver() if preprocess else z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    for f in facts:
        s.add(lift(f))
    return s


def _value(model: z3.ModelRef, term: Any) -> Any:
    v = model.eval(lift(term), model_completion=True)
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    return str(v)


def _goal_term(goal: Any) -> Any:
    if isinstance(goal, list):
        return z3.And(*[lift(t) for _, t in goal]) if goal else z3.BoolVal(True)
    return lift(goal)


def _scenario(claim: Claim, model: z3.ModelRef) -> dict:
    values = {k: _value(model, t) for k, t in claim.show.items()}
    violated = [n() if callable(n) else n for n, t in claim.goal if _value(model, t) is not True] if isinstance(claim.goal, list) else []
    accesses = []
    for mem in claim.memories:
        for a in mem.accesses:
            if a.loop_vars:
                continue
            if _value(model, a.guard) is not True:
                continue
            accesses.append(
                {
                    "program": a.program,
                    "kind": a.kind,
                    "buffer": a.buffer,
                    "index": [_value(model, i) for i in a.index],
                    "value": _value(model, a.value),
                }
            )
    return {"case": claim.case, "violated": violated, "values": values, "accesses": accesses}


def render_scenario(scenario: dict) -> str:
    """A counterexample as text a kernel engineer can read."""
    lines = [f"  case: {scenario['case']}"] if scenario.get("case") else []
    lines += [f"  violated: {v}" for v in scenario.get("violated", [])]
    for k, v in scenario["values"].items():
        lines.append(f"  {k} = {v}")
    for a in scenario["accesses"]:
        idx = ", ".join(str(i) for i in a["index"])
        arrow = "->" if a["kind"] == "read" else "<-"
        lines.append(f"  [{a['program']}] {a['buffer']}[{idx}] {arrow} {a['value']}")
    return "\n".join(lines)


def prove(ob: Obligation) -> Result:
    """Discharge every case of ``ob``; stop at the first failing case."""
    start = time.perf_counter()
    names: list[str] = []
    covered = False
    cases = 0
    for claim in ob.build():
        cases += 1
        for n, _ in claim.assumptions:
            if n not in names:
                names.append(n)
        facts = [f for _, f in claim.assumptions]
        s = _solver(facts, claim.preprocess)
        parts = claim.goal if isinstance(claim.goal, list) else [("goal", claim.goal)]
        if claim.preprocess:
            parts = [("goal", _goal_term(claim.goal))]
        for _, part in parts:
            s.push()
            s.add(z3.Not(lift(part)))
            verdict = s.check()
            if verdict == z3.sat:
                return Result(ob.name, "failed", time.perf_counter() - start, names, cases,
                              counterexample=_scenario(claim, s.model()))
            if verdict == z3.unknown:
                return Result(ob.name, "unknown", time.perf_counter() - start, names, cases,
                              detail=f"{claim.case}: {s.reason_unknown()}")
            s.pop()
        if not covered:
            w = _solver(facts + [claim.cover], claim.preprocess)
            if w.check() == z3.sat:
                covered = True
    if not covered:
        return Result(ob.name, "failed", time.perf_counter() - start, names, cases,
                      detail="vacuous: no case's assumptions admit the covered situation")
    return Result(ob.name, "proved", time.perf_counter() - start, names, cases)


def save_counterexample(result: Result, folder: Path) -> Path:
    """Write a failed result's scenario as JSON; returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.name}.json"
    path.write_text(json.dumps({"obligation": result.name, "assumptions": result.assumptions,
                                **(result.counterexample or {})}, indent=2))
    return path
