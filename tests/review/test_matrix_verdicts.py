"""``review --matrix``: a cell's verdict is the review's, never a pass where the evidence did not finish.

Each cell is judged as ``review`` judges a version (``review/verdicts.py``):
a probe not finished, a lifecycle campaign cut by ``--budget`` or with no
system to draw, and a proof that ends ``unknown`` are a ``coverage
shortfall`` (exit 3), not a pass (exit 0) and not a finding (exit 1); a
kernel finding whose launch cannot be read lies in every cell, not in none;
a failure whose impact nobody reads is said in the cell, and a finding with
``--strict`` or when it is read; a file name cannot forge a row of the text
table (its newlines and escapes shown escaped). The campaigns, probes and proofs are
stand-ins here (what they return is what is judged); the cells of real
campaigns are in ``test_matrix.py``.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replayssm.base.reports import EXIT_COVERAGE, EXIT_FINDING, EXIT_PASSED
from replayssm.review import campaign as campaigns
from replayssm.review import matrix_corpus as mc
from replayssm.review import matrix_release as mr
from replayssm.review import probes as probe_module
from replayssm.review import release_review
from replayssm.review.campaign import CampaignOutcome, Failure, Tally, Version
from replayssm.review.matrix import FINDING, PASS, SHORTFALL, MatrixCell, Matrix, cells_of
from replayssm.review.matrix_command import exit_status
from replayssm.review.release_campaign import Run
from replayssm.review.vllm_locator import SSU
from replayssm.spec import corpus
from replayssm.spec.generations import registry
from replayssm.verify import runner

pytestmark = pytest.mark.corpus

CONFIG = {"cache mode": "align", "speculative tokens": "k", "cache groups": "1", "runner": "V2"}


def a1() -> Version:
    return Version("A1", str(corpus.versions() / "A1.py"), None, registry()["A"])


def args(strict: bool = False) -> argparse.Namespace:
    return argparse.Namespace(budget=600.0, seed=0, device="cpu", strict=strict)


def stand_ins(monkeypatch: pytest.MonkeyPatch, lifecycle: CampaignOutcome, probe_outcome: str,
              impact: dict[str, Any] | None = None) -> None:
    """The cell's lifecycle campaign returns ``lifecycle``; each probe says ``probe_outcome``; a failure's
    impact is ``impact``."""
    monkeypatch.setattr(campaigns, "campaign", lambda *a, **k: lifecycle)

    def run_probe(probe, v, **kw):
        summary = {"outcome": probe_outcome, "why": "broke it in 1 step(s) < 3 within its share of 2.0 s"}
        return summary, CampaignOutcome(Tally(examples=kw["examples"], broken_steps=1), 0.1), None
    monkeypatch.setattr(probe_module, "run_probe", run_probe)
    monkeypatch.setattr(mc, "_impact", lambda trace, v, device: impact)


def filled(strict: bool = False) -> MatrixCell:
    cell = MatrixCell(dict(CONFIG))
    mc.fill_cell(a1(), cell, args(strict), 4, Path("unused"), io.StringIO())
    return cell


def matrix_of(*cells: MatrixCell) -> Matrix:
    return Matrix("A1", "A1.py", "A", 0, 4, [], cells=list(cells))


def test_a_probe_not_finished_is_a_coverage_shortfall_and_exit_3_where_a_finished_one_passes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stand_ins(monkeypatch, CampaignOutcome(Tally(examples=4), 1.0), "not finished")
    short = filled()
    assert short.status == SHORTFALL and "not finished" in short.detail and short.not_finished
    assert exit_status(matrix_of(short)) == EXIT_COVERAGE
    stand_ins(monkeypatch, CampaignOutcome(Tally(examples=4), 1.0), "no counterexample")  # the same, finished
    held = filled()
    assert held.status == PASS and held.detail.startswith("every property held")
    assert exit_status(matrix_of(held)) == EXIT_PASSED
    assert matrix_of(held, short).status == SHORTFALL  # a shortfall is graver than a pass ...
    worse = MatrixCell(dict(CONFIG))
    worse.worsen(FINDING, "memory")
    assert matrix_of(short, worse).status == FINDING and exit_status(matrix_of(short, worse)) == EXIT_FINDING


@pytest.mark.parametrize("lifecycle, said", [
    (CampaignOutcome(Tally(examples=0), 0.0), "drew no system"),
    (CampaignOutcome(Tally(examples=2), 600.0, cut=True), "ran 2 of 4 examples"),
])
def test_a_lifecycle_campaign_cut_or_with_nothing_to_draw_is_a_coverage_shortfall(
        monkeypatch: pytest.MonkeyPatch, lifecycle: CampaignOutcome, said: str) -> None:
    stand_ins(monkeypatch, lifecycle, "no counterexample")
    cell = filled()
    assert cell.status == SHORTFALL and said in cell.detail


def test_a_lifecycle_failure_nobody_reads_is_said_in_the_cell_and_one_read_is_a_finding(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    failed = CampaignOutcome(Tally(examples=4), 1.0, [Failure("finding", "frame", "frame: slot 0 written",
                                                              str(tmp_path / "t.json"), True)])
    stand_ins(monkeypatch, failed, "no counterexample", {"read": False, "whose": "the null block"})
    note = filled()
    assert note.status == PASS and "the null block, nobody reads it" in note.detail and note.traces
    assert filled(strict=True).status == FINDING  # --strict: notes are findings, as in review
    stand_ins(monkeypatch, failed, "no counterexample", {"read": True, "whose": "another request"})
    assert filled().status == FINDING  # the same failure, read: a finding
    stand_ins(monkeypatch, failed, "no counterexample", None)
    assert filled().status == FINDING  # no impact derived: a finding


def _kernel_finding(tmp_path: Path, impact: dict[str, Any] | None = None, readable: bool = True) -> dict[str, Any]:
    path = tmp_path / "kernel.json"
    if readable:
        path.write_text(json.dumps({"params": {
            "geometry": {"max_num_reqs": 2, "block_size": 4, "window": 4, "ring_len": 8, "pad_slot": 0},
            "conventions": {"cumulative": True, "post_step": True, "has_idx_mapping": True,
                            "materialize_prefixes": False, "live_col_is_zero": True},
            "layers_per_group": [1]}, "actions": []}))
    return {"property": "kernel.A.postprocess.frame@A1", "violated": "a store", "trace": str(path),
            "replay": f"replayssm-verify replay {path}", "impact": impact}


def test_a_kernel_finding_whose_launch_cannot_be_read_lies_in_every_cell(tmp_path: Path) -> None:
    cells = cells_of(mc.dimensions(a1()))
    mc.place_kernel_findings(a1(), cells, [_kernel_finding(tmp_path, readable=False)])
    assert all(c.status == FINDING and "cannot be read" in c.detail for c in cells)
    placed = cells_of(mc.dimensions(a1()))  # the same finding, readable: only where its variant is launched
    mc.place_kernel_findings(a1(), placed, [_kernel_finding(tmp_path)])
    hit = [c for c in placed if c.status == FINDING]
    assert hit and len(hit) < len(placed)


def test_a_kernel_finding_nobody_reads_is_said_and_one_read_is_a_finding(tmp_path: Path) -> None:
    unread, read = cells_of(mc.dimensions(a1())), cells_of(mc.dimensions(a1()))
    mc.place_kernel_findings(a1(), unread, [_kernel_finding(tmp_path, {"read": False, "whose": "the null block"})])
    assert all(c.status == PASS for c in unread) and any("nobody reads it" in c.detail for c in unread)
    mc.place_kernel_findings(a1(), read, [_kernel_finding(tmp_path, {"read": True, "whose": "another request"})])
    assert any(c.status == FINDING for c in read)
    strict = cells_of(mc.dimensions(a1()))
    mc.place_kernel_findings(a1(), strict, [_kernel_finding(tmp_path, {"read": False, "whose": "the null block"})],
                             strict=True)
    assert {c.status for c in strict} == {c.status for c in read}


def release_cells(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kernel: str, cursor: str,
                  tree: Path | None = None) -> list[MatrixCell]:
    """The release matrix of the vLLM ``tree`` (default: 0.33.0 in the corpus) with its campaigns passing, one
    tracker kernel proof (commit's) ending ``kernel`` and the Triton cursor's proof ``cursor``."""
    monkeypatch.setattr(mr, "campaign", lambda file, geo, order, seed, passes: Run(geo, order, seed, passes, 6))
    part = release_review.ReviewPart("kernel proof k (commit): equivalence", "kernel proof", kernel, "why", 0.0)
    monkeypatch.setattr(release_review, "kernel_parts", lambda located, out: [part])
    monkeypatch.setattr(runner, "prove_named", lambda name: SimpleNamespace(status=cursor))
    located = SimpleNamespace(version="0.33.0", file=(tree or corpus.root() / "vllm-0.33.0") / SSU,
                              generation="P")
    return mr.release_matrix(located, args(), 4, tmp_path, io.StringIO()).cells  # type: ignore[arg-type]


def _by(cells: list[MatrixCell], status: str) -> set[tuple[str, ...]]:
    return {tuple(c.config.values()) for c in cells if c.status == status}


def test_an_unknown_release_proof_is_a_coverage_shortfall_where_its_role_runs_and_a_failed_one_a_finding(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    proved = release_cells(monkeypatch, tmp_path, "pass", "proved")
    assert not _by(proved, FINDING) and not _by(proved, SHORTFALL) and _by(proved, PASS)
    unknown = release_cells(monkeypatch, tmp_path, "unknown", "unknown")
    assert not _by(unknown, FINDING) and _by(unknown, SHORTFALL)
    assert _by(unknown, SHORTFALL) | _by(unknown, PASS) == _by(proved, PASS)
    failed = release_cells(monkeypatch, tmp_path, "finding", "failed")  # the same proofs failed: the same cells
    assert _by(failed, FINDING) == _by(unknown, SHORTFALL)
    commit = release_cells(monkeypatch, tmp_path, "unknown", "proved")  # only the cells that commit
    assert _by(commit, SHORTFALL) and _by(commit, SHORTFALL) <= {c for c in _by(proved, PASS) if c[1] == "3"}


def test_a_file_name_with_a_newline_or_escape_cannot_forge_a_row_of_the_matrix_table() -> None:
    from replayssm.review.matrix import Dimension, text

    label = "A1\nnone    0     1       V1      pass  forged\x1b[2J"
    m = Matrix(label, f"{label}.py", "A", 0, 4, [Dimension("cache mode", "mode", ("none",), True, "why")],
               cells=[MatrixCell({"cache mode": "none"})])
    m.cells[0].worsen(FINDING, "memory", f"out/review-{label}-none-seed1.json", "replayssm-verify replay x")
    for wide in (False, True):
        lines = text(m, wide=wide).splitlines()
        assert not any(line.startswith("none    0") for line in lines) and "\x1b" not in "".join(lines)
        assert any("\\x0a" in line and "\\x1b[2J" in line for line in lines)  # shown, escaped


@pytest.mark.parametrize("result, status, said", [
    ({"status": "proved", "relies_on": ["query_start_loc_non_decreasing"]}, "latent", "relies on"),
    ({"status": "unknown"}, SHORTFALL, "unknown"),
    ({"status": "failed", "replayed": "no small launch"}, SHORTFALL, "no small launch on the real kernel"),
    ({"status": "failed", "replayed": "not reproduced"}, SHORTFALL, "not reproduced"),
])
def test_a_kernel_proof_neither_proved_nor_a_finding_is_latent_or_a_shortfall_in_every_cell(
        result: dict[str, Any], status: str, said: str) -> None:
    cells = cells_of(mc.dimensions(a1()))
    mc.place_unproved(cells, {"results": [{"obligation": "kernel.D.postprocess.int32@D1", "case": "c", **result}]})
    assert all(c.status == status and said in c.detail for c in cells)
    for fine in ({"status": "proved"}, {"status": "failed", "replayed": "reproduced"}):  # proved; a finding (placed
        kept = cells_of(mc.dimensions(a1()))                                                # by its launch): no word
        mc.place_unproved(kept, {"results": [{"obligation": "kernel.D.postprocess.int32@D1", "case": "c", **fine}]})
        assert all(c.status == PASS and not c.detail for c in kept)


def test_the_matrix_of_a_version_whose_kernel_proof_relies_on_an_unguaranteed_clause_is_latent(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from replayssm.review import kernel_proofs

    doc = {"applies": True, "api": "A", "roles": [], "seconds": 1.0, "command": "prove --kernels",
           "results": [{"obligation": "kernel.A.postprocess.int32@A1", "status": "proved", "cases": 1, "case": None,
                        "violated": None, "relies_on": ["a_clause"]}]}
    monkeypatch.setattr(kernel_proofs, "kernel_proofs", lambda *a: doc)
    monkeypatch.setattr(mc, "fill_cell", lambda *a: None)  # every campaign and probe held
    v = Version("A1", str(corpus.versions() / "A1.py"), None, registry()["A"], kernels=object())  # type: ignore[arg-type]
    m = mc.corpus_matrix(v, args(), 4, tmp_path, io.StringIO())
    assert m.status == "latent" and exit_status(m) == EXIT_FINDING
    doc["results"][0].pop("relies_on")  # proved outright: the matrix passes
    assert mc.corpus_matrix(v, args(), 4, tmp_path, io.StringIO()).status == PASS


def test_a_triton_cell_rests_on_the_spec_of_0_33_0_only_where_this_vllms_files_hold_its_evidence(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    tree = tmp_path / "vllm-copy"
    shutil.copytree(corpus.root() / "vllm-0.33.0", tree)
    held = release_cells(monkeypatch, tmp_path, "pass", "proved", tree)
    assert not _by(held, SHORTFALL) and _by(held, PASS)  # a copy of 0.33.0: its evidence holds
    batch = tree / "vllm" / "v1" / "worker" / "gpu_input_batch.py"
    text = batch.read_text()
    anchor = "self.replayssm_decode_base[req_index] = request.num_tokens"
    assert text.count(anchor) == 1
    batch.write_text(text.replace(anchor, "self.replayssm_decode_base[req_index] = request.num_prompt_tokens"))
    moved = release_cells(monkeypatch, tmp_path, "pass", "proved", tree)  # its anchor is no longer 0.33.0's
    triton = {tuple(c.config.values()) for c in held if mr._refusal(c.config, "triton") is None}
    assert triton and _by(moved, SHORTFALL) == triton  # the cells Triton runs, and only those
    assert all("not shown to be this vLLM's" in c.detail for c in moved if c.status == SHORTFALL)


def test_a_matrix_whose_every_configuration_vllm_refuses_judged_nothing_a_shortfall_and_exit_3(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """vLLM refusing every cell leaves nothing judged: a coverage shortfall (exit 3), said in every
    written form, not a pass (exit 0; before: ``pass``). Teeth: the same refused cells beside one
    judged cell that passes still pass (exit 0), and beside a finding are a finding."""
    from replayssm.cli import main
    from replayssm.review import matrix_command
    from replayssm.review.matrix import REFUSED, markdown, text

    def refused() -> MatrixCell:
        return MatrixCell(dict(CONFIG), status=REFUSED)

    nothing = matrix_of(refused(), refused())
    assert nothing.status == SHORTFALL and exit_status(nothing) == EXIT_COVERAGE
    assert "no configuration was judged" in text(nothing) and "no configuration was judged" in markdown(nothing)
    assert matrix_of().status == SHORTFALL  # no cell at all: nothing judged either
    monkeypatch.setattr(matrix_command, "_matrix", lambda *a: matrix_of(refused(), refused()))
    out = tmp_path / "m.json"
    assert main(["review", "--vllm", str(tmp_path), "--matrix", "--json", str(out),
                 "--traces", str(tmp_path / "t")]) == EXIT_COVERAGE
    doc = json.loads(out.read_text())
    assert doc["status"] == SHORTFALL and doc["counts"][REFUSED] == 2
    assert any("no configuration was judged" in n for n in doc["notes"])
    assert "hazard matrix of A1 (API A, seed 0, 4 examples per campaign): coverage shortfall" in capsys.readouterr().out
    held = MatrixCell(dict(CONFIG))  # teeth: one judged cell that passed, beside the refused ones: a pass
    held.worsen(PASS, "every property held")
    assert matrix_of(refused(), held).status == PASS and exit_status(matrix_of(refused(), held)) == EXIT_PASSED
    assert not any("no configuration was judged" in n for n in matrix_of(refused(), held).said)
    broken = MatrixCell(dict(CONFIG))
    broken.worsen(FINDING, "memory")
    assert exit_status(matrix_of(refused(), broken)) == EXIT_FINDING
