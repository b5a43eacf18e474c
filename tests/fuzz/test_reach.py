"""Reach: the generators fill small block tables and put other owners' slots
where the kernels must not read, within the callers' conventions; the ci
profile with its default seed catches a prefill reset that reads one column
past the block-table row (it passed every campaign while tables had 10
columns, never filled, and held only null entries past the live column)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm.fuzz.callers import AIMS, Callers, systems
from replayssm.fuzz.campaign import PROFILES, SCENARIOS, CampaignConfig, run_campaign
from replayssm.fuzz.replay import replay
from replayssm.fuzz.target import DEFAULT_TARGET
from replayssm.spec.geometry import Conventions

REACH_CLASSES = ("table full", "live column is the last column", "stale slot past the live column",
                 "block size 1", "one-column table")


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
