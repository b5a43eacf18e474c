"""``fuzz --json`` and ``--junit`` go through the report-file code every command shares (``base/reports.py``).

Checked before any work (exit 2 naming the option, for the campaign and for
``--numeric``); written at the end through ``write_reports``, so one that
cannot be written is ``error: OPTION PATH: cannot write the report`` with
exit 2 for a run that passed (a finding keeps exit 1, an interrupt its
signal's status) and the other reports are still written, never a
traceback; an interrupted campaign's reports say it was interrupted."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path
from xml.etree import ElementTree

import pytest

from replayssm.base import reports
from replayssm.cli import main
from replayssm.fuzz import campaign, campaign_config, numeric_campaign
from replayssm.fuzz.report import SUMMARY_SCHEMA


def cli(*argv: str) -> int:
    return main(["fuzz", *argv])


def _read_only(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the permission bits are read through os.access
        real = os.access
        monkeypatch.setattr(reports.os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode))


@pytest.mark.parametrize("numeric", [False, True])
@pytest.mark.parametrize("option", ["--json", "--junit"])
@pytest.mark.parametrize("where, message", [
    ("missing/r.out", "the folder {folder!r} does not exist"),
    ("ro/r.out", "the folder {folder!r} is not writable"),
    (".", "is a folder; give a file name"),
])
def test_an_unusable_report_file_is_exit_2_before_any_work(tmp_path: Path, monkeypatch, capsys, numeric: bool,
                                                          option: str, where: str, message: str) -> None:
    if where.startswith("ro/"):
        _read_only(tmp_path / "ro", monkeypatch)
    path = tmp_path / where
    started = []
    monkeypatch.setattr(campaign, "run_campaign", lambda *a, **k: started.append(a))
    monkeypatch.setattr(numeric_campaign, "run_numeric", lambda *a, **k: started.append(a))
    assert cli(*(["--numeric"] if numeric else []), option, str(path), "--failures", str(tmp_path / "f")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option} {str(path)!r}") and message.format(folder=str(path.parent)) in err, err
    assert not started, "the run started before its report files were checked"


SUMMARY = {"schema": SUMMARY_SCHEMA, "status": "passed", "exit_code": 0, "passed": True, "interrupted": False,
           "config": {"impl": "some.impl", "level": "kernel", "seed": 3}, "examples": 32, "request_steps": 64,
           "seconds": 1.5, "missing_scenarios": [], "findings": [], "failures": []}
"""A campaign's summary (``fuzz/report.py`` ``summarize``), as the command line reads it."""

FINDING = {"kind": "discrepancy", "reason": "plan_ring_start differs", "kernel": "k", "trace": None}

OUTCOMES = {
    "passed": SUMMARY,
    "coverage": {**SUMMARY, "status": "coverage", "exit_code": 3, "passed": False, "missing_scenarios": ["ring wrap"]},
    "finding": {**SUMMARY, "status": "finding", "exit_code": 1, "passed": False, "findings": [FINDING]},
    "SIGINT": {**SUMMARY, "status": "interrupted", "exit_code": 130, "passed": False, "interrupted": True},
}


def _campaign_ending(monkeypatch: pytest.MonkeyPatch, summary: dict) -> None:
    monkeypatch.setattr(campaign, "run_campaign", lambda config, out: summary)


