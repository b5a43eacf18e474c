"""What ``review --base`` says of a change of reliance, and why a probe did not finish: true to what ran.

A regression of reliance (head's counterexample passes on base) said "base does not" rely on the assumption
even where base's own probe is latent on it, through another schedule (seen on B1 -> B2); now the sentence
says what base's own probe found. A probe that ran every example it was asked for and broke its assumption
too rarely said "raise --budget" although the time budget did not stop it; now it names the limit that did.
The campaigns and replays are stand-ins here: what they return is what is said.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from replayssm.review import campaign as campaigns
from replayssm.review import differential
from replayssm.review import probes as pr
from replayssm.review.campaign import CampaignOutcome, Tally
from replayssm.review.verdict_parts import ProbeOutcome

NAME = "prefill_continuation_longer_than_one"


def summary(outcome: str, prop: str = "refinement", trace: str = "t.json") -> dict:
    relied = outcome == "latent"
    return {"assumptions": [NAME], "guaranteed": False, "outcome": outcome, "relied_on": relied,
            "property": prop if relied else None, "trace": trace if relied else None,
            "message": f"{prop}: request 1's state ..." if relied else None}


def changes(monkeypatch: pytest.MonkeyPatch, head: dict, base: dict) -> list[tuple]:
    """``review --base``'s reliance changes when base's probe says ``base`` and head's ``head``, and each
    side passes the other's counterexample."""
    monkeypatch.setattr(differential, "probe_outcomes", lambda *a, **k: iter([ProbeOutcome(NAME, base)]))
    monkeypatch.setattr(campaigns, "replay", lambda trace, versions, device: (True, ""))
    args = argparse.Namespace(budget=60.0, device="cpu")
    return list(differential.reliance(SimpleNamespace(label="B1"), SimpleNamespace(label="B2"), args, Path("x"),
                                      io.StringIO(), [ProbeOutcome(NAME, head)], lambda p: None))


def test_a_regression_where_base_relies_too_through_another_schedule_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    [(kind, name, prop, message, trace)] = changes(monkeypatch, summary("latent", "refinement", "head.json"),
                                                   summary("latent", "no_token_dropped", "base.json"))
    assert (kind, name, prop, trace) == ("regression", NAME, "refinement", "head.json")
    assert "base does not" not in message, message
    assert message.endswith(f"base passes this schedule, but its own probe relies on {NAME} too "
                            "(no_token_dropped, base.json)"), message


@pytest.mark.parametrize("base_outcome, said", [
    ("no counterexample", "with every property held: base does not rely on it"),
    ("not finished", f"base passes this schedule (its own probe of {NAME}: not finished)"),
])
def test_teeth_a_regression_says_base_does_not_rely_only_where_its_probe_held(
        monkeypatch: pytest.MonkeyPatch, base_outcome: str, said: str) -> None:
    [(kind, _, _, message, _)] = changes(monkeypatch, summary("latent"), summary(base_outcome))
    assert kind == "regression" and message.endswith(said), message
    assert ("does not rely" in message) == (base_outcome == "no counterexample")


def test_a_fix_says_what_heads_own_probe_found(monkeypatch: pytest.MonkeyPatch) -> None:
    [(kind, _, _, message, trace)] = changes(monkeypatch, summary("not finished"), summary("latent", trace="b.json"))
    assert (kind, trace) == ("fix", "b.json")
    assert message.startswith(f"base relies on {NAME} (not guaranteed by vLLM): refinement:"), message
    assert message.endswith(f"head passes this schedule (its own probe of {NAME}: not finished)"), message


@pytest.mark.parametrize("cut, limit", [(False, "raise --examples"), (True, "raise --budget")])
def test_a_probe_not_finished_names_the_limit_that_stopped_it(monkeypatch: pytest.MonkeyPatch, cut: bool,
                                                             limit: str) -> None:
    """All its examples run (not cut): the example count stopped it, not the time budget; cut by the
    watchdog: the budget did."""
    monkeypatch.setattr(campaigns, "campaign", lambda *a, **k: CampaignOutcome(Tally(examples=4, broken_steps=1),
                                                                               1.0, cut=cut))
    s, _, _ = pr.run_probe(pr.Probe((NAME,)), SimpleNamespace(label="B1"), budget=20.0, seed=0, out_dir=Path("x"),
                           device="cpu", examples=4)
    assert s["outcome"] == "not finished" and s["why"].endswith(limit), s["why"]
    assert ("--budget" in s["why"]) == cut
