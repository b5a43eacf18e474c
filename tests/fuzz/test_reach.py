"""Reach: the generators fill small block tables and put other owners' slots
where the kernels must not read, within the callers' conventions; the ci
profile with its default seed catches a prefill reset that reads one column
past the block-table row (it passed every campaign while tables had 10
columns, never filled, and held only null entries past the live column)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm.fuzz.actions import Postprocess
from replayssm.fuzz.caller_shapes import AIMS, Features, systems
from replayssm.fuzz.callers import Callers
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import PROFILES, SCENARIOS, CampaignConfig
from replayssm.fuzz.launcher import Setup
from replayssm.fuzz.machine import fuzz_trace
from replayssm.fuzz.replay import replay
from replayssm.fuzz.target import DEFAULT_TARGET
from replayssm.spec.geometry import Conventions, Geometry

REACH_CLASSES = ("table full", "live column is the last column", "stale slot past the live column",
                 "block size 1", "one-column table", "mode-none chunk past the first block")


def test_reach_classes_are_required_and_aimed_at() -> None:
    assert set(REACH_CLASSES) <= set(SCENARIOS)
    assert {a.name for a in AIMS} >= {"free", "table edges", "shared prefixes", "long decodes"}
    edges = next(a for a in AIMS if a.name == "table edges")
    assert set(edges.model_blocks) == {1, 2, 3}


def _row_owner(caller: str) -> tuple[int, int] | None:
    """(request, live column) of a postprocess row's caller note, None for padding."""
    m = re.match(r"req (\d+) .* live_col=(\d+)$", caller)
    return (int(m[1]), int(m[2])) if m else None


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_tables_keep_each_rows_own_slots_and_put_other_owners_only_where_nothing_is_read(data) -> None:
    """Every table a step hands the kernels: a scheduled row holds its own
    slots; any other real slot sits past the row's live column (or in a
    padding row or a row past the launch); no row names a slot twice."""
    setup, features = data.draw(systems(tuple(Conventions.all())))
    callers = Callers(setup, features)
    pad = setup.geometry.pad_slot
    for _ in range(data.draw(st.integers(1, 8), label="steps")):
        if len(callers.requests) < setup.geometry.max_num_reqs and data.draw(st.booleans(), label="admit"):
            callers.admit(data.draw)
        if not callers.requests:
            continue
        actions = callers.step(data.draw)
        if not actions:
            continue
        post = actions[-1]
        table = post.block_table
        for b in range(setup.geometry.max_num_reqs):
            owner = _row_owner(post.caller[b]) if b < len(post.caller) else None
            for g, rows in enumerate(table):
                row = rows[b]
                real = [s for s in row if s != pad]
                assert len(real) == len(set(real)), f"row {b} group {g} names a slot twice: {row}"
                if owner is None:
                    continue
                rid, live = owner
                own = callers.requests[rid].cols[g]
                for c, slot in enumerate(row):
                    if slot != own[c] and own[c] != pad:
                        raise AssertionError(f"row {b} group {g} lost its own slot in column {c}: {row} vs {own}")
                    if slot != own[c]:
                        assert c > live, f"another owner's slot {slot} at column {c}, not past live column {live}"
    assert set(callers.scenarios) <= set(SCENARIOS) | {"finish", "preempt", "migration (trackers copied by the kernel)",
                                                       "stale slot in a padding or unused row"}


def test_ci_profile_catches_a_prefill_reset_one_column_past_the_row(tmp_path, mutant) -> None:
    """The reference's prefill reset with ``ceil(computed_after / bs)`` as its
    last column (one too many): when the live column is a table's last, it
    zeroes the trackers of the next row's column 0, and past a live column it
    zeroes whatever slot sits there. The ci profile's default seed finds it,
    and the saved trace replays on the mutant and passes on our kernels."""
    target = mutant("tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)", "tl.cdiv(computed_after, MAMBA_BLOCK_SIZE), 0)")
    ci = PROFILES["ci"]
    result = run_campaign(CampaignConfig(target, "cpu", ci["examples"], ci["max_steps"], seed=0, jobs=1,
                                         failures_dir=str(tmp_path)))
    assert result["failures"], "the ci profile missed the prefill reset one column past the row"
    ok, report = replay(result["failures"][0], target, "cpu")
    assert not ok, report
    ok, report = replay(result["failures"][0], DEFAULT_TARGET, "cpu")
    assert ok, report