def _failing_writes(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    real = reports.write_text

    def write_text(target: str, text: str) -> None:
        if Path(target) == path:
            raise OSError(28, "No space left on device")
        real(target, text)

    monkeypatch.setattr(reports, "write_text", write_text)


@pytest.mark.parametrize("outcome, status", [("passed", 2), ("coverage", 2), ("finding", 1), ("SIGINT", 130)])
@pytest.mark.parametrize("failing", ["--json", "--junit"])
def test_a_report_that_cannot_be_written_is_named_and_the_other_still_written(
        tmp_path: Path, monkeypatch, capsys, outcome: str, status: int, failing: str) -> None:
    """Exit 2 for a run that passed or fell short of coverage; a finding keeps 1, an interrupt 130."""
    paths = {"--json": tmp_path / "s.json", "--junit": tmp_path / "r.xml"}
    _campaign_ending(monkeypatch, OUTCOMES[outcome])
    _failing_writes(monkeypatch, paths[failing])
    assert cli("--json", str(paths["--json"]), "--junit", str(paths["--junit"]), "--failures", str(tmp_path)) == status
    err = capsys.readouterr().err
    assert f"error: {failing} {paths[failing]}: cannot write the report: [Errno 28] No space left on device" in err
    other = paths["--junit" if failing == "--json" else "--json"]
    assert other.exists() and not paths[failing].exists()


def test_the_reports_say_what_the_campaign_found(tmp_path: Path, monkeypatch) -> None:
    """The JSON is the summary with its schema first; the JUnit case fails with the finding."""
    _campaign_ending(monkeypatch, OUTCOMES["finding"])
    path, junit = tmp_path / "s.json", tmp_path / "r.xml"
    assert cli("--json", str(path), "--junit", str(junit), "--failures", str(tmp_path)) == 1
    assert json.loads(path.read_text()) == OUTCOMES["finding"] and next(iter(json.loads(path.read_text()))) == "schema"
    case = ElementTree.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "some.impl kernel seed 3"
    failure = case.find("failure")
    assert failure is not None and '"kind": "discrepancy"' in (failure.text or "")


def test_an_interrupted_campaign_writes_its_partial_reports(tmp_path: Path, monkeypatch) -> None:
    _campaign_ending(monkeypatch, OUTCOMES["SIGINT"])
    path, junit = tmp_path / "s.json", tmp_path / "r.xml"
    assert cli("--json", str(path), "--junit", str(junit), "--failures", str(tmp_path)) == 130
    assert json.loads(path.read_text())["interrupted"]
    names = [c.get("name") for c in ElementTree.parse(junit).getroot().iter("testcase")]
    assert names == ["some.impl kernel seed 3", "interrupted"], names


def test_a_coverage_shortfall_is_a_junit_error(tmp_path: Path, monkeypatch) -> None:
    _campaign_ending(monkeypatch, OUTCOMES["coverage"])
    junit = tmp_path / "r.xml"
    assert cli("--junit", str(junit), "--failures", str(tmp_path)) == 3
    error = ElementTree.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "scenario class never reached: ring wrap" in (error.text or "")


def test_a_real_campaigns_reports_are_written_and_an_unwritable_one_is_exit_2(tmp_path: Path, monkeypatch,
                                                                             capsys) -> None:
    """A short campaign that passes (its scenario list emptied): both reports, then the
    JUnit file unwritable at the end, which was a traceback before."""
    monkeypatch.setattr(campaign_config, "SCENARIOS", ())
    path, junit = tmp_path / "s.json", tmp_path / "r.xml"
    quick = ["--examples", "32", "--max-steps", "2", "--jobs", "1", "--failures", str(tmp_path / "f")]
    assert cli(*quick, "--json", str(path), "--junit", str(junit)) == 0
    summary = json.loads(path.read_text())
    assert summary["schema"] == SUMMARY_SCHEMA and summary["status"] == "passed"
    case = ElementTree.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == f"{summary['config']['impl']} kernel seed 0" and not list(case)
    _failing_writes(monkeypatch, junit)
    junit.unlink()
    assert cli(*quick, "--json", str(path), "--junit", str(junit)) == 2
    assert f"error: --junit {junit}: cannot write the report" in capsys.readouterr().err


NUMERIC = {"schema": numeric_campaign.NUMERIC_SCHEMA, "finished": True, "stopped": "complete", "interrupted": False,
           "combinations": 32,
           "combinations_total": 32, "combinations_cut_by_budget": 0, "examples": 32, "request_steps": 90,
           "seconds": 2.0, "flashinfer_ready_seconds": None, "checks": 12, "worst_error_over_bound": 0.1,
           "worst_abs_error": 1e-7, "forwards": {"torch": 3}, "state_dtype": "float32", "seed": 0, "failure": None}
"""A numeric campaign's summary (the fields ``run_numeric_command`` reads)."""


@pytest.mark.parametrize("summary, status, kind", [
    (NUMERIC, 0, None),
    ({**NUMERIC, "failure": "discrepancy: ring start"}, 1, "failure"),
    ({**NUMERIC, "checks": 0}, 3, "error"),
])
def test_the_numeric_campaign_writes_its_junit_case(tmp_path: Path, monkeypatch, summary: dict, status: int,
                                                    kind: str | None) -> None:
    monkeypatch.setattr(numeric_campaign, "run_numeric", lambda config, progress, report: summary)
    path, junit = tmp_path / "n.json", tmp_path / "r.xml"
    assert cli("--numeric", "--json", str(path), "--junit", str(junit)) == status
    assert json.loads(path.read_text()) == summary
    case = ElementTree.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "replayssm.impl.replayssm_utils numeric float32 seed 0"
    assert [child.tag for child in case] == ([kind] if kind else [])


@pytest.mark.parametrize("failing", ["--json", "--junit"])
def test_a_numeric_report_that_cannot_be_written_is_exit_2_not_a_traceback(tmp_path: Path, monkeypatch, capsys,
                                                                         failing: str) -> None:
    """Also while the campaign keeps ``--json`` current: the final write reports it."""
    paths = {"--json": tmp_path / "n.json", "--junit": tmp_path / "r.xml"}

    def run_numeric(config, progress, report):
        report({**NUMERIC, "finished": False})
        return NUMERIC

    monkeypatch.setattr(numeric_campaign, "run_numeric", run_numeric)
    _failing_writes(monkeypatch, paths[failing])
    assert cli("--numeric", "--json", str(paths["--json"]), "--junit", str(paths["--junit"])) == 2
    err = capsys.readouterr().err
    assert f"error: {failing} {paths[failing]}: cannot write the report" in err
    assert paths["--junit" if failing == "--json" else "--json"].exists()


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("when", ["set-up", "workers starting", "supervisor starting"])
def test_a_signal_before_the_workers_run_still_writes_the_partial_reports(tmp_path: Path, monkeypatch, capsys,
                                                                         signum: int, code: int, when: str) -> None:
    """SIGINT or SIGTERM while the campaign checks its set-up, while it
    starts its workers, or once they run but before the supervisor takes the
    signals: the interrupted summary, its JSON and JUnit, the signal's
    status, no worker left."""
    def signal_self(*args: object, **kw: object) -> None:
        os.kill(os.getpid(), signum)

    if when == "set-up":
        monkeypatch.setattr(campaign, "check_setup", signal_self)
    else:
        monkeypatch.setattr(campaign.Supervisor, "start" if when == "workers starting" else "run", signal_self)
    path, junit = tmp_path / "s.json", tmp_path / "r.xml"
    assert cli("--json", str(path), "--junit", str(junit), "--failures", str(tmp_path / "f")) == code
    summary = json.loads(path.read_text())
    assert summary["interrupted"] and summary["status"] == "interrupted" and summary["exit_code"] == code, summary
    assert f"INTERRUPTED by {signal.Signals(signum).name}" in capsys.readouterr().out
    names = [c.get("name") for c in ElementTree.parse(junit).getroot().iter("testcase")]
    assert names[1:] == ["interrupted"], names
    assert not multiprocessing.active_children()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the campaign left its handlers behind"
