"""The provenance table in docs/assumptions.md is what scripts/provenance_table.py writes for this tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "provenance_table.py"
DOC = ROOT / "docs" / "assumptions.md"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_committed_provenance_table_is_regenerated(tmp_path: Path) -> None:
    """A copy with one row edited comes back as the committed file: the table is
    rewritten, and the committed one is what the script writes for this tree."""
    copy = tmp_path / "assumptions.md"
    copy.write_text(DOC.read_text().replace("| `row_nonempty` | assumption |", "| `row_nonempty` | edited |"))
    run = _run("--doc", str(copy))
    assert run.returncode == 0 and "rewritten" in run.stdout, run.stderr
    assert copy.read_text() == DOC.read_text(), (
        "docs/assumptions.md's provenance table is stale: run python3 scripts/provenance_table.py and review the diff")


def test_the_script_refuses_a_file_without_markers_or_no_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.md"
    plain.write_text("# no table here\n")
    run = _run("--doc", str(plain))
    assert run.returncode == 2 and "--doc" in run.stderr and "markers" in run.stderr
    run = _run("--doc", str(tmp_path / "missing.md"))
    assert run.returncode == 2 and "is not a file" in run.stderr
