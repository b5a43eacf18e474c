"""``replayssm-verify review``: planted bugs found per generation, replayable traces,
differential classification, the JSON and JUnit reports, and bad input rejected
with exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.etree import ElementTree

import pytest

from replayssm.base import reports
from replayssm.cli import main
from replayssm.review import probes as pr
from replayssm.spec.assumptions import PREFILL_CONTINUATION_LONGER_THAN_ONE
from review_corpus import needs_corpus, unmodified, version_path

PLANT = ("old_committed + accepted)", "old_committed + 1)")
"""The planted bug: a window that did not checkpoint grows by one row whatever was accepted."""


def _planted(label: str, tmp_path: Path) -> Path:
    text = version_path(label).read_text()
    assert text.count(PLANT[0]) == 1
    out = tmp_path / f"{label}_planted.py"
    out.write_text(text.replace(*PLANT))
    return out


def _junit(path: Path) -> dict[str, ElementTree.Element]:
    """The test cases of a JUnit file by name (the file must parse as XML)."""
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "replayssm-verify review"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert int(suite.get("tests")) == len(cases)
    return cases


@needs_corpus
@pytest.mark.parametrize("label", ["A3", "B2", "D3"])
def test_planted_bug_is_found_and_its_trace_replays(label: str, tmp_path: Path, capsys) -> None:
    """A version whose lifecycle campaign finds nothing of its own (C1 and C2
    have none: their mode-none preprocess reads past the one-column row first)."""
    planted = _planted(label, tmp_path)
    report, junit = tmp_path / "review.json", tmp_path / "review.xml"
    code = main(["review", str(planted), "--examples", "24", "--traces", str(tmp_path / "traces"), "--json", str(report),
                 "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 1, out
    document = json.loads(report.read_text())
    assert document["schema"] == "replayssm-review/2"
    verdict = document["verdicts"][0]
    assert verdict["status"] == "finding" and verdict["api"] == label[0]
    trace = verdict["findings"][0]["trace"]
    cases = _junit(junit)  # the campaign fails with the counterexample; the probes ran after it
    failure = cases[f"{label}_planted: lifecycle campaign"].find("failure")
    steps = len(json.loads(Path(trace).read_text())["steps"])
    assert failure is not None and failure.get("message") == verdict["findings"][0]["message"]
    assert f"trace: {trace}" in failure.text and f"step {steps - 1}: req " in failure.text
    assert "conventions: cumulative=" in failure.text
    probes = [c for n, c in cases.items() if ": probe without " in n]
    assert len(probes) == len(pr.probes()) and all(c.find("skipped") is None for c in probes)
    assert main(["replay", trace, "--recorded"]) == 1
    assert "finding reproduced" in capsys.readouterr().out
    assert main(["replay", trace, "--impl", str(version_path(label))]) == 0


@needs_corpus
def test_differential_review_calls_a_regression(tmp_path: Path, capsys) -> None:
    planted = _planted("D2", tmp_path)
    report = tmp_path / "review.json"
    junit = tmp_path / "review.xml"
    code = main(["review", str(planted), "--base", str(version_path("D2")), "--examples", "4",
                 "--traces", str(tmp_path / "traces"), "--json", str(report), "--junit", str(junit)])
    assert code == 1
    # the campaign's (sampled) differences; the kernel roles' proved ones come first (test_kernel_diff_review.py)
    differences = [d for d in json.loads(report.read_text())["verdicts"][0]["differences"] if d["evidence"] == "sampled"]
    kinds = [d["kind"] for d in differences]
    assert kinds[0] == "regression" and kinds[-1] == "neutral"
    failure = _junit(junit)["D2_planted: against the base (differential)"].find("failure")
    assert failure is not None and failure.get("message") == differences[0]["message"]
    assert f"replay: {differences[0]['replay']}" in failure.text and "step 0: req " in failure.text


@pytest.mark.parametrize("argv, message", [
    (["--json", "{tmp}/missing/r.json"], "--json '{tmp}/missing/r.json': the folder"),
    (["--json", "{tmp}"], "--json '{tmp}' is a folder; give a file name"),
    (["--junit", "{tmp}/missing/r.xml"], "--junit '{tmp}/missing/r.xml': the folder"),
    (["--junit", "{tmp}/file/r.xml"], "--junit '{tmp}/file/r.xml': the folder"),
    (["--junit", "-"], "--junit needs a file name (- for standard output is --json's only)"),
    (["--traces", "{tmp}/file"], "--traces '{tmp}/file' is a file, not a folder"),
    (["--sarif", "{tmp}/missing/r.sarif"], "--sarif '{tmp}/missing/r.sarif': the folder"),
    (["--html", "{tmp}"], "--html '{tmp}' is a folder; give a file name"),
])
def test_output_misuse_is_exit_2_before_any_work(argv: list, message: str, tmp_path: Path, capsys) -> None:
    """The output paths are checked before the version is even loaded (this one does not parse)."""
    head = tmp_path / "ssu_dispatch.py"
    head.write_text("def broken(:\n")
    (tmp_path / "file").write_text("")
    assert main(["review", str(head), *[a.format(tmp=tmp_path) for a in argv]]) == 2
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err and "does not parse" not in captured.err, captured
    assert "reviewing" not in captured.out


def test_a_read_only_junit_folder_is_exit_2_before_any_work(tmp_path: Path, monkeypatch, capsys) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the permission bits are read through os.access
        real = os.access
        monkeypatch.setattr(reports.os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode))
    head = tmp_path / "ssu_dispatch.py"
    head.write_text("def broken(:\n")
    assert main(["review", str(head), "--junit", str(folder / "r.xml")]) == 2
    assert "--junit" in (err := capsys.readouterr().err) and "not writable" in err


@needs_corpus
@pytest.mark.parametrize("argv, message", [
    (["--api", "Z"], "--api must be one of"),
    (["--api", "D"], "--api D: the target lacks"),
    (["--budget", "0"], "--budget must be > 0"),
    (["--budget", "nan"], "--budget must be > 0 seconds and finite, got nan"),
    (["--budget", "inf"], "--budget must be > 0 seconds and finite, got inf"),
    (["--examples", "0"], "--examples must be >= 1, got 0"),
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


@pytest.mark.parametrize("name, message", [
    ("absent/ssu_dispatch", "does not exist: a target is a .py file"),
    ("notes.json", "is not a .py or .txt file"),
])
def test_a_path_that_is_no_target_is_named(name: str, message: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.json").write_text("{}")
    assert main(["review", str(tmp_path / name)]) == 2
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
def test_base_and_head_refs_read_the_file_at_two_commits(tmp_path: Path, capsys, monkeypatch) -> None:
    import subprocess

    monkeypatch.setattr(pr, "probes", lambda: [pr.Probe((PREFILL_CONTINUATION_LONGER_THAN_ONE.name,))])  # one probe

    repo = tmp_path / "vllm"
    target = repo / "vllm/model_executor/layers/mamba/ops"
    target.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    for label in ("D1", "D2"):
        (target / "ssu_dispatch.py").write_text(unmodified(label, tmp_path).read_text())
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", label], check=True)
    junit = tmp_path / "review.xml"
    code = main(["review", str(target / "ssu_dispatch.py"), "--base-ref", "HEAD~1", "--head-ref", "HEAD",
                 "--examples", "1", "--traces", str(tmp_path / "traces"), "--json", "-", "--junit", str(junit)])
    captured = capsys.readouterr()  # --json -: the report alone on stdout, the progress on stderr
    document = json.loads(captured.out)
    assert document["schema"] == "replayssm-review/2" and "reviewing ssu_dispatch" in captured.err
    verdict = document["verdicts"][0]
    assert code in (0, 1, 3) and verdict["api"] == "D"
    sampled = [d for d in verdict["differences"] if d["evidence"] == "sampled"]
    assert [d["kind"] for d in sampled if not d.get("assumption")] == ["neutral"]
    assert "regression" not in [d["kind"] for d in sampled]  # both need one-token chunks kept
    cases = _junit(junit)  # a shortfall of --examples 1 is an error, never a failure; a latent probe fails
    assert len(cases) == 3 + len(pr.probes())  # campaign, kernel proofs, differential, the probes
    kernel = cases["ssu_dispatch: kernel proofs"]
    kernel_latent = [x for x in verdict["latent"] if x["trace"] is None]  # proved only under an unguaranteed clause
    assert (kernel.find("failure") is not None) == bool(verdict["kernel_findings"] or kernel_latent)
    assert all(c.find("failure") is None for n, c in cases.items() if ": probe without " not in n and c is not kernel)
    failed = {n.split("probe without ")[1] for n, c in cases.items() if ": probe without " in n
              and c.find("failure") is not None}
    assert failed == {x["assumption"] for x in verdict["latent"] if x["trace"] is not None}
    assert (code == 1) == bool(failed or verdict["kernel_findings"] or kernel_latent)
    assert cases["ssu_dispatch: against the base (differential)"].find("error") is None
    shortfall = cases["ssu_dispatch: lifecycle campaign"].find("error")  # the campaign's, not a probe's
    assert (shortfall is not None) == any(not s.startswith(("probe without", "kernel obligation"))
                                          for s in verdict["coverage_shortfall"])
    assert main(["review", str(target / "ssu_dispatch.py"), "--head-ref", "no-such-ref"]) == 2
