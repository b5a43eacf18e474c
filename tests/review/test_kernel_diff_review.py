"""``review HEAD --base BASE`` compares the kernel roles both versions have by
proof: a planted one-line change in a copy of the reference page is a proved
regression with a replayable distinguishing launch, the verdict table says
which claims are proved and which sampled, and JUnit fails the comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_pairs import ONLY_FRESH, page_file

from replayssm.cli import main
from replayssm.spec import corpus


@pytest.mark.corpus
def test_a_planted_line_is_a_proved_regression_whose_launch_replays(tmp_path: Path, capsys) -> None:
    planted = page_file(tmp_path, "planted", ONLY_FRESH)
    report, junit, traces = tmp_path / "review.json", tmp_path / "review.xml", tmp_path / "traces"
    code = main(["review", str(planted), "--base", str(corpus.reference_page()), "--examples", "1", "--traces", str(traces),
                 "--json", str(report), "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 1, out
    differences = json.loads(report.read_text())["verdicts"][0]["differences"]
    proved = {d["property"]: d for d in differences if d["evidence"] == "proved"}
    assert {k: d["kind"] for k, d in proved.items()} == {
        "kernel postprocess": "equal", "kernel migration": "regression", "kernel compaction": "equal"}
    assert differences[-1]["kind"] == "neutral" and differences[-1]["evidence"] == "sampled"
    regression = proved["kernel migration"]
    assert regression["kernel_diff"]["distinction"]["replayed"]
    flat = " ".join(out.split())  # the table's lines are wrapped at 120 columns
    assert "vs base proved: postprocess equal, migration regression, compaction equal" in flat
    assert "properties sampled" in flat and f"regression (proved): {regression['trace']}" in flat
    assert regression["message"] in junit.read_text()
    assert main(["replay", regression["trace"], "--impl", str(planted)]) == 1  # head differs from the spec there
    assert main(["replay", regression["trace"], "--impl", str(corpus.reference_page())]) == 0


def test_the_graver_of_the_row_and_padding_distinctions_gives_the_kind() -> None:
    """A role whose row programs differ harmlessly and whose padding programs
    differ by a regression is a regression, decided (and its trace saved) by
    the padding programs' distinction; the reverse keeps the row programs'."""
    from replayssm.review.kernel_diff import deciding, kind_of
    from replayssm.verify.kernels.diff_results import DIFFERS, Distinction, RoleDiff

    row = Distinction("unit", False, False, ["plan_ring_start"], True, judgement="change that breaks nothing: x")
    pad = Distinction("unit", False, True, ["plan_flush_count"], True,
                      judgement="regression: head breaks padding program frame: program (1, 0) wrote ...")
    r = RoleDiff("C.postprocess", "k", DIFFERS, 4, ["unit"], padding_differing=["unit"], padding_compared=True,
                 distinction=row, padding_distinction=pad)
    assert kind_of(r) == "regression" and deciding(r) is pad
    row.judgement, pad.judgement = "regression: head breaks memory: ...", "change that breaks nothing: y"
    assert kind_of(r) == "regression" and deciding(r) is row
    r.padding_distinction = None
    assert kind_of(r) == "regression" and deciding(r) is row


def test_a_graver_class_of_distinguishing_inputs_gives_the_kind() -> None:
    """A role whose smallest distinction is a harmless change but another
    class (another buffer) is a regression is a regression, decided by that
    class; every class is in the entry's JSON."""
    from replayssm.review.kernel_diff import deciding, kind_of
    from replayssm.verify.kernels.diff_results import DIFFERS, Distinction, RoleDiff

    row = Distinction("unit", False, False, ["plan_ring_start"], True, judgement="change that breaks nothing: x")
    other = Distinction("odd", False, False, ["num_committed"], True,
                        judgement="regression: head breaks the spec program's result: ...")
    r = RoleDiff("postprocess", "k", DIFFERS, 4, ["unit", "odd"], distinction=row, classes=[other])
    assert kind_of(r) == "regression" and deciding(r) is other
    assert [c["buffers"] for c in r.as_json()["classes"]] == [["num_committed"]]
    assert "; also num_committed in odd: regression" in r.summary()
    r.classes = []
    assert kind_of(r) == "change" and deciding(r) is row
