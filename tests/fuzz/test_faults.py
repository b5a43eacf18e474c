"""Faults are findings, and ``fuzz``/``replay`` fail cleanly on misuse.

Teeth: planted kernels (a copy of ``impl/kernels.py`` with a one-line change,
loaded as an ``--impl`` file from a temporary folder) that loop forever, call
``os._exit(1)`` or segfault are findings of kind ``hang`` or ``crash`` with a
saved trace that ``replay`` reproduces in a child process. Each misuse of
issue 17 that concerns ``fuzz`` and ``replay`` has its test here (the table is
in docs/cli.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replayssm.base import reports
from replayssm.cli import main
from replayssm.fuzz import campaign_config, campaign_worker
from replayssm.fuzz import report
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import CampaignConfig
from replayssm.fuzz.replay import replay
from replayssm.fuzz.target import DEFAULT_TARGET
from fuzz_processes import REPO, alive, interrupt_at, plant

MIGRATION_LINE = "    valid_req = req >= 0\n"
"""A line of the migration kernel, the first kernel every fuzzed example launches."""

FAULTS = {
    "hang": MIGRATION_LINE + "    while True: pass\n",
    "exit": MIGRATION_LINE.rstrip() + '; __import__("os")._exit(1)\n',
    "segfault": MIGRATION_LINE.rstrip() + '; __import__("ctypes").string_at(0)\n',
}
"""Planted faults in the migration kernel (the Triton interpreter runs its Python)."""

WATCHDOG = 2.0
MARGIN = 45.0
"""Start-up, the first launch and a loaded 2-core machine, beyond the watchdog."""


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_hang_or_a_dead_worker_is_a_finding_that_replay_reproduces(tmp_path: Path, fault: str) -> None:
    target = plant(tmp_path, MIGRATION_LINE, FAULTS[fault])
    failures = tmp_path / "failures"
    start = time.monotonic()
    result = run_campaign(CampaignConfig(target, "cpu", 128, 6, seed=0, jobs=2, failures_dir=str(failures),
                                         watchdog=WATCHDOG))
    elapsed = time.monotonic() - start
    assert result["exit_code"] == 1 and len(result["findings"]) == 1, result["findings"]
    finding = result["findings"][0]
    kind = "hang" if fault == "hang" else "crash"
    assert finding["kind"] == kind and finding["kernel"] == "_reset_new_replayssm_slots_kernel", finding
    assert {"hang": "watchdog", "exit": "exit status 1", "segfault": "SIGSEGV"}[fault] in finding["reason"]
    if fault == "hang":
        assert WATCHDOG <= elapsed < WATCHDOG + MARGIN, elapsed
    trace = json.loads(Path(finding["trace"]).read_text())
    assert trace["#meta"]["failure"] == kind and trace["actions"][-1]["name"] == "migrate"
    assert trace["#meta"]["impl"] == target and len(trace["states"]) == len(trace["actions"])
    ok, text = replay(finding["trace"], watchdog=WATCHDOG)  # impl, level and device from #meta
    assert not ok and f"{kind} reproduced at step {len(trace['actions']) - 1}" in text, text
    ok, text = replay(finding["trace"], DEFAULT_TARGET)
    assert ok and f"did not {kind} here" in text, text


def test_two_campaigns_with_one_seed_keep_both_traces(tmp_path: Path) -> None:
    target = plant(tmp_path, MIGRATION_LINE, FAULTS["exit"])
    config = CampaignConfig(target, "cpu", 128, 6, seed=0, jobs=1, failures_dir=str(tmp_path / "f"))
    first = run_campaign(config)["failures"]
    second = run_campaign(config)["failures"]
    assert len(first) == len(second) == 1 and first != second
    assert len(list((tmp_path / "f").iterdir())) == 2


def test_the_finding_is_kept_when_its_folder_cannot_take_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--failures`` that fails after the start-up check: the trace goes to
    the temporary folder; when that fails too, it is printed."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    out = sys.stdout
    path = report.save_trace({"actions": [1]}, str(blocker), "t.json", out)
    assert path is not None and Path(path).parent != blocker and json.loads(Path(path).read_text())
    monkeypatch.setattr(report.tempfile, "gettempdir", lambda: str(blocker))
    assert report.save_trace({"actions": [2]}, str(blocker), "t.json", out) is None
    assert '{"actions": [2]}' in capsys.readouterr().out


# ---- exit codes, the JSON summary and misuse of the fuzz command ------------------------------

def cli(*argv: str) -> int:
    return main(["fuzz", *argv])


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "100000"], "--jobs must be in [1, 32]"),
    (["--jobs", "0"], "--jobs must be in [1, 32]"),
    (["--impl", ""], "--impl must name a module or a .py file, got ''"),
    (["--json", "{tmp}/missing/summary.json"], "does not exist"),
    (["--json", "{tmp}"], "is a folder"),
    (["--failures", "{tmp}/file"], "--failures '{tmp}/file' is a file, not a folder"),
    (["--failures", "{tmp}/file/below"], "'{tmp}/file' is a file, not a folder"),
    (["--junit", "{tmp}/missing/r.xml"], "--junit '{tmp}/missing/r.xml': the folder"),
    (["--html", "{tmp}"], "--html '{tmp}' is a folder; give a file name"),
    (["--numeric", "--sarif", "{tmp}/s.sarif"], "--sarif does not apply to --numeric"),
])
def test_fuzz_misuse_is_exit_2_before_any_work(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    (tmp_path / "file").write_text("")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert cli(*argv, *([] if "--failures" in argv else ["--failures", str(tmp_path / "f")])) == 2
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err and "fuzzing" not in captured.out, captured


def test_a_read_only_json_folder_is_exit_2_before_any_work(tmp_path: Path, monkeypatch, capsys) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the permission bits are read through os.access
        real = os.access
        monkeypatch.setattr(reports.os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode))
    assert cli("--json", str(folder / "s.json"), "--failures", str(tmp_path / "f")) == 2
    assert "not writable" in capsys.readouterr().err


@pytest.fixture()
def quick(monkeypatch):
    """A campaign of one short example per combination whose scenario list is empty (so it passes)."""
    monkeypatch.setattr(campaign_config, "SCENARIOS", ())
    return ["--examples", "32", "--max-steps", "2"]


def test_json_dash_writes_the_summary_to_stdout(tmp_path: Path, capsys, quick) -> None:
    assert cli(*quick, "--json", "-", "--failures", str(tmp_path)) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["schema"] == report.SUMMARY_SCHEMA and summary["status"] == "passed"
    assert summary["config"] == {**summary["config"], "impl": DEFAULT_TARGET, "level": "kernel", "device": "cpu",
                                 "seed": 0, "profile": "ci", "budget": {"examples": 32, "max_steps": 2}}
    assert "PASSED" in captured.err and not (tmp_path / "-").exists()


def test_a_coverage_shortfall_is_exit_3(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.json"
    assert cli("--examples", "32", "--max-steps", "1", "--json", str(path), "--failures", str(tmp_path)) == 3
    summary = json.loads(path.read_text())
    assert summary["status"] == "coverage" and summary["missing_scenarios"] and not summary["findings"]


def test_a_passing_campaign_never_exits_1_on_a_write_error(tmp_path: Path, monkeypatch, capsys, quick) -> None:
    def fail(path: str, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reports, "write_text", fail)
    assert cli(*quick, "--json", str(tmp_path / "s.json"), "--failures", str(tmp_path)) == 2
    assert f"error: --json {tmp_path / 's.json'}: cannot write the report" in capsys.readouterr().err


def test_a_finding_is_exit_1_with_kind_and_reason_in_the_json(tmp_path: Path) -> None:
    target = plant(tmp_path, MIGRATION_LINE, FAULTS["exit"])
    path, junit = tmp_path / "s.json", tmp_path / "r.xml"
    assert cli("--impl", target, "--json", str(path), "--junit", str(junit), "--failures", str(tmp_path / "f"),
               "--jobs", "1") == 1
    summary = json.loads(path.read_text())
    assert summary["status"] == "finding" and summary["findings"][0]["kind"] == "crash"
    assert "exit status 1" in summary["findings"][0]["reason"] and summary["config"]["impl"] == target
    from xml.etree import ElementTree

    case = ElementTree.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and target in case.get("name", "")
    failure = case.find("failure")
    assert failure is not None and '"kind": "crash"' in (failure.text or ""), ElementTree.tostring(case)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_stops_the_workers_and_keeps_the_finding(tmp_path: Path, signum: int, code: int) -> None:
    """A signal while a worker shrinks its finding: every worker stops, the
    partial summary is printed, the JSON and the JUnit say interrupted, the
    (unshrunk) finding is saved."""
    target = plant(tmp_path, "% RING_BUFFER_LEN", "& (RING_BUFFER_LEN - 1)")
    path, junit = tmp_path / "s.json", tmp_path / "r.xml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "replayssm.cli", "fuzz", "--impl", target, "--json", str(path), "--junit", str(junit),
         "--failures", str(tmp_path / "f"), "--jobs", "2", "--shrink-seconds", "600"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    text, workers = interrupt_at(proc, "hit a failure", signum, timeout=120)
    assert proc.returncode == code, text
    assert f"INTERRUPTED by {signal.Signals(signum).name}" in text and "rules:" in text, text
    summary = json.loads(path.read_text())
    assert summary["interrupted"] and summary["status"] == "interrupted" and summary["exit_code"] == code
    assert len(summary["findings"]) == 1 and not summary["findings"][0]["shrunk"], summary["findings"]
    assert Path(summary["findings"][0]["trace"]).exists()
    from xml.etree import ElementTree

    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    assert [c.get("name") for c in cases][1:] == ["interrupted"] and cases[0].find("failure") is not None, text
    assert workers and not [p for p in workers if alive(p)], "a worker survived the interrupt"


# ---- traces -------------------------------------------------------------------------------------

def saved_trace(tmp_path: Path) -> dict:
    """A fuzz trace (a system trace's launches, as the fuzzer saves them) with its spec states."""
    from replayssm.fuzz.launch_traces import spec_states
    from replayssm.fuzz.system_traces import launch_trace

    trace = launch_trace(json.loads((REPO / "docs" / "traces" / "row_nonempty.json").read_text()))
    trace["#meta"]["source"] = "fuzz"
    trace["states"] = spec_states(trace)
    return trace


@pytest.mark.parametrize("edit, message", [
    (lambda t: t["#meta"].update(format="replayssm-trace/3"), "replayssm-trace/3 is not supported"),
    (lambda t: t["#meta"].update(format="replayssm-trace/9.1"), "replayssm-trace/9.1 is not supported"),
    (lambda t: t["#meta"].pop("format"), "#meta.format must be replayssm-trace/2"),
    (lambda t: t.update(actions=[], states=[]), "no launch actions"),
    (lambda t: t["params"].update(num_slots=3e9), "params.num_slots must be an int in [1, 1048576], got 3000000000.0"),
    (lambda t: t["params"].update(num_slots=3_000_000_000), "params.num_slots must be an int in [1, 1048576]"),
    (lambda t: t["params"].update(num_cols=100_000_000), "params.num_cols must be an int in [1, 65536]"),
    (lambda t: t["params"]["geometry"].update(max_num_reqs=60000) or t["params"].update(num_cols=60000),
     "block-table entries"),
    (lambda t: t["states"][0]["ring_start"][0].__setitem__(1, 99), "trace.states[0].ring_start differs"),
])
def test_replay_rejects_traces_it_cannot_judge(tmp_path: Path, edit, message: str) -> None:
    trace = saved_trace(tmp_path)
    edit(trace)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    with pytest.raises(ValueError) as e:
        replay(str(path))
    assert message in str(e.value), e.value
    assert main(["replay", str(path)]) == 2


def test_replay_says_what_it_checked(tmp_path: Path, capsys) -> None:
    trace = saved_trace(tmp_path)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    launches = sum(a["name"] != "set_state" for a in trace["actions"])
    assert f"after each of the {len(trace['actions'])} actions ({launches} launches)" in out, out
    assert f"its {len(trace['states'])} recorded spec states match the spec" in out
    assert f"impl {DEFAULT_TARGET} (default), level kernel (default), device cpu (default)" in out


def test_a_worker_that_dies_while_it_sets_up_is_a_set_up_error(tmp_path: Path, monkeypatch, capsys) -> None:
    """Before a worker reports ready (target loaded), its death is the harness's, not a finding."""
    monkeypatch.setattr(campaign_worker, "_limit_shrinking", lambda seconds: os._exit(7))
    assert cli("--examples", "32", "--failures", str(tmp_path / "f"), "--jobs", "1") == 2
    assert "died (exit status 7) while it set up" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()


def test_the_progress_line_and_the_optional_bar(monkeypatch) -> None:
    """A line every 10 s once a run passes 5 s; on a terminal with tqdm installed, a bar instead."""
    import io
    import types

    clock = [0.0]
    monkeypatch.setattr(report.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    progress = report.Progress(out, 128)
    for now, examples in ((1.0, 1), (6.0, 10), (8.0, 12), (17.0, 30)):
        clock[0] = now
        progress.update(examples, 2 * examples, 0)
    assert out.getvalue().splitlines() == ["  progress: 10 examples, 20 request-steps, 0 findings, 6 s",
                                           "  progress: 30 examples, 60 request-steps, 0 findings, 17 s"]

    class Bar:
        def __init__(self, total: int, **kwargs) -> None:
            self.total, self.n, self.postfix, self.closed = total, 0, "", False

        def set_postfix_str(self, text: str, refresh: bool) -> None:
            self.postfix = text

        def refresh(self) -> None:
            pass

        def close(self) -> None:
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=Bar))
    terminal = io.StringIO()
    monkeypatch.setattr(terminal, "isatty", lambda: True)
    clock[0] = 0.0
    progress = report.Progress(terminal, 128)
    clock[0] = 7.0
    progress.update(40, 90, 1)
    progress.close()
    assert progress.bar.n == 40 and progress.bar.postfix == "90 request-steps, 1 findings" and progress.bar.closed
    assert terminal.getvalue() == ""
