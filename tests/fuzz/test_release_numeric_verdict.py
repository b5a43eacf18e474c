"""The verdict of ``scripts/gpu_release_numeric.sh`` (``scripts/release_numeric_verdict.py``), on CPU.

The H100 run's own campaign lines (``docs/results/h100/2026-12-06-gpu41``: 18 campaigns that passed, and both
plants caught by a value beyond its bound) read ``all as expected``; the same lines with one campaign that
checked no output, a plant that failed otherwise than its plant must, a plant that passed, or a process with no
summary do not (exit 1). Before, the script's inline verdict read the first as ``ok`` and the second as
``caught``. The CPU runs of both plants (``test_release_numeric.py``) are judged ``caught`` by the same function.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from script_modules import SCRIPTS, load

from replayssm.fuzz.release_numeric import PLANTS

RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100" / "2026-12-06-gpu41"
verdict = load("release_numeric_verdict")


def judged(tmp_path: Path, change: Callable[[Path], None] | None = None) -> tuple[int, str]:
    """The script's verdict (run as ``gpu_release_numeric.sh`` runs it) on the H100 run's lines, changed."""
    log = tmp_path / "release"
    log.mkdir()
    for f in RUN.glob("*.jsonl"):
        shutil.copy(f, log)
    if change:
        change(log)
    done = subprocess.run([sys.executable, "-P", str(SCRIPTS / "release_numeric_verdict.py"), str(log)],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def rewrite(log: Path, name: str, first: Callable[[dict], None]) -> None:
    """Change the first campaign line of ``name.jsonl`` (its summary stays)."""
    lines = (log / f"{name}.jsonl").read_text().splitlines()
    campaign = json.loads(lines[0])
    first(campaign)
    (log / f"{name}.jsonl").write_text("\n".join([json.dumps(campaign), *lines[1:]]) + "\n")


def test_the_h100_runs_campaigns_and_both_plants_caught_by_their_bound_read_as_expected(tmp_path: Path) -> None:
    status, out = judged(tmp_path)
    assert status == 0 and out.splitlines()[-1] == "verdict: all as expected", out
    assert out.count(" caught pass ") == 2 and out.count(" ok ") == 22, out


def test_a_campaign_that_checked_no_output_is_not_ok(tmp_path: Path) -> None:
    status, out = judged(tmp_path, lambda log: rewrite(log, "fi_t1_w16_f32", lambda c: c.update(outputs=0, states=0)))
    assert status == 1 and "NOTHING CHECKED" in out and "verdict: 1 unexpected" in out, out


@pytest.mark.parametrize("failure, said", [
    ("pass 5: layer 0: the null block changed", "CAUGHT BY ANOTHER FAILURE"),
    (None, "MISSED"),
])
def test_a_plant_is_caught_only_by_the_failure_it_must_cause(tmp_path: Path, failure: str | None, said: str) -> None:
    status, out = judged(tmp_path, lambda log: rewrite(log, "plant_commit_short", lambda c: c.update(failure=failure)))
    assert status == 1 and said in out and "verdict: 1 unexpected" in out, out


def test_a_process_without_its_summary_line_has_no_result(tmp_path: Path) -> None:
    def cut(log: Path) -> None:
        f = log / "triton_f32.jsonl"
        f.write_text("\n".join(f.read_text().splitlines()[:3]) + "\n")  # 3 of 6 campaigns, no summary
    status, out = judged(tmp_path, cut)
    assert status == 1 and "triton_f32             NO RESULT" in out, out


def test_every_plant_of_the_release_campaign_says_what_it_must_fail_with() -> None:
    assert set(verdict.EXPECTED) == set(PLANTS)


def test_the_gpu_script_judges_with_this_verdict() -> None:
    script = (SCRIPTS / "gpu_release_numeric.sh").read_text()
    assert 'python3 "$ROOT/scripts/release_numeric_verdict.py" "$LOG"' in script
    assert "status=${PIPESTATUS[0]}" in script
