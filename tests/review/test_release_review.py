"""``review --vllm PATH`` and generation P (vLLM 0.33.0's released ring trackers).

The locator finds the ReplaySSM code in all four forms (a source tree, a folder
laid out like one, a wheel built here with zipfile from the corpus files, and
the installed vLLM, found without importing it), says which version and
generation it found, and refuses a vLLM without ReplaySSM code (exit 2). The
review passes the released kernels under the caller the corpus guarantees,
finds the reliance on the accepted counts' row order (async scheduling, vLLM
#53912) and, with teeth, finds each bug planted in a copy of the corpus's
``ssu_dispatch.py`` made at test time, with a trace that replays.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.review import release_campaign as rc
from replayssm.review.vllm_locator import SSU, LocateError, locate
from replayssm.spec import corpus
from replayssm.spec.release_trackers import ReleaseGeometry

pytestmark = pytest.mark.corpus

MTP = ReleaseGeometry(16, 4, 20)


def release() -> Path:
    return corpus.root() / "vllm-0.33.0"


def ssu_text() -> str:
    return (release() / SSU).read_text()


PLANTED = {
    "the commit advances by the written length": (
        "accepted_since_checkpoint + accepted_from_previous_query,",
        "accepted_since_checkpoint + previous_speculative_query_len,"),
    "the ring wraps with a bit mask (R = 20)": (
        "(current_ring_start + accepted_since_checkpoint) % ring_buffer_len,",
        "(current_ring_start + accepted_since_checkpoint) & (ring_buffer_len - 1),"),
    "the commit reads the count by slot": (
        "num_accepted_tokens + offsets, mask=mask, other=0", "num_accepted_tokens + slots, mask=valid, other=0"),
    "the reset leaves the pending query length": ("        tl.store(prev_query_len + slots, 0, mask=valid)\n", ""),
}


def planted_copy(tmp_path: Path, old: str, new: str) -> Path:
    text = ssu_text()
    assert text.count(old) == 1, old
    path = tmp_path / "ssu_dispatch.py"
    path.write_text(text.replace(old, new))
    return path


def build_wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(SSU, ssu_text())
        z.writestr("vllm/__init__.py", "")
        z.writestr("vllm-0.33.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    return wheel


def test_a_source_tree_and_its_package_folder() -> None:
    for place, form in ((release(), "tree"), (release() / "vllm", "package")):
        found = locate(str(place))
        assert (found.form, found.version, found.generation) == (form, "0.33.0", "P")
        assert found.file == release() / SSU


def test_a_folder_laid_out_like_a_tree_takes_its_version_from_version_py(tmp_path: Path) -> None:
    target = tmp_path / "checkout" / SSU
    target.parent.mkdir(parents=True)
    shutil.copy(release() / SSU, target)
    (tmp_path / "checkout" / "vllm" / "version.py").write_text('__version__ = "0.33.0"\n')
    found = locate(str(tmp_path / "checkout"))
    assert (found.version, found.generation) == ("0.33.0", "P")


def test_a_wheel_is_read_as_a_zip(tmp_path: Path) -> None:
    found = locate(str(build_wheel(tmp_path)))
    assert (found.form, found.version, found.generation) == ("wheel", "0.33.0", "P")
    assert found.file.read_text() == ssu_text()


def test_the_installed_vllm_is_found_without_importing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / SSU).parent.mkdir(parents=True)
    shutil.copy(release() / SSU, site / SSU)
    (site / "vllm" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    info = site / "vllm-0.33.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    (info / "RECORD").write_text(f"vllm/__init__.py,,\n{SSU},,\n")
    monkeypatch.syspath_prepend(str(site))
    found = locate("installed")
    assert (found.form, found.version, found.generation, found.file) == ("installed", "0.33.0", "P", site / SSU)


def test_a_vllm_without_replayssm_code_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "vllm" / "model_executor").mkdir(parents=True)
    with pytest.raises(LocateError, match="no ReplaySSM code"):
        locate(str(tmp_path))
    assert main(["review", "--vllm", str(tmp_path)]) == 2
    assert "no ReplaySSM code in this vLLM" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["review", "--vllm", "/nonexistent/vllm"], "no such file or folder"),
    (["review", "x.py", "--vllm", "/nonexistent/vllm"], "give no HEAD besides it"),
    (["review", "--vllm", "/nonexistent/vllm", "--api", "A"], "--vllm does not take --api"),
    (["review"], "give HEAD"),
])
def test_bad_input_exits_2_before_any_work(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_release_is_latent_on_the_accepted_counts_row_order_and_a_wheel_gives_the_same_verdict(
        tmp_path: Path) -> None:
    documents = []
    for place in (str(release()), str(build_wheel(tmp_path))):
        report = tmp_path / f"{len(documents)}.json"
        assert main(["review", "--vllm", place, "--examples", "40", "--traces", str(tmp_path / "traces"),
                     "--json", str(report)]) == 1
        documents.append(json.loads(report.read_text()))
    keep = ("version", "generation", "verdict", "relies_on")
    assert [{k: d[k] for k in keep} for d in documents] == [{
        "version": "0.33.0", "generation": "P", "verdict": "latent",
        "relies_on": ["p_async_accepted_reach_next_step_by_row (not guaranteed)"]}] * 2
    campaigns = [p for p in documents[0]["parts"] if p["kind"] == "campaign"]
    assert len(campaigns) == 3 and all(p["status"] == "pass" for p in campaigns)
    assert [p["status"] for p in documents[0]["parts"] if p["kind"] == "kernel proof"] == ["pass"] * 6


def test_a_host_that_reorders_accepted_counts_is_a_finding_whose_trace_replays() -> None:
    file = str(release() / SSU)
    run = rc.campaign(file, MTP, "previous_rows", 0, 40)
    assert run.finding is not None and run.finding.kind == "refinement"
    trace = json.loads(json.dumps(run.trace("0.33.0")))
    again = rc.replay(trace, file)
    assert again is not None and again.message == run.finding.message
    assert rc.campaign(file, MTP, "current_rows", 0, 40).finding is None


@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_bug_planted_in_a_copy_of_the_release_is_a_finding_with_a_replayable_trace(bug: str, tmp_path: Path) -> None:
    copy = planted_copy(tmp_path, *PLANTED[bug])
    run = rc.campaign(str(copy), MTP, "current_rows", 0, 60)
    assert run.finding is not None, bug
    again = rc.replay(json.loads(json.dumps(run.trace("planted"))), str(copy))
    # the same launch fails again (a count read past its tensor differs from run to run in value only)
    assert again is not None and (again.pass_index, again.launch_index, again.kind) == (
        run.finding.pass_index, run.finding.launch_index, run.finding.kind)
    assert rc.replay(json.loads(json.dumps(run.trace("0.33.0"))), str(release() / SSU)) is None


ASYNC_TRACE = Path(__file__).resolve().parents[2] / "docs" / "traces" / "0.33.0-async-accepted-counts.release-trace.json"


def test_the_async_scheduling_trace_is_explained(capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", str(ASYNC_TRACE)]) == 0
    text = capsys.readouterr().out
    assert "finding (refinement) at pass 12" in text and "another row's count" in text
    assert "async scheduling, vLLM #53912" in text


def test_the_async_scheduling_trace_replays_on_the_release(capsys: pytest.CaptureFixture) -> None:
    assert main(["replay", str(ASYNC_TRACE), "--recorded"]) == 1
    assert "reproduced: pass 12: req7 (slot 2)" in capsys.readouterr().out


def test_a_release_trace_of_an_unknown_major_is_refused(tmp_path: Path) -> None:
    from replayssm.base.traces import load_trace

    trace = json.loads(ASYNC_TRACE.read_text())
    assert load_trace(ASYNC_TRACE).kind == "release"
    trace["#meta"]["format"] = "replayssm-release-trace/9"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(trace))
    with pytest.raises(ValueError, match="not supported for a release trace"):
        load_trace(bad)


def test_the_release_kernels_are_proved_from_their_source() -> None:
    from replayssm.verify.kernels.tracker_proofs import prove_kernels
    from replayssm.verify.kernels.source_module import source_module

    proofs = prove_kernels(source_module(str(release() / SSU), "--vllm"))
    assert len(proofs) == 6 and all(p.result.status == "proved" for p in proofs), [
        (p.transition, p.property, p.result.status, p.result.detail) for p in proofs]


@pytest.mark.parametrize("bug, transition, status", [
    ("the commit advances by the written length", "commit", "failed"),
    ("the commit reads the count by slot", "commit", "failed"),
    ("the reset leaves the pending query length", "reset", "failed"),
    ("the ring wraps with a bit mask (R = 20)", "commit", "failed"),  # ring_start differs from the spec's
])
def test_a_planted_kernel_fails_its_source_proof(bug: str, transition: str, status: str, tmp_path: Path) -> None:
    from replayssm.verify.kernels.tracker_proofs import prove_kernels
    from replayssm.verify.kernels.source_module import source_module

    proofs = prove_kernels(source_module(str(planted_copy(tmp_path, *PLANTED[bug])), "--vllm"))
    mine = [p.result.status for p in proofs if p.transition == transition]
    assert status in mine and "proved" not in mine[:1], mine
    assert all(p.result.status == "proved" for p in proofs if p.transition != transition)


def test_base_compares_the_kernels_by_proof(tmp_path: Path) -> None:
    from replayssm.verify.kernels.tracker_proofs import diff_kernels
    from replayssm.verify.kernels.source_module import source_module

    release_module = source_module(str(release() / SSU), "--vllm")
    assert [p.result.status for p in diff_kernels(release_module, release_module)] == ["proved"] * 3
    planted = source_module(str(planted_copy(tmp_path, *PLANTED["the commit advances by the written length"])),
                            "--base")
    diff = {p.transition: p.result for p in diff_kernels(planted, release_module)}
    assert diff["commit"].status == "failed" and diff["commit"].counterexample["violated"] == [
        "prev_num_accepted[any_slot] as the base leaves it"]
    assert diff["reset"].status == diff["advance"].status == "proved"


def test_base_of_another_generation_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    other = tmp_path / "ssu_dispatch.py"
    other.write_text("x = 1\n")
    assert main(["review", "--vllm", str(release()), "--base", str(other), "--examples", "1"]) == 2
    assert "not a generation-P ssu_dispatch.py" in capsys.readouterr().err


def test_a_worker_side_lifecycle_is_handed_to_review_as_its_file(tmp_path: Path) -> None:
    """A vLLM whose ReplaySSM code is the worker-side lifecycle (generations A-D) is reviewed as
    ``review FILE`` reviews that file: ``--vllm`` puts the file in HEAD and lets the review go on."""
    import argparse

    from replayssm.review.command import add_arguments
    from replayssm.review.release_review import run_vllm
    from replayssm.review.vllm_locator import WORKER

    (tmp_path / WORKER).parent.mkdir(parents=True)
    shutil.copy(corpus.versions() / "A3.py", tmp_path / WORKER)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--vllm", str(tmp_path), "--traces", str(tmp_path / "traces")])
    assert locate(str(tmp_path)).generation == "worker"
    assert run_vllm(args) == -1 and args.head == [str(tmp_path / WORKER)]


@pytest.mark.parametrize("given, passes", [([], "DEFAULT_PASSES"), (["--examples", "5"], 5)])
def test_the_release_runs_its_default_forward_passes_unless_examples_is_given(
        given: list[str], passes: int | str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--examples`` defaults to the corpus review's count; ``--vllm`` without it runs its own default."""
    from replayssm.review import release_review

    asked: list[int] = []

    def stop(located: object, n: int, *rest: object, **kw: object) -> None:
        asked.append(n)
        raise SystemExit(0)

    monkeypatch.setattr(release_review, "review_release", stop)
    with pytest.raises(SystemExit):
        main(["review", "--vllm", str(release()), "--traces", str(tmp_path), *given])
    assert asked == [release_review.DEFAULT_PASSES if passes == "DEFAULT_PASSES" else passes]


@pytest.mark.parametrize("kernel_status, verdict", [("pass", "pass"), ("unknown", "coverage shortfall"),
                                                    ("finding", "finding")])
def test_a_tracker_kernel_proof_not_decided_is_a_coverage_shortfall(kernel_status: str, verdict: str) -> None:
    """A tracker kernel whose proof ends unknown leaves the release not decided (exit 3), never a pass."""
    from replayssm.review.release_review import ReleaseVerdict, ReviewPart

    v = ReleaseVerdict(locate(str(release())), [ReviewPart("campaign mtp", "campaign", "pass", "", 1.0),
                                                ReviewPart("kernel proof commit", "kernel proof", kernel_status, "", 1.0)])
    assert v.status == verdict
