"""``review --matrix``: a version's verdict per serving configuration it distinguishes.

The released vLLM 0.33.0's matrix (cheap: its campaigns are a few seconds)
is checked end to end: the refused configurations cite the check that
refuses them, the async-scheduling cell is latent with a trace that replays,
the others pass, the same seed gives the same document, every written form
fits 120 columns, and a bug planted in a copy of the release turns exactly
its FlashInfer cells into findings (teeth). A worker-side version's
dimensions, cell spaces and kernel-finding placement are checked directly,
and one cell of A1 is filled for real (mode none, the bug of A1's reset that
A3 fixes) while an align cell of it has no finding (with 2 examples, a
coverage shortfall: its probes do not finish).
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.review import matrix_corpus as mc
from replayssm.review.campaign import Version
from replayssm.review.matrix import (
    FINDING, LATENT, PASS, REFUSED, SHORTFALL, WIDTH, MatrixCell, Matrix, cells_of, text,
)
from replayssm.review.vllm_locator import SSU
from replayssm.spec import corpus
from replayssm.spec.generations import registry
from replayssm.spec.geometry import Conventions
from replayssm.spec.provenance import citation_problems, cite

pytestmark = pytest.mark.corpus


def release() -> Path:
    return corpus.root() / "vllm-0.33.0"


def versions() -> Path:
    return corpus.versions()


def cell(doc: dict, **config: str) -> dict:
    names = {"mode": "cache mode", "spec": "speculative tokens", "asynchronous": "async scheduling",
             "groups": "cache groups", "runner": "runner"}
    want = {names[k]: v for k, v in config.items()}
    [found] = [c for c in doc["cells"] if all(c["config"].get(k) == v for k, v in want.items())]
    return found


def release_matrix(tmp_path: Path, place: Path, name: str, capsys: pytest.CaptureFixture) -> tuple[int, dict, str]:
    out = tmp_path / name
    out.mkdir()
    status = main(["review", "--vllm", str(place), "--matrix", "40", "--traces", str(tmp_path / f"traces-{name}"),
                   "--json", str(out / "m.json"), "--markdown", str(out / "m.md"), "--html", str(out / "m.html")])
    return status, json.loads((out / "m.json").read_text()), capsys.readouterr().out


def test_the_release_matrix_refuses_what_the_validator_refuses_and_is_latent_only_with_async_mtp(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, doc, printed = release_matrix(tmp_path, release(), "a", capsys)
    assert status == 1 and doc["schema"] == "replayssm-review-matrix/1" and doc["status"] == LATENT
    dims = {d["name"]: d for d in doc["dimensions"]}
    assert not dims["cache groups"]["kept"] and dims["cache groups"]["evidence"]
    assert len(doc["cells"]) == 3 * 2 * 2 * 2
    for runner in ("V1", "V2"):
        latent = cell(doc, mode="none", spec="3", asynchronous="on", runner=runner)
        assert latent["status"] == LATENT and "p_async_accepted_reach_next_step_by_row" in latent["detail"]
        [trace] = latent["traces"]
        assert main(["replay", trace, "--recorded"]) == 1  # the trace behind the cell reproduces
        assert cell(doc, mode="none", spec="3", asynchronous="off", runner=runner)["status"] == PASS
        for asynchronous in ("off", "on"):
            assert cell(doc, mode="none", spec="0", asynchronous=asynchronous, runner=runner)["status"] == PASS
            mtp_align = cell(doc, mode="align", spec="3", asynchronous=asynchronous, runner=runner)
            assert mtp_align["status"] == REFUSED
            assert any("FlashInfer ReplaySSM speculative decoding does not support" in r["snippet"]
                       for r in mtp_align["refused_by"])
            for spec in ("0", "3"):
                everything = cell(doc, mode="all", spec=spec, asynchronous=asynchronous, runner=runner)
                assert everything["status"] == REFUSED and everything["refused_by"][0]["file"].endswith("cache.py")
    # align without speculation: Triton under V1 only (FlashInfer refuses prefix caching)
    assert cell(doc, mode="align", spec="0", asynchronous="off", runner="V1")["status"] == PASS
    v2 = cell(doc, mode="align", spec="0", asynchronous="off", runner="V2")
    assert v2["status"] == REFUSED and {r["snippet"] for r in v2["refused_by"]} == {
        "FlashInfer ReplaySSM does not support prefix caching yet", "Triton ReplaySSM requires Model Runner V1"}
    table = printed[printed.index("hazard matrix of"):].splitlines()  # the progress lines before it name paths
    assert all(len(line) <= WIDTH for line in table), max(table, key=len)
    md = (tmp_path / "a" / "m.md").read_text()
    assert "Hazard matrix of `0.33.0`: **latent**" in md and "| none | 3 | on | V1 | latent |" in md
    html = (tmp_path / "a" / "m.html").read_text()
    assert html.count('class="cell cell-not-accepted-by-vLLM"') == doc["counts"][REFUSED]
    # the same seed gives the same matrix
    again = release_matrix(tmp_path, release(), "b", capsys)[1]
    assert [(c["config"], c["status"], c["detail"]) for c in again["cells"]] == [
        (c["config"], c["status"], c["detail"]) for c in doc["cells"]]


def test_teeth_a_commit_bug_planted_in_a_copy_is_a_finding_in_every_mtp_cell_and_only_there(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tree = tmp_path / "planted"
    (tree / SSU).parent.mkdir(parents=True)
    text_ = (release() / SSU).read_text()
    old = "accepted_since_checkpoint + accepted_from_previous_query,"
    assert text_.count(old) == 1
    (tree / SSU).write_text(text_.replace(old, "accepted_since_checkpoint + previous_speculative_query_len,"))
    (tree / "vllm" / "version.py").write_text('__version__ = "0.33.0+planted"\n')
    status, doc, _ = release_matrix(tmp_path, tree, "report", capsys)
    assert status == 1 and doc["status"] == FINDING
    for c in doc["cells"]:
        mtp = c["config"]["speculative tokens"] == "3"
        if c["status"] != REFUSED:
            assert (c["status"] == FINDING) == mtp, c
            if mtp:
                assert c["traces"] and main(["replay", c["traces"][0], "--recorded"]) == 1


def test_every_citation_of_the_matrices_holds_in_the_corpus_and_a_wrong_one_fails() -> None:
    from replayssm.review import matrix_release

    a1 = Version("A1", str(versions() / "A1.py"), None, registry()["A"])
    cited = [c for d in [*mc.dimensions(a1), *matrix_release.dimensions()] for c in d.evidence]
    cited += [matrix_release.ALL_MODE]
    assert len(cited) >= 8
    assert [p for c in cited for p in citation_problems(c)] == []
    assert citation_problems(cite(mc.T1, 'ids=["v1", "v3"]', "a planted typo"))  # teeth


def test_a_worker_side_versions_dimensions_and_the_systems_of_each_cell() -> None:
    a1 = Version("A1", str(versions() / "A1.py"), None, registry()["A"])
    a3 = Version("A3", str(versions() / "A3.py"), None, registry()["A"])
    dims = {d.name: d for d in mc.dimensions(a1)}
    assert [n for n, d in dims.items() if not d.kept] == ["async scheduling"]
    assert "align and all" in dims["cache mode"].why
    assert dims["cache mode"].evidence[0].snippet.startswith("materialize_prefixes=cache_mode in")

    def convs(v: Version, **config: str) -> set[str]:
        s = mc.space(v, {"cache mode": "none", "speculative tokens": "0", "cache groups": "1", "runner": "V1",
                         **{k.replace("_", " "): x for k, x in config.items()}})
        return {c.label() for c in Conventions.all() if s.where(c)}

    assert convs(a1) == {"len/pre/nomap/none/col0"}  # A's host launches mode none with LIVE_COL_IS_ZERO
    assert convs(a1, runner="V2") == {"cum/post/map/none/col0"}
    assert convs(a1, **{"cache_mode": "all"}) == {"len/pre/nomap/align/live"}  # A1 publishes in all mode
    assert convs(a3, **{"cache_mode": "all"}) == {"len/pre/nomap/none/live"}  # A3 does not
    assert all(mc._longest_decode(g) == 1 for g in mc.SPECULATIVE["0"])
    assert all(mc._longest_decode(g) > 1 for g in mc.SPECULATIVE["k"])


def _kernel_trace(tmp_path: Path, query_len: int, prefilling: bool) -> dict:
    trace = {"params": {"geometry": {"max_num_reqs": 2, "block_size": 4, "window": 4, "ring_len": 8, "pad_slot": 0},
                        "conventions": {"cumulative": False, "post_step": False, "has_idx_mapping": False,
                                        "materialize_prefixes": False, "live_col_is_zero": True},
                        "layers_per_group": [1, 1]},
             "actions": [{"name": "launch", "picks": {"num_reqs": 1, "query_metadata": [query_len],
                                                      "is_prefilling": [prefilling]}}]}
    path = tmp_path / f"k{query_len}{prefilling}.json"
    path.write_text(json.dumps(trace))
    return {"property": "kernel.A.postprocess.memory_safety@A1", "violated": "a read", "trace": str(path),
            "replay": f"replayssm-verify replay {path}"}


def test_a_kernel_finding_lands_in_the_cells_whose_host_launches_its_variant(tmp_path: Path) -> None:
    a1 = Version("A1", str(versions() / "A1.py"), None, registry()["A"])
    dims = mc.dimensions(a1)
    from replayssm.review.matrix import cells_of

    prefill, decode = cells_of(dims), cells_of(dims)
    mc.place_kernel_findings(a1, prefill, [_kernel_trace(tmp_path, 9, True)])
    mc.place_kernel_findings(a1, decode, [_kernel_trace(tmp_path, 2, False)])
    hit = {tuple(c.config.values()) for c in prefill if c.status == FINDING}
    # mode none, V1, two groups (its launch has two): both speculative values (a prefill row)
    assert hit == {("none", "0", "2", "V1"), ("none", "k", "2", "V1")}
    # a two-token decode row needs draft tokens (teeth: the same finding on a decode row leaves spec 0 alone)
    assert {tuple(c.config.values()) for c in decode if c.status == FINDING} == {("none", "k", "2", "V1")}


def test_one_cell_of_a1_is_filled_for_real_mode_none_finds_the_reset_bug_align_passes_and_a_seed_repeats_it(
        tmp_path: Path) -> None:
    from replayssm.base.isolation import load_isolated
    from replayssm.verify.kernels.source_module import kernel_module

    source = str(versions() / "A1.py")
    module = load_isolated(source, "HEAD", cuda=False, launch_seconds=20)
    try:
        a1 = Version("A1", source, module, registry()["A"], kernel_module(source, "HEAD"))
        args = argparse.Namespace(budget=600.0, seed=0, device="cpu", strict=False)
        broken = MatrixCell({"cache mode": "none", "speculative tokens": "k", "cache groups": "2", "runner": "V2"})
        mc.fill_cell(a1, broken, args, 2, tmp_path, io.StringIO())
        assert broken.status == FINDING and "memory" in broken.detail, broken
        assert main(["replay", broken.traces[0], "--impl", source]) == 1
        assert main(["replay", broken.traces[0], "--impl", str(versions() / "A3.py")]) == 0  # A3 fixes it
        held = MatrixCell({"cache mode": "align", "speculative tokens": "k", "cache groups": "1", "runner": "V2"})
        mc.fill_cell(a1, held, args, 2, tmp_path, io.StringIO())
        # no finding; in 2 examples its probes' callers break their assumptions too rarely to say anything: a
        # coverage shortfall, never a pass (test_matrix_verdicts.py)
        assert held.status == SHORTFALL and held.examples > 0 and held.not_finished, held
        assert "raise --matrix N" in held.detail and not held.traces
        again = MatrixCell(dict(broken.config))  # the same seed, another folder: the same cell, the same trace
        mc.fill_cell(a1, again, args, 2, tmp_path / "again", io.StringIO())
        assert (again.status, again.detail, again.examples) == (broken.status, broken.detail, broken.examples)
        assert [json.loads(Path(t).read_text())["steps"] for t in again.traces] == [
            json.loads(Path(t).read_text())["steps"] for t in broken.traces]
    finally:
        module.close()


@pytest.mark.parametrize("argv, message", [
    (["review", "a.py", "b.py", "--matrix"], "--matrix reviews one version"),
    (["review", "a.py", "--matrix", "0"], "must be >= 1"),
    (["review", "a.py", "--matrix", "--base", "b.py"], "--matrix does not take --base"),
    (["review", "a.py", "--matrix", "--sarif", "x.sarif"], "--matrix does not take --sarif"),
])
def test_bad_matrix_input_exits_2_before_any_work(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_text_table_fits_120_columns_and_wide_gives_every_detail() -> None:
    from replayssm.review.matrix import Dimension

    dims = [Dimension("cache mode", "mode", ("none",), True, "why"), Dimension("runner", "runner", ("V1",), True, "w")]
    m = Matrix("X", "x.py", "A", 0, 1, dims, cells=[MatrixCell({"cache mode": "none", "runner": "V1"})])
    m.cells[0].worsen(FINDING, "memory: " + "a long reason " * 20, "/t/trace.json", "replayssm-verify replay x")
    assert all(len(line) <= WIDTH for line in text(m).splitlines())
    assert "a long reason " * 20 in text(m, wide=True) and "trace /t/trace.json" in text(m, wide=True)


@pytest.mark.skipif(__import__("shutil").which("chromium") is None,
                    reason="headless Chromium is not installed (bash scripts/setup.sh installs it)")
def test_the_matrix_page_fits_1400_px_in_chromium_with_every_cell_long(tmp_path: Path) -> None:
    from report_checks import measured_width

    from replayssm.base.html_matrix import matrix_page
    from replayssm.review.matrix_release import dimensions

    dims = dimensions()
    m = Matrix("0.33.0", "x.py", "P", 0, 80, dims, cells=cells_of(dims))
    for n, c in enumerate(m.cells):
        c.worsen(FINDING if n % 2 else LATENT, "refinement: request 3 (slot 2) " * 12, f"/a/long/path/{'x' * 90}.json",
                 f"replayssm-verify replay /a/long/path/{'x' * 90}.json --impl /another/long/path/ssu_dispatch.py")
    page = tmp_path / "matrix.html"
    page.write_text(matrix_page(m.document()))
    width, shown = measured_width(page, tmp_path / "r", 1400, 1200)
    assert width <= 1400, f"the matrix page is {width} px wide"
    assert f"{m.counts()[FINDING]} findings on this page" in shown.dom
