"""``replayssm-verify review``: planted bugs found per generation, replayable traces,
differential classification, and bad input rejected with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.cli import main
from review_corpus import needs_corpus, unmodified, version_path

PLANT = ("old_committed + accepted)", "old_committed + 1)")
"""The planted bug: a window that did not checkpoint grows by one row whatever was accepted."""


def _planted(label: str, tmp_path: Path) -> Path:
    text = version_path(label).read_text()
    assert text.count(PLANT[0]) == 1
    out = tmp_path / f"{label}_planted.py"
    out.write_text(text.replace(*PLANT))
    return out


@needs_corpus
@pytest.mark.parametrize("label", ["A1", "B2", "C2", "D3"])
def test_planted_bug_is_found_and_its_trace_replays(label: str, tmp_path: Path, capsys) -> None:
    planted = _planted(label, tmp_path)
    report = tmp_path / "review.json"
    code = main(["review", str(planted), "--examples", "8", "--traces", str(tmp_path / "traces"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 1, out
    verdict = json.loads(report.read_text())["verdicts"][0]
    assert verdict["status"] == "finding" and verdict["api"] == label[0]
    trace = verdict["findings"][0]["trace"]
    assert main(["replay", trace]) == 1
    assert "finding reproduced" in capsys.readouterr().out
    assert main(["replay", trace, "--impl", str(version_path(label))]) == 0


@needs_corpus
def test_differential_review_calls_a_regression(tmp_path: Path, capsys) -> None:
    planted = _planted("D2", tmp_path)
    report = tmp_path / "review.json"
    code = main(["review", str(planted), "--base", str(version_path("D2")), "--examples", "4",
                 "--traces", str(tmp_path / "traces"), "--json", str(report)])
    assert code == 1
    kinds = [d["kind"] for d in json.loads(report.read_text())["verdicts"][0]["differences"]]
    assert kinds[0] == "regression" and kinds[-1] == "neutral"


@needs_corpus
@pytest.mark.parametrize("argv, message", [
    (["--api", "Z"], "--api must be one of"),
    (["--api", "D"], "--api D: the target lacks"),
    (["--budget", "0"], "--budget must be > 0"),
])
def test_bad_options_exit_2(argv: list, message: str, capsys) -> None:
    assert main(["review", str(version_path("A1")), *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("def broken(:\n", "does not parse: line 1"),
    ("import torch\n", "missing kernels"),
    ("from vllm.v1.attention.backends.utils import NOT_A_NAME\n", "NOT_A_NAME"),
])
def test_bad_files_exit_2(text: str, message: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "ssu_dispatch.py"
    path.write_text(text)
    assert main(["review", str(path)]) == 2
    assert message in capsys.readouterr().err


@needs_corpus
def test_unknown_signature_is_named(tmp_path: Path, capsys) -> None:
    """A kernel parameter no caller of the detected API provides stops the review, naming it."""
    path = unmodified("D2", tmp_path)
    text = path.read_text().replace("    HAS_IDX_MAPPING: tl.constexpr,\n) -> None:",
                                    "    HAS_IDX_MAPPING: tl.constexpr,\n    NEW_FLAG: tl.constexpr,\n) -> None:")
    path.write_text(text)
    assert main(["review", str(path), "--budget", "1", "--traces", str(tmp_path)]) == 2
    assert "unknown signature" in (err := capsys.readouterr().err) and "NEW_FLAG" in err


@needs_corpus
def test_base_and_head_refs_read_the_file_at_two_commits(tmp_path: Path) -> None:
    import subprocess

    repo = tmp_path / "vllm"
    target = repo / "vllm/model_executor/layers/mamba/ops"
    target.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    for label in ("D1", "D2"):
        (target / "ssu_dispatch.py").write_text(unmodified(label, tmp_path).read_text())
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", label], check=True)
    report = tmp_path / "review.json"
    code = main(["review", str(target / "ssu_dispatch.py"), "--base-ref", "HEAD~1", "--head-ref", "HEAD",
                 "--examples", "1", "--traces", str(tmp_path / "traces"), "--json", str(report)])
    verdict = json.loads(report.read_text())["verdicts"][0]
    assert code in (0, 3) and verdict["api"] == "D"
    assert [d["kind"] for d in verdict["differences"]] == ["neutral"]
    assert main(["review", str(target / "ssu_dispatch.py"), "--head-ref", "no-such-ref"]) == 2
