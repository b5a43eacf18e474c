"""``docs/ci.md``: its recipe, run as the doc writes it, on a git repository
holding two corpus versions (A1 on ``origin/main``, and a pull request that
plants a one-line bug in its postprocess kernel), gives the exit status of
a finding and its reports: JUnit as ``review --junit`` writes it, SARIF the
2.1.0 schema accepts with the finding on the changed line, and an HTML page
headless Chromium renders (one render), with the finding, its ring diagrams
and nothing loaded from outside. The workflow's review step is the recipe
word for word."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml
from report_checks import colours, render, sarif_errors
from review_corpus import unmodified

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "ci.md"
KERNELS = "vllm/model_executor/layers/mamba/ops/ssu_dispatch.py"
PLANT = ("old_committed + accepted)", "old_committed + 1)")
"""The pull request's change: a window that did not checkpoint grows by one row whatever was accepted."""


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)


def recipe() -> str:
    """The doc's shell recipe (its first ``sh`` block)."""
    return _blocks("sh")[0]


def workflow() -> dict:
    return yaml.safe_load(_blocks("yaml")[0])


def test_the_workflow_runs_the_recipe_word_for_word() -> None:
    steps = workflow()["jobs"]["review"]["steps"]
    review = next(s for s in steps if s.get("name") == "Review the ReplaySSM kernels")
    assert review["run"] == recipe()
    assert workflow()[True]["pull_request"]["paths"] == [KERNELS]  # YAML reads the key 'on' as true
    uploads = [s for s in steps if s.get("uses", "").startswith(("actions/upload-artifact", "github/codeql-action"))]
    assert uploads and all(s.get("if", "").startswith("always()") for s in uploads)
    assert any(s.get("uses", "").startswith("actions/cache") and s["with"]["path"] == ".replayssm-cache"
               for s in steps)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def pull_request(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A vLLM-shaped repository: A1 on ``origin/main``, the planted change on HEAD; the recipe run in it."""
    repo = tmp_path_factory.mktemp("vllm")
    path = repo / KERNELS
    path.parent.mkdir(parents=True)
    a1 = unmodified("A1", tmp_path_factory.mktemp("a1")).read_text()
    path.write_text(a1)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", KERNELS)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "A1")
    _git(repo, "update-ref", "refs/remotes/origin/main", "main")
    _git(repo, "checkout", "-qb", "pull-request")
    assert a1.count(PLANT[0]) == 1
    path.write_text(a1.replace(*PLANT))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "planted")
    changed = [n for n, line in enumerate(path.read_text().splitlines(), 1) if PLANT[1] in line]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "REPLAYSSM_REVIEW_ARGS": "--examples 2", "REPLAYSSM_VERIFY_CACHE": str(repo / ".replayssm-cache")}
    done = subprocess.run(["bash", "-c", recipe()], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return {"repo": repo, "out": repo / "replayssm-report", "changed": changed, "done": done}


@pytest.mark.corpus
def test_the_recipe_finds_the_planted_bug_and_writes_junit(pull_request: dict) -> None:
    done, out = pull_request["done"], pull_request["out"]
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "replayssm-verify review: exit 1" in done.stdout
    document = json.loads((out / "review.json").read_text())
    verdict = document["verdicts"][0]
    # the planted refinement bug, beside A1's own mode-none read past its one-column row (memory)
    assert verdict["status"] == "finding" and {f["property"] for f in verdict["findings"]} <= {"refinement", "memory"}
    assert any(d["kind"] == "regression" and "refinement" in json.dumps(d) for d in verdict["differences"])
    suite = ElementTree.parse(out / "review.xml").getroot().find("testsuite")
    failures = {c.get("name"): c.find("failure") for c in suite.findall("testcase") if c.find("failure") is not None}
    # the lifecycle campaign or a probe meets the planted bug first (the callers' stream decides which)
    assert any(n in ("ssu_dispatch: lifecycle campaign", "ssu_dispatch: kernel proofs")
               or n.startswith("ssu_dispatch: probe without ") for n in failures), failures
    assert any("refinement" in (f.get("message", "") + (f.text or "")) for f in failures.values()), failures


@pytest.mark.corpus
def test_the_sarif_is_valid_and_on_the_changed_line(pull_request: dict) -> None:
    log = json.loads((pull_request["out"] / "review.sarif").read_text())
    assert sarif_errors(log) == []
    results = log["runs"][0]["results"]
    lifecycle = [r for r in results if not r["ruleId"].startswith("kernel.")]
    assert {r["ruleId"] for r in lifecycle} <= {"refinement", "memory"}  # memory: A1's own mode-none finding
    planted = [r for r in lifecycle if r["ruleId"] == "refinement"]
    assert planted  # the regression, and each finding of the planted bug (the campaign's or a probe's)
    for r in planted:
        where = r["locations"][0]["physicalLocation"]
        assert where["artifactLocation"]["uri"] == KERNELS  # the path in the checkout, not the copy at the ref
        assert [where["region"]["startLine"]] == pull_request["changed"]
    # A1's kernel findings (its mode-none read past the row), each on the kernel line its violated part names
    verdict = json.loads((pull_request["out"] / "review.json").read_text())["verdicts"][0]
    kernel = [r for r in results if r["ruleId"].startswith("kernel.")]
    assert kernel and len(kernel) == len(verdict["kernel_findings"])
    text = (pull_request["repo"] / KERNELS).read_text().splitlines()
    for r, kf in zip(kernel, verdict["kernel_findings"]):
        where = r["locations"][0]["physicalLocation"]
        line = int(kf["violated"].split(f" at {Path(KERNELS).name}:")[1].split()[0])
        assert r["ruleId"] == kf["property"].split("@")[0] and where["artifactLocation"]["uri"] == KERNELS
        assert where["region"]["startLine"] == line == kf["location"]["line"] and text[line - 1].strip()


@pytest.mark.corpus
def test_the_html_report_renders_the_finding_and_loads_nothing(pull_request: dict, tmp_path: Path) -> None:
    page = pull_request["out"] / "review.html"
    html = page.read_text()
    assert not re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
    shown = render(page, tmp_path)
    assert shown.page_requests == []
    assert colours(shown.png) > 50, "the screenshot is (almost) blank"
    dom = shown.dom
    sections = html.count('<section class="finding')
    assert sections >= 2  # the lifecycle finding and the regression (and the kernel diff's proved change)
    kernel = json.loads((pull_request["out"] / "review.json").read_text())["verdicts"][0]["kernel_findings"]
    assert all(f"ssu_dispatch: {k['property']} failed (proved" in dom for k in kernel)
    assert "ssu_dispatch: refinement broken" in dom and f"{sections} findings on this page" in dom  # the script ran
    assert f"{KERNELS}:{pull_request['changed'][0]}" in dom and "old_committed + 1)" in dom
    assert dom.count("<svg") >= 4 and 'class="ring-start"' in dom and "committed" in dom
    assert "replayssm-verify replay " in dom and "block_copy_moves_trackers" in dom  # the assumptions table


@pytest.mark.corpus
def test_the_replay_commands_name_files_inside_the_reports(pull_request: dict) -> None:
    """The versions read at the two refs are kept under the traces folder the
    workflow uploads, so each replay command works on the downloaded reports."""
    out, repo = pull_request["out"], pull_request["repo"]
    verdict = json.loads((out / "review.json").read_text())["verdicts"][0]
    replays = [e["replay"] for e in verdict["findings"] + verdict["differences"] if e.get("replay")]
    assert replays
    for command in replays:
        impl = Path(command.split("--impl ")[1].split()[0])
        assert (repo / impl).resolve().is_relative_to((out / "traces").resolve()), command
    head = out / "traces" / "at-HEAD" / Path(KERNELS).name
    assert head.read_text() == (repo / KERNELS).read_text()
