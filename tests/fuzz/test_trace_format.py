"""Trace format versions: ``replayssm-trace/2`` is written; a system trace of
major 1 (flat picks) is rejected by ``replay`` and ``explain`` naming its
version and why, while a launch trace of major 1 (the same layout) still
replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.base.system_traces import FORMAT
from replayssm.base.traces import TRACE_ID, check_format, trace_kind

REPO = Path(__file__).resolve().parents[2]
SYSTEM_TRACE = REPO / "docs" / "traces" / "row_nonempty.json"


def _system_trace() -> dict:
    return json.loads(SYSTEM_TRACE.read_text())


def _launch_trace() -> dict:
    from replayssm.fuzz.launch_traces import spec_states
    from replayssm.fuzz.system_traces import launch_trace

    trace = launch_trace(_system_trace())
    trace["states"] = spec_states(trace)
    return trace


def test_both_kinds_are_written_as_major_2() -> None:
    assert FORMAT == TRACE_ID == "replayssm-trace/2"
    system, launch = _system_trace(), _launch_trace()
    assert (trace_kind(system), trace_kind(launch)) == ("system", "launch")
    assert system["#meta"]["format"] == launch["#meta"]["format"] == "replayssm-trace/2"
    assert isinstance(system["actions"][0]["picks"]["rows"], list)  # the nested picks of major 2


@pytest.mark.parametrize("command", ["replay", "explain"])
def test_a_system_trace_of_major_1_is_rejected_naming_its_version(command: str, tmp_path: Path, capsys) -> None:
    trace = _system_trace()
    trace["#meta"]["format"] = "replayssm-trace/1"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(trace))
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err
    assert "trace format replayssm-trace/1 is not supported for a system trace" in err, err
    assert "flat names" in err and "this version reads replayssm-trace/2" in err


@pytest.mark.parametrize("fmt, kind, accepted", [
    ("replayssm-trace/2", "system", True),
    ("replayssm-trace/2.3", "system", True),
    ("replayssm-trace/1", "system", False),
    ("replayssm-trace/3", "system", False),
    ("replayssm-trace/1", "launch", True),
    ("replayssm-trace/1.1", "launch", True),
    ("replayssm-trace/2", "launch", True),
    ("replayssm-trace/3", "launch", False),
    ("replayssm-trace/", "launch", False),
])
def test_the_majors_read_per_kind(fmt: str, kind: str, accepted: bool) -> None:
    if accepted:
        check_format({"format": fmt}, kind)
        return
    with pytest.raises(ValueError, match=f"trace format {fmt} is not supported for a {kind} trace"):
        check_format({"format": fmt}, kind)


def test_a_launch_trace_of_major_1_still_replays(tmp_path: Path, capsys) -> None:
    trace = _launch_trace()
    trace["#meta"]["format"] = "replayssm-trace/1"
    path = tmp_path / "launch-v1.json"
    path.write_text(json.dumps(trace))
    assert main(["replay", str(path)]) == 0, capsys.readouterr()
    assert "recorded spec states match the spec" in capsys.readouterr().out
