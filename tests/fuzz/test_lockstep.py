"""``fuzz --systems K``: K small systems per launch, and a finding that is still one small system.

The layout is checked against the spec itself (the oracle over the combined
launch, projected onto each system, equals the spec run on that system
alone); the teeth are a planted kernel bug that only one system's slot range
reaches (found, and reported as that system in its place, which replays)
and a bug every system can reach (reported as one system alone, a
``--systems 1`` trace)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from replayssm.cli import main
from replayssm.fuzz.caller_shapes import features_for, shapes
from replayssm.fuzz.callers import Callers
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import CampaignConfig, SetupError
from replayssm.fuzz.launcher import SpecSide
from replayssm.fuzz.lockstep import MAX_SYSTEMS
from replayssm.fuzz.lockstep_layout import Layout, combine
from replayssm.fuzz.replay import replay
from replayssm.fuzz.target import DEFAULT_TARGET
from replayssm.spec.geometry import Conventions

SYSTEMS = 4


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=hs.data(), conv=hs.sampled_from(Conventions.all()))
def test_the_oracle_over_a_combined_launch_is_each_systems_oracle(data, conv: Conventions) -> None:
    """Run three systems' steps combined and each alone on the spec: every
    system's trackers (at its slots) and plan entries (at its batch rows) agree,
    the shared null block is untouched, and the combined launch has each
    system's rows."""
    local, aim = data.draw(shapes((conv,)))
    layout = Layout(local, 3)
    group = [Callers(local, features_for(data.draw, aim)) for _ in range(3)]
    alone = [SpecSide(local) for _ in group]
    combined = SpecSide(layout.setup)
    for callers in group:
        callers.admit(data.draw)
    for _ in range(6):
        parts = {k: acts for k, c in enumerate(group) if c.requests and (acts := c.step(data.draw))}
        launches, row_owner = combine(layout, parts)
        for action in launches:
            combined.run(action)
        for k, actions in parts.items():
            for action in actions:
                alone[k].run(action)
        start = layout.starts(parts)
        for k, spec in enumerate(alone):
            slots = [layout.slot(k, s) for s in range(1, local.num_slots)]
            for b in ("ring_start", "num_committed"):
                assert np.array_equal(combined.buffers[b][:, slots], spec.buffers[b][:, 1:]), (k, b)
            if k in parts:
                n = parts[k][-1].num_reqs
                assert row_owner[start[k]:start[k] + n] == [k] * n
                for b in ("plan_ring_start", "plan_flush_count"):
                    assert np.array_equal(combined.buffers[b][start[k]:start[k] + n], spec.buffers[b][:n]), (k, b)
        assert not combined.buffers["ring_start"][:, 0].any() and not combined.buffers["num_committed"][:, 0].any()
        if not any(c.requests for c in group):
            break


def _postprocess_callers(trace: dict) -> list[str]:
    return [line for a in trace["actions"] if a["name"] == "postprocess" for line in a.get("caller", [])
            if line != "padding"]


def test_a_bug_in_one_systems_slot_range_is_found_as_that_system_in_place(tmp_path: Path, mutant) -> None:
    """A decode commit off by one only for slots past the first three systems'
    (local slots are at most 47): only system 3 of 4 reaches it. The finding is
    system 3 in its place (alone, at local slots, it passes), its trace holds
    system 3's rows only, and it replays."""
    last = (SYSTEMS - 1) * 47
    target = mutant("        tl.store(num_committed + live_slot, next_committed)\n",
                    f"        tl.store(num_committed + live_slot, tl.where(live_slot > {last}, next_committed + 1, "
                    "next_committed))\n")
    result = run_campaign(CampaignConfig(target, "cpu", 64, 8, seed=0, jobs=1, failures_dir=str(tmp_path),
                                         systems=SYSTEMS))
    assert result["failures"], "the planted bug in system 3's slot range was missed"
    finding = result["findings"][0]
    assert finding["kind"] == "discrepancy" and finding["reason"].startswith(f"system 3 of {SYSTEMS} (in place)")
    trace = json.loads(Path(result["failures"][0]).read_text())
    assert trace["#meta"]["lockstep"] == {"systems": SYSTEMS, "system": 3, "placement": "in place"}
    assert trace["params"]["num_slots"] == 1 + SYSTEMS * 47
    lines = _postprocess_callers(trace)
    assert lines and all(line.startswith("system 3: ") for line in lines), lines
    ok, report = replay(result["failures"][0], target, "cpu")
    assert not ok and "discrepancy reproduced" in report, report
    ok, report = replay(result["failures"][0], DEFAULT_TARGET, "cpu")
    assert ok, report


