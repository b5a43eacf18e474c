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
  group 0 only and reset the other groups' published live slot without it;
- a block the pool hands out while another request's table still names it
  (``fresh_slot_is_free``'s caller break; not guaranteed: a probe): a prefill's
  new live block is another request's prefix block, which it overwrites. No
  kernel can keep that prefix, so every version relies on it (``latent``);
- two columns of a row naming one block (``distinct_slots_in_row``,
  contradicted by vLLM's test T5: drawn by every campaign, never probed): where
  no prefix is published and the live column moves, a moved live column keeps
  the block its state is in. A3 and D3 (among the hosts that run all mode so) handle it;
  an A3 that clears the old column's trackers on a move loses the live state.
"""

from __future__ import annotations

from dataclasses import replace
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


@pytest.mark.parametrize("record, decision", [(env.GROUPS_AGREE_ON_NULL, "null_live_groups"),
                                              (env.FRESH_SLOT_IS_FREE, "taken_live_blocks")])
def test_a_system_assumption_is_broken_by_the_review_caller_model(record, decision: str) -> None:
    from replayssm.review import probes as pr
    from replayssm.review.lifecycle import StepRecord, review_policy

    assert record.caller_breaks is not None
    assert pr.Probe((record.name,)) in pr.probes()
    assert getattr(review_policy(StepRecord(frozenset({record.name}))), decision)
    assert not getattr(review_policy(StepRecord()), decision)


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


@needs_corpus
def test_a_prefill_given_a_block_another_request_holds_overwrites_its_prefix(tmp_path: Path) -> None:
    """Every version relies on the pool handing out free blocks: A4's probe finds the other request's
    published prefix block overwritten (canonical), and the same schedule with the prefill's request
    out of it (restored) passes: latent, never a finding."""
    summary = _probe(_version(version_path("A4"), "A4"), env.FRESH_SLOT_IS_FREE.name, tmp_path)
    assert summary["outcome"] == "latent" and summary["property"] == "canonical", summary
    assert summary["broken_steps"] >= 3 and "published block" in summary["message"], summary


def _unpublished_campaign(version, tmp_path: Path, published: bool = False):
    """A campaign of ``version`` in all mode on a host that publishes no prefix and gives live columns
    (``published``: in align mode on a publishing host instead)."""
    from replayssm.review.campaign import campaign

    return campaign((version,), budget=600, seed=0, out_dir=tmp_path, tag=version.label, examples=16, shrink=False,
                    where=lambda c: c.materialize_prefixes is published and not c.live_col_is_zero,
                    cache_mode=None if published else "all")


ALIASED = "live column moved while its block stays"


def test_a_moved_live_column_keeps_its_block_only_where_nothing_is_published() -> None:
    """The callers alias a moved live column to the block its state is in (T5) in every review
    campaign, but only on a host that publishes no prefix: a published column that is the live block
    would lose the live replay under vLLM's own postprocess."""
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    from replayssm.fuzz.caller_shapes import GEOMETRIES, Features
    from replayssm.fuzz.launcher import Setup
    from replayssm.review.lifecycle import review_callers

    seen: dict[bool, int] = {}
    for publishing in (False, True):
        conv = next(c for c in Conventions.all() if c.materialize_prefixes is publishing and not c.live_col_is_zero)
        setup = Setup.sized(GEOMETRIES[1], conv, (1, 2), 3, 16, "all" if not publishing else conv.mode)

        @settings(max_examples=30, database=None, deadline=None)
        @given(hs.data())
        def run(data) -> None:
            callers, _ = review_callers(setup, Features(), frozenset())
            for _ in range(8):
                if callers.geo.max_num_reqs > len(callers.requests):
                    callers.admit(data.draw)
                callers.step(data.draw)
                for r in callers.requests.values():
                    for g, cols in enumerate(r.cols):
                        real = [s for s in cols if s != callers.geo.pad_slot]
                        if len(set(real)) < len(real):
                            assert r.live_col >= 0 and cols[r.live_col] in real, "aliases the live block"
                            seen[publishing] = seen.get(publishing, 0) + 1
            assert sum(len(f) for f in callers.free) == len({(g, s) for g, f in enumerate(callers.free) for s in f})

        run()
    assert seen.get(False, 0) > 0 and seen.get(True, 0) == 0, seen


@needs_corpus
@pytest.mark.parametrize("label", ["A3", "D3"])
def test_a3_and_d3_keep_a_live_state_whose_block_stays(label: str, tmp_path: Path) -> None:
    outcome = _unpublished_campaign(_version(version_path(label), label), tmp_path)
    assert outcome.failures == [] and outcome.tally.scenarios.get(ALIASED, 0) > 0, outcome


@needs_corpus
def test_a_migration_that_clears_the_old_columns_trackers_loses_a_live_state_whose_block_stays(
        tmp_path: Path) -> None:
    """Teeth: A3 clearing the source block's trackers on a live move is harmless where the move
    takes a new block (align mode, no failure), but where the block stays (all mode on A3's own
    host, which publishes no prefix there) it clears the live state's trackers: a finding."""
    old = "    fresh = valid_dst & ~valid_src\n"
    planted = _planted(tmp_path, "A3", old, old + "    moved = valid_src & valid_dst & (src_col != dst_col)\n"
                       "    tl.store(tracker_start + src_slot, 0, mask=moved)\n"
                       "    tl.store(tracker_committed + src_slot, 0, mask=moved)\n")
    version = _version(planted, "A3_planted")
    outcome = _unpublished_campaign(version, tmp_path)
    assert outcome.failures and outcome.failures[0].prop in ("forward", "refinement"), outcome
    assert _unpublished_campaign(version, tmp_path, published=True).failures == []


# A prefill row's accepted count: vLLM passes 1 (a request's count before speculation accepts anything);
# a kernel that runs a one-token prompt tail as a decode commits it. The caller model once drew any
# count in 0 .. W there, a launch vLLM never makes (the stale-count false alarm of A1, A2, B1, B3).

TRACES = Path(__file__).resolve().parents[2] / "docs" / "review_traces"
STALE_TAIL = TRACES / "B1-latent-one-token-tail-stale-accepted.json"
TAIL_ACCEPTED_ONE = TRACES / "B1-one-token-tail-accepted-one.json"
B1_TAIL_CORRECTION = "prefilling = prefilling & ((query_len != 1) | (computed_before <= 0))"


def test_a_prefill_row_carries_the_accepted_count_vllm_passes() -> None:
    from replayssm.spec.row_assumptions import PREFILL_ACCEPTED
    from replayssm.spec.system.rows import RowRule

    conv = Conventions(False, True, True, True, False)
    rule = RowRule(GEO, conv, 40)
    assert list(PREFILL_ACCEPTED) == [1]
    assert all(list(rule.accepted(True, q)) == [1] for q in (1, 2, 7))
    assert all(o.accepted == PREFILL_ACCEPTED for o in rule.options(4, 9) if o.prefilling)
    ctx = RowContext(GEO, conv, "align", 40, 10, 12)
    accepted = env.ACCEPTED_WITHIN_ROW
    assert accepted.on_row(ctx, GhostRow(6, 1, 1, True, 1, 0))  # type: ignore[misc]
    for stale in (0, 2, GEO.window):
        assert not accepted.on_row(ctx, GhostRow(6, 1, stale, True, 1, 0))  # type: ignore[misc]
    broken = accepted.breaker(ctx, GhostRow(6, 1, 1, True, 1, 0), _First())  # type: ignore[misc]
    assert broken is not None and broken.accepted != 1


def _prefill_rows(trace: dict) -> list[dict]:
    return [r for s in trace["steps"] for r in s["rows"] if r is not None and r["prefilling"]]


def test_the_one_token_tail_with_a_stale_count_is_no_row_a_caller_draws() -> None:
    """Regression: the recorded counterexample of B1's old false alarm (a one-token tail at N = 6 flagged a
    prefill, accepted 2) breaks ``accepted_within_row``, which every campaign keeps."""
    import json

    from replayssm.fuzz.launcher import Setup

    trace = json.loads(STALE_TAIL.read_text())
    setup = Setup.from_json(trace["params"])
    ctx = RowContext(setup.geometry, setup.conventions, "none", setup.max_model_len, setup.num_cols, 7)
    tails = [r for r in _prefill_rows(trace) if r["computed_before"] > 0 and r["query_len"] == 1]
    assert [t["accepted"] for t in tails] == [2]
    row = GhostRow(6, 1, 2, True, 0, 0)
    assert not env.ACCEPTED_WITHIN_ROW.on_row(ctx, row)  # type: ignore[misc]
    assert env.ACCEPTED_WITHIN_ROW.on_row(ctx, replace(row, accepted=1))  # type: ignore[misc]


@needs_corpus
def test_b1_runs_a_one_token_tail_with_the_count_vllm_passes_and_without_its_correction_loses_it(
        tmp_path: Path) -> None:
    """B1 turns the flagged one-token tail into a decode and commits the count 1 (the trace holds);
    teeth: B1 without that correction (as B2) resets the request's state there."""
    from replayssm.review.campaign import replay

    held, report = replay(str(TAIL_ACCEPTED_ONE), [_version(version_path("B1"), "B1")])
    assert held, report
    planted = _planted(tmp_path, "B1", B1_TAIL_CORRECTION, "prefilling = prefilling")
    held, report = replay(str(TAIL_ACCEPTED_ONE), [_version(planted, "B1_planted")])
    assert not held and "finding reproduced" in report, report


@needs_corpus
def test_the_one_token_continuation_probe_gives_every_prefill_row_the_count_1(tmp_path: Path) -> None:
    """B1's probe of ``prefill_continuation_longer_than_one`` draws no stale count; teeth: B1 without its
    one-token-tail correction (as B2) is still latent under that probe, with every prefill row at 1."""
    import json

    name = env.PREFILL_CONTINUATION_LONGER_THAN_ONE.name
    summary = _probe(_version(version_path("B1"), "B1"), name, tmp_path / "b1")
    if summary.get("trace"):
        assert {r["accepted"] for r in _prefill_rows(json.loads(Path(summary["trace"]).read_text()))} == {1}
    planted = _planted(tmp_path, "B1", B1_TAIL_CORRECTION, "prefilling = prefilling")
    summary = _probe(_version(planted, "B1_planted"), name, tmp_path / "planted")
    assert summary["outcome"] == "latent", summary
    assert {r["accepted"] for r in _prefill_rows(json.loads(Path(summary["trace"]).read_text()))} == {1}
