"""A kernel report's counterexample search is bounded by a count of Z3's steps, not by the clock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import z3

from replayssm.verify.kernels import report
from replayssm.verify.obligation import fact_vector


def _pigeons(holes: int) -> tuple:
    """``holes + 1`` pigeons in ``holes`` holes: unsatisfiable, and hard for the solver."""
    xs = [z3.Int(f"pigeon{i}") for i in range(holes + 1)]
    return fact_vector([z3.And(x >= 0, x < holes) for x in xs]), z3.Distinct(*xs)


def test_a_search_past_its_step_limit_finds_nothing_whatever_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    facts, distinct = _pigeons(12)
    solvers: list[z3.Solver] = []
    real = report.new_solver
    monkeypatch.setattr(report, "new_solver", lambda *a, **k: solvers.append(real(*a, **k)) or solvers[-1])
    monkeypatch.setattr(report, "SEARCH_RLIMIT", 1_000_000)  # the watchdog (120 s) is far away
    assert report._solve(facts, [], z3.Not(distinct)) is None
    assert solvers[0].reason_unknown() == "canceled", "stopped by the clock, not by the step count"


def test_teeth_a_search_within_its_step_limit_finds_its_model() -> None:
    xs = [z3.Int(f"pigeon{i}") for i in range(3)]
    facts = fact_vector([z3.And(x >= 0, x < 3) for x in xs])
    m = report._solve(facts, [], z3.Not(z3.Distinct(*xs)))  # a model where the three differ
    assert m is not None and {m.eval(x).as_long() for x in xs} == {0, 1, 2}


def _claim_equal_only_if_distinct(holes: int) -> SimpleNamespace:
    """A claim whose program equals the spec exactly when the pigeons sit in distinct holes: there are
    more pigeons than holes, so it always does, which is hard for the solver to show."""
    xs = [z3.Int(f"pigeon{i}") for i in range(holes + 1)]
    bounds = [("in_a_hole", z3.And(x >= 0, x < holes)) for x in xs]
    return SimpleNamespace(claim=SimpleNamespace(assumptions=bounds), parts=[SimpleNamespace(term=z3.BoolVal(False))],
                           optional=[("distinct_holes", z3.Distinct(*xs))])


def test_an_undecided_search_never_says_the_program_equals_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "SEARCH_RLIMIT", 1_000_000)
    text, keep = report.verdict(_claim_equal_only_if_distinct(12))  # type: ignore[arg-type]
    assert "equals the spec under" not in text and "did not decide" in text and keep == [], text


def test_teeth_a_decided_search_names_the_assumption_it_needs() -> None:
    text, keep = report.verdict(_claim_equal_only_if_distinct(3))  # type: ignore[arg-type]
    assert text.startswith("equals the spec under {distinct_holes}"), text
