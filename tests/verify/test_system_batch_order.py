"""The batch order is a pick of each engine step (``StepPicks.order``): the
explorer takes every order, consecutive steps may differ, and the step
shapes of the inductive proofs list both orders of a pair of rows, which
``system.shapes_cover`` checks.

Teeth: no planted kernel bug is here, since none was found that the old
model (the order fixed per world, ``swap_rows``) missed: the inductive
invariant reads no buffer kept by batch row (plan rows, work list, packed
source and destination tables are arbitrary in the pre-state), so a kernel
that reads what an earlier step left at a row fails from any pre-state; and
the two-row shapes over both request assignments already held both orders
up to renaming the requests. The tests below show instead that the model
reaches a step whose order differs from the step before, and that the
proofs fail when a batch order is left out of the shapes.
"""

from __future__ import annotations

from replayssm.spec.system import check_invariants, enumerate_picks, failed_checks, initial_state, run_action
from replayssm.verify import system_proofs as sp
from replayssm.verify import system_steps as steps
from replayssm.verify import system_world as world
from replayssm.verify.obligation import REGISTRY, prove


def _batch(st, picks) -> tuple[int, ...]:
    """The requests a step's batch rows hold, row by row."""
    return tuple(r for r in picks.order if picks.rows[r].sched == 1 and st.get("active", r) == 1)


def test_the_explorer_reaches_a_step_in_another_order_than_the_step_before():
    """From the initial state, the explorer's own generator runs both requests
    in one order, then in the other, every check and invariant holding."""
    p = world.system_params(world.SYSTEM_CONVENTIONS["v2-align"])
    frontier = [(initial_state(p), None)]
    for _ in range(5):
        nxt = []
        for st, last in frontier:
            for action, picks in enumerate_picks(st, prompts=(4,)):
                out = run_action(st, action, picks)
                assert failed_checks(out) == [] and check_invariants(out.state) == []
                batch = _batch(st, picks) if action == "step" else None
                if batch and last and len(batch) == len(last) == 2 and batch != last:
                    return
                nxt.append((out.state, batch if action == "step" else last))
        frontier = nxt[:400]
    raise AssertionError("no run of the explorer schedules both requests twice in different orders")


def test_every_pair_of_rows_is_a_shape_in_both_orders():
    for label, conv in world.SYSTEM_CONVENTIONS.items():
        cases = steps.step_cases(world.system_params(conv), 2)
        assert len(cases) == len(set(cases))
        assert {steps.StepCase(case.rows[::-1]) for case in cases} == set(cases), label
        assert {tuple(row.req for row in case.rows) for case in cases} == {(0, 1), (1, 0)}, label


def test_a_dropped_batch_order_is_found(monkeypatch):
    """Teeth of the coverage proof for the order pick: list the pairs of rows
    in request order only (the old v1 worlds) and the proof names a step that
    runs request 1 in batch row 0 and request 0 in row 1."""
    step_cases = steps.step_cases
    monkeypatch.setattr(sp, "step_cases", lambda p, n: [
        case for case in step_cases(p, n) if [row.req for row in case.rows] == sorted(row.req for row in case.rows)])
    r = prove(REGISTRY["system.shapes_cover"])
    assert r.status == "failed" and r.counterexample["violated"] == ["a listed shape"]
    v = r.counterexample["values"]
    assert v["pick.rows[0].sched"] == v["pick.rows[1].sched"] == 1
    assert (v["pick.order[0]"], v["pick.order[1]"]) == (1, 0), v
