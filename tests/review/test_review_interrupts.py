"""``review`` under SIGINT and SIGTERM, and reports it cannot write: the
interrupt contract of ``prove`` and ``fuzz`` (docs/cli.md): the partial
verdicts printed and written (``"interrupted": true``, the parts not finished
named, in JSON and JUnit), every finding so far kept, exit 130 / 143, no
process left behind; a report whose folder went away during the review is an
error naming the option, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from replayssm.cli import main
from review_corpus import needs_corpus, version_path

PLANT = ("old_committed + accepted)", "old_committed + 1)")
"""A3's planted bug (as in test_review_cli.py): found within a few dozen examples (A3's lifecycle finds
nothing of its own, where A1's mode-none read past the row would come first)."""


def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


@needs_corpus
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process group from /proc")
@pytest.mark.parametrize("signum, status, label, wait_for", [
    (signal.SIGINT, 130, "D2", "reviewing D2"),  # as the review of a version that passes starts
    (signal.SIGTERM, 143, "A3_planted", "counterexample found"),  # while its finding is being shrunk
])
def test_an_interrupt_ends_the_review_with_its_partial_report(signum: int, status: int, label: str, wait_for: str,
                                                              tmp_path: Path) -> None:
    head = version_path(label)
    if label.endswith("_planted"):
        head = tmp_path / f"{label}.py"
        head.write_text(version_path(label.split("_")[0]).read_text().replace(*PLANT))
    report, junit, traces = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "traces"
    proc = subprocess.Popen([sys.executable, "-m", "replayssm", "review", str(head), "--budget", "600",
                             "--traces", str(traces), "--json", str(report), "--junit", str(junit)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # the handlers are in place once the versions load
        lines.append(line)
        if wait_for in line:
            break
    proc.send_signal(signum)
    rest, _ = proc.communicate(timeout=60)
    text = "".join(lines) + rest
    assert proc.returncode == status, text
    assert "Traceback" not in text and f"interrupted by {signal.Signals(signum).name}: the review stopped" in text
    assert "0 of 1 version(s) reviewed in full" in text and "not finished: lifecycle campaign" in text, text
    document = json.loads(report.read_text())
    assert document["interrupted"] is True and f"{label}: lifecycle campaign" in document["not_finished"]
    verdict = document["verdicts"][0]
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert int(suite.get("tests")) == len(cases) and cases["interrupted"].find("error") is not None
    assert cases[f"{label}: probe without live_move_copies_state"].find("skipped") is not None
    if signum == signal.SIGINT:
        assert verdict["status"] == "interrupted" and not verdict["findings"]
        assert set(verdict["properties"].values()) <= {"held so far"}  # none before its campaign started
        assert cases["D2: lifecycle campaign"].find("skipped") is not None
    else:  # the finding as first seen, its trace saved and replayable
        assert verdict["status"] == "finding" and verdict["properties"]["refinement"] == "broken"
        (finding,) = verdict["findings"]
        assert finding["shrunk"] is False and Path(finding["trace"]).exists()
        assert f"trace: {finding['trace']}" in cases[f"{label}: lifecycle campaign"].find("failure").text
        assert main(["replay", finding["trace"], "--recorded"]) == 1
    time.sleep(0.2)
    assert not _group(proc.pid), "a process of the review's group outlived it"


@needs_corpus
@pytest.mark.parametrize("found, status", [(True, 1), (False, 2)])
def test_a_report_whose_folder_went_away_is_an_error_naming_the_option(found: bool, status: int, tmp_path: Path,
                                                                       monkeypatch, capsys) -> None:
    """The ``--json`` folder is removed during the review: exit 2 naming the
    option (1 when there is a finding: a finding is never reported as a
    set-up error), the table printed, the JUnit file still written."""
    from replayssm.review import command
    from replayssm.review.verdict_parts import Counterexample, LifecycleResult

    gone = tmp_path / "gone"
    gone.mkdir()
    trace = tmp_path / "traces" / "review-D2-seed0.json"

    def review_version(parts, v, args, base, out) -> None:
        shutil.rmtree(gone)
        parts.done.extend(command.planned_parts(base))
        planted = Counterexample("refinement", "refinement: planted", str(trace), True,
                                 f"replayssm-verify replay {trace}")
        parts.lifecycle = LifecycleResult({"request_steps": 40, "seconds": 0.1}, {"refinement": "held"},
                                          (planted,) if found else (), (), 0.1)

    monkeypatch.setattr(command, "review_version", review_version)
    code = main(["review", str(version_path("D2")), "--traces", str(tmp_path / "traces"),
                 "--json", str(gone / "r.json"), "--junit", str(tmp_path / "r.xml")])
    captured = capsys.readouterr()
    assert code == status, captured
    assert f"error: --json {gone / 'r.json'}: cannot write the report" in captured.err
    assert "Traceback" not in captured.err and ("finding" if found else "pass") in captured.out
    assert (tmp_path / "r.xml").exists()


@needs_corpus
def test_an_interrupt_during_the_comparison_keeps_the_differences_so_far(tmp_path: Path, monkeypatch,
                                                                         capsys) -> None:
    """The comparison with ``--base`` cut short while it shrinks a regression:
    the regression as first seen and the neutral request-steps so far are in
    the report, the comparison is not finished, and the status is 143. (The
    campaigns are stand-ins that pass, then raise the interrupt as a real
    campaign does, with what it had done.)"""
    from replayssm.base.interrupts import Interrupted
    from replayssm.review import campaign as campaign_module
    from replayssm.review.campaign import CampaignOutcome, Failure, Tally

    trace = str(tmp_path / "review-D2-vs-D2-0-seed7919000-unshrunk.json")

    def campaign(versions, **kwargs) -> CampaignOutcome:
        if len(versions) == 2:
            e = Interrupted(signal.SIGTERM)
            e.partial = CampaignOutcome(Tally(request_steps=7), 1.0, [Failure("regression", "materialize",
                                                                      "regression: head breaks materialize: planted",
                                                                      trace, False)])
            raise e
        return CampaignOutcome(Tally(request_steps=30, scenarios={"checkpoint": 1}), 1.0)

    monkeypatch.setattr(campaign_module, "campaign", campaign)
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    code = main(["review", str(version_path("D2")), "--base", str(version_path("D1")), "--traces", str(tmp_path),
                 "--json", str(report), "--junit", str(junit)])
    assert code == 143, capsys.readouterr()
    document = json.loads(report.read_text())
    assert document["interrupted"] and document["not_finished"] == ["D2: against the base (differential)"]
    (verdict,) = document["verdicts"]
    sampled = [d for d in verdict["differences"] if d["evidence"] == "sampled"]  # after the proved kernel roles
    assert verdict["status"] == "finding" and [d["kind"] for d in sampled] == ["regression", "neutral"]
    assert sampled[0]["trace"] == trace and sampled[1]["request_steps"] == 7
    case = {c.get("name"): c for c in ElementTree.parse(junit).getroot().iter("testcase")}
    assert case["D2: against the base (differential)"].find("failure") is not None
    assert case["D2: lifecycle campaign"].find("failure") is None and case["interrupted"].find("error") is not None
