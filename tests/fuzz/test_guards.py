"""Guarded memory (``fuzz/guards.py``) and its teeth.

Planted kernels (a copy of ``impl/kernels.py`` with a one-line change, loaded
as an ``--impl`` file from a temporary folder; for the context level, a copy
of the whole ``impl`` package) that store one past the active list, write into
the query metadata or into a block table are found by the ci profile at its
default seed with a ``memory`` finding naming the buffer; the prefill reset
that reads one column past its block-table row is caught on a hand-written
trace at both levels. The correct implementation and the reference's kernels
pass guarded, and the guards leave the slot ids, strides and sizes the kernels
see as they are.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from replayssm.fuzz.actions import Postprocess, SetState, action_to_json
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import PROFILES, CampaignConfig
from replayssm.fuzz.replay import replay
from replayssm.fuzz.guards import GUARD_COLUMNS, POISON, RED_ZONE, Arena, GuardViolation
from replayssm.fuzz.launcher import KernelSide, Setup
from replayssm.spec.geometry import Conventions, Geometry
from fuzz_processes import plant

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "impl"))

PLANTED = {
    "store one past the active list":
        ("    in_capacity = lane < MAX_NUM_REQS\n", "    in_capacity = lane <= MAX_NUM_REQS\n",
         "out-of-bounds write active_request_indices[3] by _compact_replayssm_requests_kernel"),
    "write into the query metadata":
        ("    computed = tl.load(num_computed_tokens + req)\n",
         "    computed = tl.load(num_computed_tokens + req)\n    tl.store(query_metadata + batch, computed + 1)\n",
         "input query_metadata modified by _postprocess_replayssm_kernel"),
    "write into a block table":
        ("    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)\n",
         "    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)\n"
         "    tl.store(block_table_row + live_col, PAD_SLOT_ID, mask=valid_live)\n",
         "input block_table.g"),
}
"""name: (anchor, replacement, start of the finding's reason)."""

PREFILL_PAST_ROW = ("            last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)\n",
                    "            last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE), 0)\n")
"""The reference's prefill reset one column too far: past the row when the chunk fills the table."""


def plant_package(folder: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> str:
    """A copy of ``replayssm.impl`` with the planted kernel, for the context level."""
    package = folder / "guarded_mutant_impl"
    shutil.copytree(REPO / "impl", package)
    kernels = package / "kernels.py"
    kernels.write_text(kernels.read_text().replace(old, new))
    monkeypatch.syspath_prepend(str(folder))
    for name in list(sys.modules):
        if name.startswith("guarded_mutant_impl"):
            del sys.modules[name]
    return "guarded_mutant_impl.replayssm_utils"


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_ci_profile_finds_a_planted_memory_bug(tmp_path: Path, name: str, device: torch.device) -> None:
    old, new, reason = PLANTED[name]
    target = plant(tmp_path / "impl", old, new)
    ci = PROFILES["ci"]
    result = run_campaign(CampaignConfig(target, device.type, ci["examples"], ci["max_steps"], seed=0, jobs=2,
                                         failures_dir=str(tmp_path / "failures")))
    assert result["exit_code"] == 1 and result["findings"], result
    finding = result["findings"][0]
    assert finding["kind"] == "memory" and finding["reason"].startswith(reason), finding
    ok, report = replay(finding["trace"], target, device.type)
    assert not ok and "memory finding reproduced" in report and reason in report, report


def filled_table_trace() -> dict:
    """Block size 4, 3 columns: request 0 prefills 0 -> 4 -> 8 -> 12 (its last
    chunk fills the table) while request 1 decodes in column 0 of the next row."""
    geo = Geometry(max_num_reqs=2, block_size=4, window=4, ring_len=8)
    conv = Conventions(cumulative=False, post_step=False, has_idx_mapping=False, materialize_prefixes=True,
                       live_col_is_zero=False)
    setup = Setup(geo, conv, (1,), num_cols=3, num_slots=8)
    table = [[[1, 2, 3], [4, 0, 0]]]
    # (computed, query length, live column) of request 0 (prefill) and request 1 (prefill, then decode)
    steps = [((0, 4, 0), (0, 3, 0)), ((4, 4, 1), (3, 1, 0)), ((8, 4, 2), (4, 1, 0))]
    actions = [SetState({"ring_start": [[0] * 8], "num_committed": [[0] * 8]}, ["start"])]
    for (c0, q0, live0), (c1, q1, live1) in steps:
        actions.append(Postprocess(2, None, [q0, q1], [c0, c1], [0, 1], [True, c1 == 0], [live0, live1], table,
                                   [f"req 0 prefill N={c0} q={q0}", f"req 1 N={c1} q={q1}"]))
    return {"#meta": {"format": "replayssm-trace/1", "source": "hand"}, "params": setup.as_json(),
            "actions": [action_to_json(a) for a in actions]}


@pytest.mark.parametrize("level", ["kernel", "context"])
def test_a_read_past_a_block_table_row_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 level: str, device: torch.device) -> None:
    path = tmp_path / "filled_table.json"
    path.write_text(json.dumps(filled_table_trace()))
    ok, report = replay(str(path), None, device.type, level=level)
    assert ok, report
    if level == "kernel":
        target = plant(tmp_path / "impl", *PREFILL_PAST_ROW)
    else:
        target = plant_package(tmp_path, monkeypatch, *PREFILL_PAST_ROW)
    ok, report = replay(str(path), target, device.type, level=level)
    assert not ok and "read past block_table row by" in report and "memory finding reproduced at step 3" in report, \
        report


@pytest.mark.corpus
def test_the_reference_kernels_pass_guarded(tmp_path: Path) -> None:
    import impl_reference_kernels

    module = impl_reference_kernels.load()
    target = str(Path(module.__file__))
    result = run_campaign(CampaignConfig(target, "cpu", 32, 8, seed=0, jobs=2, failures_dir=str(tmp_path)))
    assert result["findings"] == [], result["findings"]
    path = tmp_path / "filled_table.json"
    path.write_text(json.dumps(filled_table_trace()))
    ok, report = replay(str(path), target, "cpu")
    assert ok, report


def test_guards_keep_what_the_kernels_see(device: torch.device) -> None:
    """Slot ids, sizes and strides as without guards; poison around them."""
    geo = Geometry(max_num_reqs=3, block_size=4, window=4, ring_len=8)
    setup = Setup(geo, Conventions.all()[0], (2, 1), num_cols=5, num_slots=16)
    side = KernelSide(setup, None, device)
    table = side.arena.view("block_table.g1")
    assert table.shape == (3, 5) and table.stride() == (5 + GUARD_COLUMNS, 1)
    assert side.arena.view("block_table_strides").tolist() == [5 + GUARD_COLUMNS] * 2
    ring = side.arena.view("ring_start.g0")
    assert ring.shape == (16,) and ring.is_contiguous()
    flat = side.arena.flat
    start = side.arena.regions["ring_start.g0"].start
    assert flat[start + 16].item() == POISON, "the poison slot's trackers follow the tracker array"
    assert int(table.as_strided((3, 7), (7, 1))[0, 5]) == 16, "guard columns hold the poison slot id"
    assert (flat[start - RED_ZONE:start] == POISON).all()


def test_each_guard_violation_is_named() -> None:
    arena = Arena(torch.device("cpu"), poison_slot=6)
    arena.reserve("live_cols", (4,))
    arena.reserve("plan_flush_count", (4,), state=True)
    arena.reserve_table("block_table.g0", 2, 3)
    arena.reserve("ring_start.g0", (6,), state=True)
    arena.allocate()
    arena.put("live_cols", [0, 1, 2, 0])
    arena.put("block_table.g0", np.arange(1, 7).reshape(2, 3))
    arena.check("k")  # untouched
    cases = [
        (lambda: arena.view("plan_flush_count").copy_(torch.tensor([1, 2, 3, 4])), None),
        (lambda: arena.flat.__setitem__(arena.regions["plan_flush_count"].start + 4, 0),
         "out-of-bounds write plan_flush_count[4] by k"),
        (lambda: arena.view("live_cols").__setitem__(2, 5), "input live_cols modified by k: live_cols[2] was 2, now 5"),
        (lambda: arena.flat.__setitem__(arena.regions["ring_start.g0"].start + 6, 0),
         "read past block_table row by k: it stored 0 to ring_start.g0[6]"),
        (lambda: arena.view("plan_flush_count").__setitem__(0, POISON),
         "read past a buffer by k: plan_flush_count[0] holds the red-zone poison"),
        (lambda: arena.flat.__setitem__(arena.regions["block_table.g0"].start + 3, 1),
         "out-of-bounds write block_table.g0[0, 3] by k"),
    ]
    for damage, message in cases:
        saved = (arena.flat.clone(), arena.expected.clone())
        damage()
        if message is None:
            arena.check("k")
        else:
            with pytest.raises(GuardViolation, match=message.replace("[", r"\[").replace("]", r"\]")):
                arena.check("k")
        arena.flat.copy_(saved[0])
        arena.expected.copy_(saved[1])
