"""A review's budget is a count of examples, and a review keeps going after its
first finding: the same seed gives the same verdict, with every distinct
property broken, on a slow and a fast machine (issue 36 item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from review_corpus import needs_corpus, version_path

from test_ghost import _a1_with_a_stray_write


def _stray_tracker(kwargs: dict) -> None:
    kwargs["tracker_committed"][1] = 3  # slot 1, named by no scheduled request: a frame break


@needs_corpus
def test_a_campaign_keeps_going_after_its_first_failure(tmp_path: Path) -> None:
    """A1 with a stray tracker write breaks ``frame`` on most examples and, in
    mode none with live columns, ``memory`` (A1's own read past the row): both
    are found, each once, in one campaign; a property given as ``known`` is not
    looked for again (the probes' case)."""
    from replayssm.review.campaign import campaign

    version = _a1_with_a_stray_write(_stray_tracker)
    outcome = campaign((version,), budget=600, seed=0, out_dir=tmp_path, tag="two", examples=24, shrink=False)
    assert [f.prop for f in outcome.failures] == ["frame", "memory"], [f.message for f in outcome.failures]
    assert all(Path(f.trace).is_file() for f in outcome.failures)
    rest = campaign((version,), budget=600, seed=0, out_dir=tmp_path, tag="known", examples=24, shrink=False,
                    known=frozenset({"frame"}))
    assert [f.prop for f in rest.failures] == ["memory"]


def test_the_watchdog_cuts_a_campaign_and_says_so(tmp_path: Path) -> None:
    """``budget`` is a watchdog: past it no turn starts, and the outcome says the campaign was cut."""
    from replayssm.review.campaign import campaign

    outcome = campaign((), budget=0.0, seed=0, out_dir=tmp_path, tag="cut", examples=4)
    assert outcome.cut and outcome.tally.examples == 0 and not outcome.failures


def _verdicts(path: Path, traces: Path) -> list[dict]:
    """The report's verdicts without what the clock decides (``*seconds``) and with the traces folder named alike."""
    from replayssm.review.verdicts import timeless

    return timeless(json.loads(path.read_text())["verdicts"], str(traces))


def test_the_comparison_sees_a_changed_verdict(tmp_path: Path) -> None:
    """Teeth of the comparison below: a different count, trace or status is a difference; a different time is not."""
    doc = {"verdicts": [{"status": "finding", "campaign": {"examples": 24, "seconds": 1.0},
                         "findings": [{"trace": f"{tmp_path}/t/review-A1-seed5.json"}]}]}
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    same = _verdicts(a, tmp_path / "t")
    for change, equal in ((("campaign", "seconds", 9.0), True), (("campaign", "examples", 25), False),
                          (("status", None, "pass"), False)):
        key, sub, value = change
        changed = json.loads(json.dumps(doc))
        if sub:
            changed["verdicts"][0][key][sub] = value
        else:
            changed["verdicts"][0][key] = value
        b = tmp_path / "b.json"
        b.write_text(json.dumps(changed))
        assert (_verdicts(b, tmp_path / "t") == same) == equal, change


TWO_PROBES = """
import sys
from replayssm.review import probes as pr
from replayssm.spec import assumptions as env
pr.probes = lambda: [pr.Probe((env.PREFILL_CONTINUATION_LONGER_THAN_ONE.name,)),
                     pr.Probe((env.BLOCK_COPY_MOVES_TRACKERS.name,))]
from replayssm.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``replayssm-verify`` whose reviews run two probes: one assumption vLLM does not guarantee, one it does."""


@needs_corpus
def test_two_reviews_with_the_same_seed_give_the_same_verdict(tmp_path: Path) -> None:
    """A1 (a finding, shrunk by a count of steps, then its probes: a review keeps
    going after its first finding) reviewed twice, each in its own process as
    the CLI runs, with the default budget's kind (a count of examples, here 12):
    the same JSON verdict but for the times. The two run at once (on a
    machine of two cores, each on its own), sharing the test's proof cache:
    which of them finds a kernel proof kept by the other is the clock's, and
    the verdict must not depend on it."""
    procs = []
    for n in (1, 2):
        report, traces, output = tmp_path / f"r{n}.json", tmp_path / f"traces{n}", tmp_path / f"output{n}.txt"
        with output.open("w") as out:  # a file, not a pipe: neither run waits for its output to be read
            procs.append((subprocess.Popen([sys.executable, "-c", TWO_PROBES, "review", str(version_path("A1")),
                                            "--examples", "12", "--seed", "0", "--traces", str(traces), "--json",
                                            str(report)], stdout=out, stderr=subprocess.STDOUT),
                          report, traces, output))
    runs = []
    for proc, report, traces, output in procs:
        assert proc.wait() == 1, output.read_text()
        runs.append(_verdicts(report, traces))
    assert runs[0] == runs[1]
    (verdict,) = runs[0]
    assert verdict["status"] == "finding" and [f["property"] for f in verdict["findings"]] == ["memory"]
    assert verdict["findings"][0]["shrunk"] and len(verdict["assumptions"]) == 2
    assert {r["outcome"] for r in verdict["assumptions"].values()} - {"not probed"}, "its probes ran after the finding"
