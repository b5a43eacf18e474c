"""The explorer's numpy lanes (``spec.system.lanes``) give what one transition at a time on ints gives.

``explore`` runs each breadth-first depth's transitions together on numpy
lanes and runs on ints every transition the lanes do not vouch for (a
memory fault, a failed check, a construct the lanes cannot take). Its
result must be the scalar exploration's, statistics, first violation and
run included, in every world the BMC obligations explore and when a planted
bug makes a check fail, an access fault or the lanes raise.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import numpy as np
import pytest

from replayssm.spec import table_memory
from replayssm.spec.memory import MemoryFault
from replayssm.spec.system import enumerate_picks, explore, initial_state, run_action
from replayssm.spec.system import lanes, step_phases
from replayssm.spec.system.run import StepRefused
from replayssm.verify import bmc
from replayssm.verify.system_world import world_params


def _world(label: str, **domain):
    d = {**bmc.BMC_DOMAIN, **domain}
    prompts = d.pop("prompts")
    return world_params(label, **d), prompts


WORLDS = {
    "v2-align": _world("v2-align"), "v1-align": _world("v1-align"), "v2-none": _world("v2-none"),
    "v1-none": _world("v1-none"), "v2-all": _world("v2-all"),
    "odd ring": (world_params("v2-none", **{k: v for k, v in bmc.ODD_RING_DOMAIN.items()
                                            if k not in ("conv_label", "depth", "prompts")}),
                 bmc.ODD_RING_DOMAIN["prompts"]),
}


@pytest.mark.parametrize("name", list(WORLDS))
def test_lanes_explore_as_ints_do(name):
    p, prompts = WORLDS[name]
    assert explore(p, 4, prompts=prompts) == explore(p, 4, prompts=prompts, lanes=False)


def _moves(p, prompts, depth=3):
    """Every (state, action, picks) from the states ``depth`` actions deep,
    and each state's with the picks of the next (many refused)."""
    frontier = [initial_state(p)]
    for _ in range(depth):
        nxt = []
        for st in frontier:
            for action, picks in enumerate_picks(st, prompts=prompts):
                try:
                    nxt.append(run_action(st, action, picks).state)
                except StepRefused:
                    pass
        frontier = nxt[:60]
    own = [(st, a, pk) for st in frontier for a, pk in enumerate_picks(st, prompts=prompts)]
    return own + [(st, a, pk) for st, nxt_st in zip(frontier, frontier[1:])
                  for a, pk in enumerate_picks(nxt_st, prompts=prompts)]


def test_each_lane_verdict_is_the_scalar_run_s():
    p, prompts = WORLDS["v2-align"]
    moves = _moves(p, prompts)
    verdicts = lanes.run_lanes(p, moves)
    assert any(isinstance(v, lanes.State) for v in verdicts) and any(v is lanes.REFUSED for v in verdicts)
    for (st, action, picks), verdict in zip(moves, verdicts):
        try:
            out = run_action(st, action, picks)
        except StepRefused:
            assert verdict is lanes.REFUSED or verdict is None
            continue
        assert verdict is not lanes.REFUSED
        if verdict is not None:
            assert verdict.v == out.state.v and not [n for n, ok in out.checks if not ok]
            assert all(type(x) is int for vals in verdict.v.values() for x in vals)


def test_a_failed_check_is_found_again_on_ints():
    """The live-column counterexample (test_system_proofs): a planted caller
    move whose step drops committed tokens; the lanes leave it to the ints,
    which name the same violation and run."""

    def first_token_block(st):
        for action, picks in enumerate_picks(st, prompts=(3,)):
            if action == "step":
                for r, row in enumerate(picks.rows):
                    if row.sched == 1:
                        rows = list(picks.rows)
                        rows[r] = replace(row, live_col=st.get("N", r) // st.p.geo.block_size)
                        yield action, replace(picks, rows=tuple(rows))

    p, prompts = WORLDS["v2-align"]
    args = dict(prompts=prompts, dropped=("live_col_is_last_block",), extra=first_token_block)
    found = explore(p, 6, **args)
    assert found["status"] == "failed" and found == explore(p, 6, lanes=False, **args)


def test_a_memory_fault_is_raised_as_on_ints(monkeypatch):
    """A postprocess program that stores one entry past its buffer: on ints
    ``MemoryFault``; on lanes the store is a recorded fault (the write is
    dropped), so the lane is run again on ints and the fault raised."""
    original = step_phases.postprocess_program

    def past_the_end(mem, geo, conv, b, g):
        mem.store("num_committed", (g, mem.load("idx_mapping", (b,)) * 0 + 99), 0)
        return original(mem, geo, conv, b, g)

    monkeypatch.setattr(step_phases, "postprocess_program", past_the_end)
    p, prompts = WORLDS["v2-align"]
    with table_memory.collecting_faults() as made:
        verdicts = lanes.run_lanes(p, _moves(p, prompts, depth=1))
    assert any(m.faults for m in made)
    steps = [v for (_, a, _), v in zip(_moves(p, prompts, depth=1), verdicts) if a == "step"]
    assert steps and all(v is None or v is lanes.REFUSED for v in steps)
    with pytest.raises(MemoryFault):
        explore(p, 3, prompts=prompts, lanes=False)
    with pytest.raises(MemoryFault):
        explore(p, 3, prompts=prompts)


def test_a_construct_the_lanes_cannot_run_falls_back_to_ints(monkeypatch):
    """Python control flow on a lane value raises on arrays: every move of
    that group is run on ints, and the exploration is the scalar one."""
    step_module = importlib.import_module("replayssm.spec.system.step")
    original = step_module.forward_pass

    def branching(out, rows):
        if isinstance(out.get("N", 0), np.ndarray):
            bool(out.get("N", 0) > 0)  # an array of several lanes has no truth value
        return original(out, rows)

    monkeypatch.setattr(step_module, "forward_pass", branching)
    p, prompts = WORLDS["v2-align"]
    moves = _moves(p, prompts, depth=2)
    verdicts = lanes.run_lanes(p, moves)
    assert all(v is None for (_, a, _), v in zip(moves, verdicts) if a == "step")
    assert explore(p, 4, prompts=prompts) == explore(p, 4, prompts=prompts, lanes=False)


def test_invariants_on_lanes_are_those_on_ints():
    p, prompts = WORLDS["v2-all"]
    states = [st for st, _, _ in _moves(p, prompts)]
    broken = replace(states[0], v={**states[0].v, "nc": [9] * len(states[0].v["nc"])})
    found = lanes.failed_invariants(p, states + [broken])
    from replayssm.spec.system import invariants

    for st, names in zip(states + [broken], found):
        assert names == sorted({n for n, x in invariants(st) if not x})
    assert found[-1] == ["range"]
