"""``review --repo PATH --base REF --head REF``: the pull-request check, end to end on a local git
repository whose commits are corpus versions (A1, then A3: the comment names A3's fix; A3, then A4:
no false regression), its bad
input (exit 2 before any review), the comment's escaping, and the GitHub Actions workflow in
``docs/ci/`` (CPU only, path-filtered, non-blocking, silenced by a label, one comment)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from review_corpus import needs_corpus, version_path

from replayssm.cli import main
from replayssm.review.pr_check import FileResult, PrResult, changed_files, code, escape, markdown

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "replayssm-pr-check.yml"
KERNELS = "vllm/model_executor/layers/mamba/ops/ssu_dispatch.py"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _repo(tmp_path: Path, *commits: tuple[str, dict[str, str]]) -> tuple[Path, list[str]]:
    """A git repository with one commit per ``(message, {path: text})``; the commits' ids."""
    repo = tmp_path / "vllm"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    ids = []
    for message, files in commits:
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message)
        ids.append(_git(repo, "rev-parse", "HEAD"))
    return repo, ids


@needs_corpus
def test_a1_then_a3_the_comment_names_a3s_fix_and_no_regression(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    repo, (a1, a3) = _repo(tmp_path, ("A1", {KERNELS: version_path("A1").read_text(), "README": "x"}),
                           ("A3", {KERNELS: version_path("A3").read_text()}))
    comment, doc = tmp_path / "comment.md", tmp_path / "pr.json"
    status = main(["review", "--repo", str(repo), "--base", a1, "--head", a3, "--examples", "4",
                   "--traces", str(tmp_path / "traces"), "--markdown", str(comment), "--json", str(doc)])
    text = comment.read_text()
    assert status == 0, text
    assert "**Verdict: no regression, no finding**" in text
    assert "#### Fixes" in text and "#### Regressions" not in text
    fixes = text.split("#### Fixes", 1)[1].split("####", 1)[0]
    assert "**memory**" in fixes and "replayssm-verify replay" in fixes and "at-" in fixes
    assert "1 ReplaySSM kernel file(s) changed" in capsys.readouterr().out


@needs_corpus
def test_a3_then_a4_no_false_regression(tmp_path: Path) -> None:
    """A4 adds the ``query_len > 0`` and executed-width fixes; under generation A's own launch contract
    (mode none launched with ``LIVE_COL_IS_ZERO``) it breaks nothing A3 did not: no regression."""
    repo, (a3, a4) = _repo(tmp_path, ("A3", {KERNELS: version_path("A3").read_text()}),
                           ("A4", {KERNELS: version_path("A4").read_text()}))
    comment = tmp_path / "comment.md"
    status = main(["review", "--repo", str(repo), "--base", a3, "--head", a4, "--examples", "4",
                   "--traces", str(tmp_path / "traces"), "--markdown", str(comment)])
    text = comment.read_text()
    assert status == 0 and "**Verdict: no regression, no finding**" in text, text
    assert "#### Regressions" not in text and "| 0 |" in text


def test_no_replayssm_change_is_a_pass_with_a_comment_that_says_so(tmp_path: Path) -> None:
    repo, (c1, c2) = _repo(tmp_path, ("one", {"README": "x", KERNELS: "x = 1\n"}), ("two", {"README": "y"}))
    comment = tmp_path / "c.md"
    assert main(["review", "--repo", str(repo), "--base", c1, "--head", c2, "--markdown", str(comment)]) == 0
    assert "No ReplaySSM kernel file changed" in comment.read_text()


def test_changed_files_splits_the_kernel_file_from_other_replayssm_files(tmp_path: Path) -> None:
    repo, (c1, c2) = _repo(tmp_path, ("one", {KERNELS: "a\n", "vllm/v1/worker/gpu_model_runner.py": "a\n",
                                              "vllm/v1/attention/backends/mamba_attn.py": "a\n"}),
                           ("two", {KERNELS: "b\n", "vllm/v1/worker/gpu_model_runner.py": "b\n",
                                    "vllm/v1/attention/backends/mamba_attn.py": "b\n"}))
    assert changed_files(repo, c1, c2) == ([KERNELS], ["vllm/v1/attention/backends/mamba_attn.py"])


@pytest.mark.parametrize("argv, message", [
    (["--repo", "{tmp}/nowhere", "--base", "HEAD", "--head", "HEAD"], "is not a git checkout"),
    (["--repo", "{repo}", "--base", "no-such-ref", "--head", "HEAD"], "--base 'no-such-ref' is not a commit"),
    (["--repo", "{repo}", "--base", "HEAD", "--head=--output=x"], "--head '--output=x' is not a commit"),
    (["--repo", "{repo}", "--base", "HEAD"], "--repo needs --base REF and --head REF"),
    (["some.py", "--repo", "{repo}", "--base", "HEAD", "--head", "HEAD"], "give no HEAD files"),
    (["--repo", "{repo}", "--base", "HEAD", "--head", "HEAD", "--sarif", "x.sarif"], "--repo takes"),
    (["some.py", "--markdown", "c.md"], "--markdown needs --repo PATH"),
    ([], "give HEAD (the versions to review), or --repo PATH"),
])
def test_bad_input_exits_2_naming_the_option_before_any_review(argv: list[str], message: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    repo, _ = _repo(tmp_path, ("one", {"README": "x"}))
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{repo}", str(repo)) for a in argv]
    assert main(["review", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "reviewing" not in captured.out


def test_the_comment_escapes_names_and_messages() -> None:
    hostile = FileResult("vllm/a|b`c.py", {"verdicts": [{"status": "finding", "findings": [
        {"property": "memory", "message": "one <script> | **bold**\nsecond line", "replay": "replayssm-verify replay 'x`y'"}],
        "differences": []}]})
    text = markdown(PrResult("main", "pr", [hostile]), None)
    assert "<script>" not in text and "second line" not in text and "\\| \\*\\*bold\\*\\*" in text
    assert "| `` vllm/a\\|b`c.py `` |" in text and "``` replayssm-verify replay 'x`y' ```" not in text
    assert code("a`b") == "`` a`b ``" and code("plain") == "`plain`" and escape("a|b") == "a\\|b"


def test_teeth_a_regression_makes_the_verdict_a_finding() -> None:
    regressed = FileResult(KERNELS, {"verdicts": [{"status": "finding", "findings": [], "differences": [
        {"kind": "regression", "property": "refinement", "message": "head breaks refinement; base does not"}]}]})
    result = PrResult("main", "pr", [regressed])
    text = markdown(result, "https://example.invalid/run/1")
    assert result.failed and "**Verdict: finding**" in text and "#### Regressions" in text
    assert "| 1 | 0 |" in text and "Full report: https://example.invalid/run/1" in text


def test_the_workflow_is_cpu_only_path_filtered_non_blocking_silenced_by_a_label_and_comments_once() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    paths = flow[True]["pull_request"]["paths"]  # YAML reads the key 'on' as true
    assert KERNELS in paths and "vllm/v1/worker/*mamba*" in paths
    job = flow["jobs"]["replayssm"]
    assert job["runs-on"] == "ubuntu-latest" and job["continue-on-error"] is True
    assert "replayssm-skip" in job["if"] and "labeled" in flow[True]["pull_request"]["types"]
    review = next(s for s in job["steps"] if s.get("name", "").startswith("Review"))
    assert "replayssm-verify review --repo . --base" in review["run"] and "--markdown" in review["run"]
    assert "cuda" not in WORKFLOW.read_text()
    comment = next(s for s in job["steps"] if "comment" in s.get("name", "").lower())
    assert "--edit-last" in comment["run"] and comment["if"].startswith("always()")
    checkout = job["steps"][0]
    assert checkout["uses"].startswith("actions/checkout") and checkout["with"]["fetch-depth"] == 0, \
        "the base ref must be fetched for the review of base against head"
