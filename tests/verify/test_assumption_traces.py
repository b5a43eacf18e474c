"""The committed counterexample traces of the caller assumptions
(docs/traces/, docs/assumption_traces.md) are what
scripts/assumption_traces.py writes for this tree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import z3

from replayssm.base.system_traces import replay_actions
from replayssm.base.traces import read_json

ROOT = Path(__file__).resolve().parents[2]
RELEASE_SUFFIX = ".release-trace.json"
"""``review --vllm``'s committed traces beside them (tests/review/test_release_review.py checks those)."""


def test_the_committed_assumption_traces_are_regenerated(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "assumption_traces.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs" / "traces").glob("*")
                       if not p.name.endswith(RELEASE_SUFFIX))
    committed.append(Path("assumption_traces.md"))
    assert fresh == sorted(committed), "docs/traces holds other files than the script writes"
    made_with = re.search(r"with Z3 (\S+) ", (ROOT / "docs" / "assumption_traces.md").read_text())
    if made_with and made_with.group(1) == z3.get_version_string():
        stale = [str(p) for p in fresh if (tmp_path / p).read_text() != (ROOT / "docs" / p).read_text()]
        assert not stale, (f"stale: {stale}; run python3 scripts/assumption_traces.py and review the diff "
                           "(docs/assumptions.md discusses some of these traces)")
    else:  # another solver may pick other models: each committed trace must still be a counterexample
        for path in (ROOT / "docs" / "traces").glob("*.json"):
            if path.name.endswith(RELEASE_SUFFIX):
                continue
            trace = read_json(path)
            assert trace["#meta"]["violated"] and all(diff == [] for _, _, diff in replay_actions(trace)), path


def test_the_script_refuses_a_file_as_its_folder(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "assumption_traces.py"), "--out", str(file)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "--out" in run.stderr and "is a file" in run.stderr


def test_regenerating_removes_only_its_own_stale_traces(tmp_path: Path, monkeypatch) -> None:
    """The script removes a trace it wrote whose probe is gone, and nothing else in the folder: not
    ``review --vllm``'s committed release trace, not a file that is not JSON (before: every ``*.json``
    it did not write this time was deleted, the release trace included). One probe stands for all."""
    from script_modules import load

    from replayssm.verify import system_findings, system_probes

    script = load("assumption_traces")
    monkeypatch.setattr(system_probes, "PROBES", {"row_nonempty": system_probes.PROBES["row_nonempty"]})
    monkeypatch.setattr(system_findings, "FINDINGS", {})
    traces = tmp_path / "traces"
    traces.mkdir()
    [release] = (ROOT / "docs" / "traces").glob("*" + RELEASE_SUFFIX)
    kept = {traces / release.name: release.read_bytes(), traces / "notes.json": b"not JSON"}
    gone = {traces / "a_probe_since_removed.json": (ROOT / "docs" / "traces" / "decode_row_fits.json").read_bytes(),
            traces / "a_finding_since_removed.json":
                (ROOT / "docs" / "traces" / "all_mode_unpublished.decode_fills_block.json").read_bytes()}
    for path, data in {**kept, **gone}.items():
        path.write_bytes(data)
    written = script.write(tmp_path)
    assert [p.name for p in kept if not p.exists()] == [], "a file the script does not own went"
    assert all(path.read_bytes() == data for path, data in kept.items())
    assert not any(path.exists() for path in gone), "a stale trace of the script's stayed"
    assert traces / "row_nonempty.json" in written and script.ours(traces / "row_nonempty.json")
