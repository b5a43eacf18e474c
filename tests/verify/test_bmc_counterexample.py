"""Teeth of ``system.bmc`` and ``system.bmc_symbolic``: a planted
caller-visible bug (the prefix cache registers a block one token short of its
boundary) is found by the explicit exploration and by the symbolic unrolling,
and ``prove`` saves the run where ``--counterexamples`` says, as a trace
``explain`` prints."""

from __future__ import annotations

import inspect
import json

from replayssm.spec.system import step_phases
from replayssm.cli import main
from replayssm.base.system_traces import replay_actions
from replayssm.base.traces import read_json
from replayssm.verify.traces import explain


def test_bmc_finds_a_planted_bug_and_saves_its_run(tmp_path, monkeypatch, capsys):
    source = inspect.getsource(step_phases.register_filled_blocks)
    assert source.count("code(p, stream, end)") == 1
    namespace = dict(vars(step_phases))
    exec(source.replace("code(p, stream, end)", "code(p, stream, end - 1)"), namespace)
    registers_one_token_short = namespace["register_filled_blocks"]

    monkeypatch.setattr(step_phases, "register_filled_blocks", registers_one_token_short)
    monkeypatch.chdir(tmp_path)  # the old default folder, out/counterexamples, would appear here
    folder = tmp_path / "cex"
    rc = main(["prove", "--only", "system.bmc", "--jobs", "1", "--counterexamples", str(folder)])
    out = capsys.readouterr().out
    assert rc == 1 and "system.bmc " in out and "failed" in out
    scenario = json.loads((folder / "system.bmc.json").read_text())
    assert any("canonical" in v for v in scenario["violated"]), scenario["violated"]
    trace_path = folder / "system.bmc.trace.json"
    assert scenario["trace_file"] == str(trace_path) and str(trace_path) in out
    trace = read_json(trace_path)
    assert trace["actions"] and all(diff == [] for _, _, diff in replay_actions(trace))
    assert "BROKEN invariants" in explain(trace_path)
    assert not (tmp_path / "out").exists()
    symbolic = json.loads((folder / "system.bmc_symbolic.json").read_text())  # the Z3 unrolling finds it too
    assert any("depth" in v for v in symbolic["violated"]), symbolic["violated"]