def test_a_bug_every_system_reaches_is_reported_as_one_system_alone(tmp_path: Path, mutant) -> None:
    """The ring wrapped by a bit mask (wrong for rings of 20, 5, 7): the finding
    is one system alone, a small system's trace exactly as ``--systems 1``
    writes them, shrunk, that replays."""
    target = mutant("% RING_BUFFER_LEN", "& (RING_BUFFER_LEN - 1)")
    result = run_campaign(CampaignConfig(target, "cpu", 64, 12, seed=0, jobs=1, failures_dir=str(tmp_path),
                                         systems=SYSTEMS, shrink_seconds=20))
    assert result["failures"], "the fuzzer missed a bit mask on a non-power-of-two ring"
    trace = json.loads(Path(result["failures"][0]).read_text())
    assert trace["#meta"]["lockstep"]["placement"] == "alone"
    assert trace["params"]["num_slots"] == 48 and trace["params"]["geometry"]["max_num_reqs"] <= 4
    assert not any(line.startswith("system ") for line in _postprocess_callers(trace))
    assert len(trace["actions"]) <= 16, "the failure was not shrunk to a short trace"
    ok, report = replay(result["failures"][0], target, "cpu")
    assert not ok and "discrepancy reproduced" in report, report


def test_a_memory_finding_is_isolated_to_one_system_by_rerunning(tmp_path: Path, mutant) -> None:
    """A guard violation names a buffer, not a system: the systems that ran
    are re-judged one by one (alone first) and the first that reproduces it
    is the finding, which replays as a memory finding."""
    target = mutant("    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)\n",
                    "    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)\n"
                    "    tl.store(block_table_row + live_col, PAD_SLOT_ID, mask=valid_live)\n")
    result = run_campaign(CampaignConfig(target, "cpu", 64, 8, seed=0, jobs=1, failures_dir=str(tmp_path),
                                         systems=SYSTEMS))
    assert result["failures"] and result["findings"][0]["kind"] == "memory"
    trace = json.loads(Path(result["failures"][0]).read_text())
    assert trace["#meta"]["lockstep"]["placement"] == "alone" and trace["params"]["num_slots"] == 48
    ok, report = replay(result["failures"][0], target, "cpu")
    assert not ok and "memory finding reproduced" in report, report


@pytest.mark.parametrize("argv, message", [
    (["--systems", "0"], f"--systems must be an int in [1, {MAX_SYSTEMS}]"),
    (["--systems", str(MAX_SYSTEMS + 1)], f"--systems must be an int in [1, {MAX_SYSTEMS}]"),
    (["--systems", "2", "--drop", "decode_row_fits"], "--systems must be 1 with --drop"),
    (["--systems", "2", "--numeric"], "--systems must be 1 with --numeric"),
])
def test_bad_systems_is_a_usage_error(argv: list[str], message: str, tmp_path: Path, capsys) -> None:
    assert main(["fuzz", "--failures", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_config_checks_systems_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match=r"--systems must be an int"):
        run_campaign(CampaignConfig(None, "cpu", 32, 4, seed=0, jobs=1, failures_dir=str(tmp_path), systems=1.5))
