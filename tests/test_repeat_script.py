"""scripts/repeat_tests.sh: bad arguments exit 2 before any run, and every test file it lists exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "repeat_tests.sh"


def listed() -> list[str]:
    """The test files in the script's TESTS array."""
    body = re.search(r"^TESTS=\((.*?)^\)", SCRIPT.read_text(), re.S | re.M)
    assert body is not None, "scripts/repeat_tests.sh has no TESTS=( ... ) array"
    return body.group(1).split()


def test_every_listed_test_file_exists() -> None:
    files = listed()
    assert len(files) >= 5 and all((ROOT / f).is_file() for f in files), [f for f in files if not (ROOT / f).is_file()]


@pytest.mark.parametrize("runs", ["0", "five", "-3", "101"])
def test_a_bad_run_count_exits_2_naming_it_before_any_run(runs: str, tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(SCRIPT), runs], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "RUNS must be a whole number from 1 to 100" in done.stderr
    assert f"got '{runs}'" in done.stderr and done.stdout == ""


def test_teeth_a_listed_file_that_is_gone_exits_2(tmp_path: Path) -> None:
    copy = tmp_path / "scripts" / "repeat_tests.sh"
    copy.parent.mkdir()
    copy.write_text(SCRIPT.read_text().replace("TESTS=(", "TESTS=(\n  tests/no_such_test.py", 1))
    done = subprocess.run(["bash", str(copy), "1"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "tests/no_such_test.py is listed" in done.stderr
