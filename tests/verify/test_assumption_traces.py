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
