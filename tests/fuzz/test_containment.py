"""Outside the contract: ``fuzz --drop NAME`` breaks one per-request caller
assumption for some requests and judges the others by containment. Our
kernels contain an over-long decode row; a planted kernel whose over-long
decode row clobbers another slot's trackers is caught; each breaker breaks
exactly its assumption (the generators check it on every broken row)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm.cli import main
from replayssm.fuzz.caller_shapes import systems
from replayssm.fuzz.callers import Callers
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import CampaignConfig, SetupError
from replayssm.fuzz.containment import compare_outside, drop_choices
from replayssm.fuzz.replay import replay
from replayssm.fuzz.target import DEFAULT_TARGET
from replayssm.spec import assumptions as env
from replayssm.spec.geometry import Conventions


def test_drop_takes_every_record_with_a_row_breaker() -> None:
    assert drop_choices() == [a.name for a in env.ALL if a.breaker is not None]
    assert all(a.scope == "per-request" and a.on_row is not None for a in env.per_request_drops())
    assert drop_choices() == ["decode_row_fits", "accepted_within_row", "row_nonempty", "decode_within_block",
                              "live_col_is_last_block", "prefill_chunk_on_boundary", "is_prefilling_agrees"]


@pytest.mark.parametrize("name", drop_choices())
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_broken_row_breaks_its_assumption_and_keeps_the_others(name: str, data) -> None:
    """``Callers.check_assumptions`` raises unless every broken row breaks
    ``name`` and keeps every other assumption, and every row of a request
    that never broke one keeps them all."""
    setup, features = data.draw(systems(tuple(Conventions.all())))
    callers = Callers(setup, features, drop=name)
    callers.admit(data.draw)
    for _ in range(data.draw(st.integers(1, 6))):
        if len(callers.requests) < setup.geometry.max_num_reqs and data.draw(st.booleans()):
            callers.admit(data.draw)
        if callers.requests:
            for action in callers.step(data.draw):
                if action.NAME != "block_copy":
                    rows = [b for b, c in enumerate(action.caller) if "(breaks" in c] if action.NAME == "postprocess" else []
                    assert set(rows) <= set((action.contained or {"rows": []})["rows"])


def _state(**changes) -> dict[str, np.ndarray]:
    base = {"ring_start": np.zeros((1, 8), np.int32), "num_committed": np.zeros((1, 8), np.int32),
            "plan_ring_start": np.zeros(4, np.int32), "plan_flush_count": np.full(4, -1, np.int32),
            "src_slots": np.zeros(8, np.int32), "dst_slots": np.zeros(8, np.int32),
            "active_request_indices": np.full(4, -1, np.int32)}
    for name, (index, value) in changes.items():
        base[name][index] = value
    return base


def test_containment_ignores_the_footprint_and_nothing_else() -> None:
    footprint = {"rows": [1], "slots": [[0, 5]]}
    assert compare_outside(_state(), _state(num_committed=((0, 5), 3)), footprint) == []
    assert compare_outside(_state(), _state(plan_flush_count=(1, 2)), footprint) == []
    assert compare_outside(_state(), _state(src_slots=(5, 7)), footprint) == []  # layer 1, row 1
    wrong = compare_outside(_state(), _state(num_committed=((0, 6), 3)), footprint)
    assert [(d.buffer, d.index) for d in wrong] == [("num_committed", (0, 6))]
    assert compare_outside(_state(), _state(plan_flush_count=(2, 2)), footprint)
    listed = _state(active_request_indices=(0, 2))
    assert compare_outside(listed, _state(active_request_indices=(0, 1)), footprint)  # row 2 went missing
    assert compare_outside(_state(active_request_indices=(0, 1)), _state(), footprint) == []


def test_a_misspelt_drop_is_a_set_up_error_naming_the_allowed_names(tmp_path, capsys) -> None:
    with pytest.raises(SetupError, match="--drop must name .*decode_row_fits.*got 'decode_row_fit'"):
        run_campaign(CampaignConfig(None, "cpu", 32, 4, 0, 1, str(tmp_path), drop="decode_row_fit"))
    assert main(["fuzz", "--drop", "slot_in_capacity", "--failures", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "live_col_is_last_block" in err and "slot_in_capacity" in err and not (tmp_path / "f").exists(), err


def test_our_kernels_contain_an_over_long_decode_row(tmp_path) -> None:
    result = run_campaign(CampaignConfig(None, "cpu", 64, 10, seed=0, jobs=2, failures_dir=str(tmp_path),
                                         drop="decode_row_fits"))
    assert result["failures"] == [], result["findings"]
    assert result["scenarios"].get("broke decode_row_fits")


def test_a_kernel_whose_over_long_decode_row_clobbers_another_slot_is_caught(tmp_path, mutant) -> None:
    """Planted: a decode row longer than ``R - W`` also zeroes the committed
    count of the slot below its live slot (another request's, as the pool
    hands slots out from the top)."""
    target = mutant("        tl.store(num_committed + live_slot, next_committed)\n",
                    "        tl.store(num_committed + live_slot, next_committed)\n"
                    "        tl.store(num_committed + live_slot - 1, 0, mask=query_len > RING_BUFFER_LEN - LOGICAL_WINDOW)\n")
    result = run_campaign(CampaignConfig(target, "cpu", 64, 10, seed=0, jobs=2, failures_dir=str(tmp_path),
                                         drop="decode_row_fits"))
    assert result["failures"], "containment missed a write outside the violator's footprint"
    assert result["findings"][0]["kind"] == "discrepancy"
    ok, report = replay(result["failures"][0], target, "cpu")
    assert not ok, report
    ok, report = replay(result["failures"][0], DEFAULT_TARGET, "cpu")  # contained: the footprints travel in the trace
    assert ok, report