MODE_NONE_V2 = Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=False,
                           live_col_is_zero=True)


def _mode_none_chunk_trace(tmp_path, setup: Setup) -> str:
    """One postprocess launch: request 0 (batch row 0, slot 1) prefills tokens
    0..5 of a 6-token prompt at block size 4, a chunk past the first block; row
    1 holds request 1's slot 2."""
    table = [[[1] + [0] * (setup.num_cols - 1), [2] + [0] * (setup.num_cols - 1)]]
    launch = Postprocess(1, [0], [0, 6], [6, 0], [1, 0], [True], None, table)
    path = tmp_path / f"mode-none-{setup.num_cols}-columns.json"
    path.write_text(json.dumps(fuzz_trace(setup.as_json(), [launch])))
    return str(path)


def test_a_mode_none_reset_of_every_chunk_column_reads_past_the_one_column_row(tmp_path, mutant) -> None:
    """A1's mode-none bug planted in our kernel (its prefill resets every
    column the chunk spans, not only the live one): in the one-column table
    vLLM gives mode none, the reset reads past the row (a memory finding);
    in the old model's table of a column per block it read null entries of
    the row and passed."""
    target = mutant("        if MATERIALIZE_PREFIXES:\n            # Every block", "        if True:\n            # Every block")
    geo = Geometry(max_num_reqs=2, block_size=4, window=4, ring_len=8)
    vllm_table = _mode_none_chunk_trace(tmp_path, Setup.sized(geo, MODE_NONE_V2, (1,), model_blocks=3, num_slots=4))
    ok, report = replay(vllm_table, target, "cpu")
    assert not ok and "memory" in report, report
    assert replay(vllm_table, DEFAULT_TARGET, "cpu")[0]
    column_per_block = _mode_none_chunk_trace(tmp_path, Setup(geo, MODE_NONE_V2, (1,), 3, 4))
    assert replay(column_per_block, target, "cpu")[0], "the old table shape catches it too: the test lost its point"


REFERENCE_ALL = Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=False,
                            live_col_is_zero=False)
"""All mode as the reference's host passes it: no publish, live columns given."""


def test_an_all_mode_setup_is_sized_per_block_and_round_trips() -> None:
    geo = Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=4)
    setup = Setup.sized(geo, REFERENCE_ALL, (1, 2), 3, 8, "all")
    assert setup.num_cols == 3 and setup.as_json()["cache_mode"] == "all"
    assert Setup.from_json(setup.as_json()) == setup
    assert "cache_mode" not in Setup.sized(geo, REFERENCE_ALL, (1,), 3, 8).as_json()  # mode none: as before
    with pytest.raises(ValueError, match="cache_mode 'all' needs conventions with live_col_is_zero off"):
        Setup.sized(geo, MODE_NONE_V2, (1,), 3, 8, "all")


def test_callers_in_all_mode_under_the_reference_move_the_live_column_and_count_the_class() -> None:
    """All mode with the reference's flags: rows past column 0 (the live
    column moves, as in align mode, though nothing is published), counted as
    the required scenario class."""
    reached: list[int] = []
    geo = Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=4)

    @settings(max_examples=25, deadline=None, derandomize=True, database=None)
    @given(st.data())
    def run(data) -> None:
        callers = Callers(Setup.sized(geo, REFERENCE_ALL, (1, 2), 3, 8, "all"), Features())
        for _ in range(6):
            if len(callers.requests) < geo.max_num_reqs:
                callers.admit(data.draw)
            for action in callers.step(data.draw):
                if isinstance(action, Postprocess):
                    assert action.live_cols is not None
        assert not callers.published  # the host publishes nothing in all mode
        reached.append(callers.scenarios.get("all mode under a host that does not publish", 0))

    run()
    assert "all mode under a host that does not publish" in SCENARIOS
    assert any(reached), reached
