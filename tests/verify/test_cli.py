"""The command line: prove's report and JSON, and its errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.cli import main


def test_prove_reports_each_obligation_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "r.json"
    assert main(["prove", "--only", "boundary.", "--jobs", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "boundary.exact" in text and "4/4 obligations proved" in text
    report = json.loads(out.read_text())
    assert {o["name"] for o in report["obligations"]} >= {"boundary.exact", "boundary.prefill_exact"}
    assert all(o["status"] == "proved" and o["assumptions"] is not None and o["seconds"] >= 0
               for o in report["obligations"])
    assert report["seconds"] > 0


def test_prove_fails_and_saves_a_counterexample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    import replayssm.spec.boundary as boundary
    from replayssm.spec.vocab import cdiv

    def off_by_one(running_pos, new_computed, block_size):
        aligned = cdiv(new_computed, block_size) * block_size
        return boundary.Boundary(aligned > running_pos, aligned - running_pos, cdiv(aligned, block_size) - 1, aligned)

    monkeypatch.setattr("replayssm.verify.boundary_proofs.mamba_state_copy_boundary", off_by_one)
    status = main(["prove", "--only", "boundary.exact", "--jobs", "1", "--counterexamples", str(tmp_path)])
    assert status == 1
    assert "failed" in capsys.readouterr().out
    saved = json.loads((tmp_path / "boundary.exact.json").read_text())
    assert saved["obligation"] == "boundary.exact" and saved["values"]


def test_list_and_bad_input(capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--list", "--only", "compaction.work_list"]) == 0
    assert "FlashInfer's work-list contract" in capsys.readouterr().out
    assert main(["prove", "--only", "no.such.obligation"]) == 2
    assert "matches no obligation" in capsys.readouterr().err
    assert main(["prove", "--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err
    assert main(["fuzz", "--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err
    assert main(["fuzz", "--examples", "0"]) == 2
    assert "--examples must be >= 1" in capsys.readouterr().err
    assert main(["fuzz", "--impl", "/nonexistent/impl.py", "--examples", "1"]) == 2
    assert main(["replay", "/nonexistent/trace.json"]) == 2
