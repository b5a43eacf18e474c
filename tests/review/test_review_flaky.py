"""A review whose Hypothesis run raises ``FlakyFailure`` (issue 39): the run
failed, then passed when Hypothesis repeated it (a kernel whose stray write
only sometimes breaks something). The review keeps the failure as first
seen, called non-deterministic, its trace saved; before, the exception left
the review with a traceback and no report."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis.errors import FlakyFailure

from review_corpus import needs_corpus, version_path


def _version(label: str):
    from replayssm.base.targets import load_target
    from replayssm.review.campaign import Version
    from replayssm.spec.generations import detect

    path = version_path(label)
    module = load_target(str(path))
    return Version(label, str(path), module, detect(module))


def _flaky_run(first_failure: bool):
    """Hypothesis as it ends such a run: the machine noted its first failure, then FlakyFailure."""
    from replayssm.review.lifecycle import PropertyBroken

    def run(machine, settings=None):
        if first_failure:
            machine.first_failure = ({"#meta": {}, "steps": []}, PropertyBroken("refinement", "row 0 read slot 3"))
        raise FlakyFailure("Inconsistent results from replaying a test case", [ValueError("first time only")])
    return run


@needs_corpus
def test_a_flaky_failure_is_kept_as_first_seen(tmp_path: Path, monkeypatch) -> None:
    from replayssm.review import campaign as campaigns

    monkeypatch.setattr(campaigns, "run_state_machine_as_test", _flaky_run(True))
    outcome = campaigns.campaign((_version("A1"),), budget=600, seed=0, out_dir=tmp_path, tag="A1", examples=2,
                                 examples_per_turn=2)
    (failure,) = outcome.failures
    assert failure.prop == "refinement" and not failure.shrunk and "non-deterministic" in failure.message
    assert json.loads(Path(failure.trace).read_text())["#meta"]["failure"].startswith("refinement: row 0")


@needs_corpus
def test_a_flaky_error_with_no_failure_seen_cuts_the_campaign_short(tmp_path: Path, monkeypatch) -> None:
    """With no failure noted (``FlakyStrategyDefinition``: data drawn
    differently on a repeat) there is nothing of the target's to keep: the
    campaign stops there, cut short (fewer examples than asked, which the
    verdict reports), and says so; no finding is made of it."""
    import io

    from replayssm.review import campaign as campaigns

    monkeypatch.setattr(campaigns, "run_state_machine_as_test", _flaky_run(False))
    progress = io.StringIO()
    outcome = campaigns.campaign((_version("A1"),), budget=600, seed=0, out_dir=tmp_path, tag="A1", examples=4,
                                 examples_per_turn=2, progress=progress)
    assert outcome.cut and not outcome.failures and not list(tmp_path.iterdir())
    assert "Hypothesis could not repeat a run (FlakyFailure); 0 of 2 turns ran" in progress.getvalue()
