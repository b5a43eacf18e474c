"""Caller behaviours of vLLM that a review judges every version under (issue 36 item 2).

Each behaviour is either in the callers of the version's own host (its
generation's launch contract) or broken on purpose by a review probe, as its
caller assumption's record says (``spec/row_assumptions.py`` and friends).
Each test has teeth: a copy of a corpus version made here with one textual
edit (never committed) that mishandles the behaviour is reported, and the
versions that handle it are not.

- a decode row that runs no token (``row_nonempty``'s breaker; not guaranteed
  absent: a probe): A4 and A5 skip it (``valid_query = query_len > 0``), A1-A3
  commit a token the row never ran;
- FlashInfer running decode rows at a fixed executed width wider than the
  row (generation A's host passes it as ``EXECUTED_QUERY_WIDTH``, T4): in the
  campaigns of every version whose postprocess takes the width (A4, A5);
- cache groups that disagree on the null block (``groups_agree_on_null``'s
  caller break; not guaranteed: a probe): a request's live column null in one
  group and real in the others. Per-group generations serve the other groups
  as if alone (A4); the model-wide D1 and D2 write a request's flush plan from
  group 0 only and reset the other groups' published live slot without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replayssm.spec import assumptions as env
from replayssm.spec.assumptions import GhostRow, RowContext
from replayssm.spec.geometry import Conventions, Geometry
from review_corpus import needs_corpus, version_path

GEO = Geometry(max_num_reqs=4, block_size=4, window=4, ring_len=8)


class _First:
    """A chooser that takes the simplest option."""

    def integer(self, lo: int, hi: int) -> int:
        return lo

    def boolean(self) -> bool:
        return False

    def element(self, options):
        return options[0]


def test_row_nonempty_breaks_a_decode_row_into_one_that_runs_no_token() -> None:
    """The decode row keeps its request where it is: no token, none accepted, its live column the
    one its state is in; it breaks the records its own says it may break with it, and no other."""
    conv = Conventions(False, True, True, True, False)
    ctx = RowContext(GEO, conv, "align", 40, 10, 12, state_col=5)
    row = GhostRow(20, 3, 2, False, 5, 2)
    empty = env.ROW_NONEMPTY.breaker(ctx, row, _First())  # type: ignore[misc]
    assert empty is not None and (empty.query_len, empty.accepted, empty.live_col) == (0, 0, 5)
    broken = {a.name for a in env.checked_on_rows() if not a.on_row(ctx, empty)}  # type: ignore[misc]
    assert broken - {a.name for a in env.ROW_NONEMPTY.co_broken} == {env.ROW_NONEMPTY.name}
    assert broken <= {env.ROW_NONEMPTY.name} | {a.name for a in env.ROW_NONEMPTY.co_broken}
    # a later prefill chunk cannot run no token (it would also continue with fewer than 2)
    assert env.ROW_NONEMPTY.breaker(ctx, GhostRow(8, 4, 0, True, 2, 2), _First()) is None  # type: ignore[misc]


def _version(path: Path, label: str):
    from replayssm.base.targets import load_target
    from replayssm.review.campaign import Version
    from replayssm.spec.generations import detect

    module = load_target(str(path))
    return Version(label, str(path), module, detect(module))


def _planted(tmp_path: Path, label: str, old: str, new: str) -> Path:
    text = version_path(label).read_text()
    assert text.count(old) == 1, f"{label}: {old!r} occurs {text.count(old)} times"
    path = tmp_path / f"{label}_planted.py"
    path.write_text(text.replace(old, new))
    return path


def _probe(version, name: str, tmp_path: Path) -> dict:
    from replayssm.review.probes import Probe, run_probe

    summary, _, _ = run_probe(Probe((name,)), version, budget=600, seed=0, out_dir=tmp_path, device="cpu",
                              examples=24)
    return summary


@needs_corpus
@pytest.mark.parametrize("label", ["A4", "A5"])
def test_a_decode_row_of_no_token_is_skipped_by_a4_and_a5(label: str, tmp_path: Path) -> None:
    summary = _probe(_version(version_path(label), label), env.ROW_NONEMPTY.name, tmp_path)
    assert summary["outcome"] == "no counterexample" and summary["broken_steps"] >= 3, summary


@needs_corpus
def test_a_kernel_that_commits_a_decode_row_of_no_token_relies_on_row_nonempty(tmp_path: Path) -> None:
    """Teeth: A4 with its ``query_len > 0`` gate opened commits a token the row never ran; the
    request's live slot then stands for one token too many (refinement), latent (not guaranteed)."""
    planted = _planted(tmp_path, "A4", "valid_query = query_len > 0", "valid_query = query_len >= 0")
    summary = _probe(_version(planted, "A4_planted"), env.ROW_NONEMPTY.name, tmp_path)
    assert summary["outcome"] == "latent" and summary["property"] == "refinement", summary


@needs_corpus
def test_only_a_host_that_passes_the_executed_width_is_run_at_one(tmp_path: Path) -> None:
    from replayssm.review.host_modes import launches_executed_width

    for label, passes in (("A3", False), ("A4", True), ("A5", True), ("B1", False), ("D1", False)):
        v = _version(version_path(label), label)
        assert launches_executed_width(v.api, v.module) == passes, label


def _campaign(version, tmp_path: Path):
    from replayssm.fuzz.caller_shapes import GEOMETRIES
    from replayssm.review.campaign import campaign

    geo = next(g for g in GEOMETRIES if (g.block_size, g.window, g.ring_len) == (4, 4, 8))  # widths 1..4
    return campaign((version,), budget=600, seed=0, out_dir=tmp_path, tag=version.label, examples=16,
                    shrink=False, geometries=(geo,))


@needs_corpus
@pytest.mark.parametrize("label", ["A4", "A5"])
def test_a4_and_a5_checkpoint_on_the_executed_width(label: str, tmp_path: Path) -> None:
    outcome = _campaign(_version(version_path(label), label), tmp_path)
    assert outcome.failures == [] and outcome.tally.steps > 0


@needs_corpus
def test_a_kernel_that_checkpoints_on_the_row_length_under_an_executed_width_is_a_finding(tmp_path: Path) -> None:
    """Teeth: A4 deciding its checkpoint on query_len while FlashInfer ran the row at the executed width
    keeps rows FlashInfer folded: the live slot's trackers count a token twice (refinement)."""
    import json

    planted = _planted(tmp_path, "A4", "executed_query_len = EXECUTED_QUERY_WIDTH", "executed_query_len = query_len")
    outcome = _campaign(_version(planted, "A4_planted"), tmp_path)
    assert [f.prop for f in outcome.failures] == ["refinement"], outcome.failures
    trace = json.loads(Path(outcome.failures[0].trace).read_text())
    assert trace["params"]["executed_width"] == 4  # the trace replays at the width it ran


def test_groups_agree_on_null_is_broken_by_the_review_caller_model() -> None:
    from replayssm.review import probes as pr
    from replayssm.review.lifecycle import StepRecord, review_policy

    assert env.GROUPS_AGREE_ON_NULL.caller_breaks is not None
    assert pr.Probe((env.GROUPS_AGREE_ON_NULL.name,)) in pr.probes()
    assert review_policy(StepRecord(frozenset({env.GROUPS_AGREE_ON_NULL.name}))).null_live_groups
    assert not review_policy(StepRecord()).null_live_groups


@needs_corpus
@pytest.mark.parametrize("label", ["A4", "B2"])
def test_a_per_group_version_serves_the_other_groups_when_one_holds_the_null_block(label: str,
                                                                                   tmp_path: Path) -> None:
    summary = _probe(_version(version_path(label), label), env.GROUPS_AGREE_ON_NULL.name, tmp_path)
    assert summary["outcome"] == "no counterexample" and summary["broken_steps"] >= 3, summary


@needs_corpus
def test_d1_resets_another_groups_live_slot_without_its_flush_when_group_0_holds_the_null_block(
        tmp_path: Path) -> None:
    """Teeth (a corpus version that mishandles it): D1's plan is written by group 0 only
    (``valid_materialize & (group_idx == 0)``), but every group resets its published slot's
    trackers; with group 0's live block null, group 1's live slot loses its committed rows: the
    probe's reliance, latent (vLLM does not promise the groups agree)."""
    summary = _probe(_version(version_path("D1"), "D1"), env.GROUPS_AGREE_ON_NULL.name, tmp_path)
    assert summary["outcome"] == "latent" and summary["property"] == "refinement", summary
    assert "group 1 " in summary["message"] and "committed 0" in summary["message"], summary


def test_the_executed_width_is_flashinfers_widest_whatever_the_block_size() -> None:
    """A fixed-width launch runs every row at one width, so no row may be longer: the width is
    min(W, R - W) (decode_row_fits), not capped by the block (a row longer than a block exists
    where decode_within_block is dropped)."""
    from replayssm.fuzz.caller_shapes import GEOMETRIES, Features
    from replayssm.fuzz.launcher import Setup
    from replayssm.review.lifecycle import review_callers

    geo = next(g for g in GEOMETRIES if (g.block_size, g.window, g.ring_len) == (2, 4, 7))
    setup = Setup.sized(geo, Conventions.all()[-1], (1,), 3, 16)
    callers, _ = review_callers(setup, Features(), frozenset(), executed_width=True)
    assert callers.setup.executed_width == 3 > geo.block_size


@needs_corpus
def test_a_row_longer_than_a_block_under_the_executed_width_is_no_reliance_of_a4(tmp_path: Path) -> None:
    """Regression: with the width capped by the block, decode_within_block's rows (3 tokens, blocks
    of 2) ran longer than the width A4 was told, and A4 looked latent on it."""
    summary = _probe(_version(version_path("A4"), "A4"), env.DECODE_WITHIN_BLOCK.name, tmp_path)
    assert summary["outcome"] == "no counterexample", summary
