"""The whole-system model on Python ints: worked runs, random walks, conventions agree."""

from __future__ import annotations

import random
from itertools import product

import pytest

from system_worlds import GEO, V1, V2

from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.system import (
    RowPick,
    SystemParams,
    StepRefused,
    check_invariants,
    default_picks,
    failed_checks,
    initial_state,
    needs_fresh_slot,
    run_action,
    sample_picks,
    step_of,
    system_conventions,
)
from replayssm.spec.row_assumptions import PREFILL_ACCEPTED
from replayssm.spec.system import step_phases
from replayssm.spec.system.picks import cover_picks
import replayssm.spec.system as system


def _step(st, r, q, acc, slot):
    p = st.p
    N = st.get("N", r)
    prefill = int(N < st.get("prompt", r))
    live = -(-(N + q) // p.geo.block_size) - 1 if p.conv.materialize_prefixes else 0
    picks = step_of(p, {r: RowPick(1, q, PREFILL_ACCEPTED.start if prefill else acc, live, prefill, (slot,) * p.groups, (0,) * p.groups,
                                   cover_picks(p), (1,) * (p.num_cols - 1))})  # covered columns: the null block
    out = run_action(st, "step", picks)
    assert failed_checks(out) == []
    assert check_invariants(out.state) == []
    return out.state


@pytest.mark.parametrize("conv", [V1, V2], ids=lambda c: c.label())
def test_prefill_decode_publish_and_prefix_hit(conv):
    p = SystemParams(GEO, conv)
    st = run_action(initial_state(p), "admit", dict(req=0, stream=0, prompt=3, hit=0)).state
    st = _step(st, 0, 2, 0, 1)      # non-final chunk ends on the boundary 2: published in place
    assert st.v["reg"][1] == 2 and st.get("ck", 0, 1) == 2
    st = _step(st, 0, 1, 0, 2)      # final chunk: N = 3
    st = _step(st, 0, 2, 1, 3)      # decode T=2 accepts 1: boundary 4 published into column 1
    assert st.get("N", 0) == 4 and st.get("reg", 1, 2) == 4 and st.get("ck", 1, 2) == 4
    st = _step(st, 0, 2, 2, 3)
    hit = run_action(st, "admit", dict(req=1, stream=0, prompt=5, hit=2, hit_slots=[[1, 2], [1, 2]])).state
    assert check_invariants(hit) == []
    st = _step(hit, 1, 1, 0, 4)
    assert st.get("N", 1) == 5
    st = run_action(st, "free", dict(req=0)).state
    assert check_invariants(st) == []


def test_admit_refuses_a_hit_on_an_unpublished_block():
    p = SystemParams(GEO, V2)
    st = run_action(initial_state(p), "admit", dict(req=0, stream=0, prompt=3, hit=0)).state
    with pytest.raises(StepRefused):
        run_action(st, "admit", dict(req=1, stream=0, prompt=3, hit=1, hit_slots=[[1, 1], [1, 1]]))


def _walk(p, seed, steps):
    rng = random.Random(seed)
    st = initial_state(p)
    for _ in range(steps):
        action, picks = sample_picks(st, rng)
        out = run_action(st, action, picks)
        assert failed_checks(out) == [], (action, picks)
        assert check_invariants(out.state) == [], (action, picks)
        st = out.state
    return st


@pytest.mark.parametrize("conv", system_conventions(), ids=lambda c: c.label())
def test_random_walks_keep_every_invariant(conv):
    for geo in (GEO, Geometry(max_num_reqs=2, block_size=3, window=3, ring_len=5)):
        p = SystemParams(geo, conv)
        for seed in range(2):
            _walk(p, seed, 30)


WORKER_BUFFERS = ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots")


def test_v1_and_v2_reach_the_same_states():
    """Same picks, same requests, slots, trackers and ghost; only the worker's
    scratch buffers differ (v2 launches padding rows)."""
    for seed in range(10):
        states = []
        for conv in (V1, V2):
            p = SystemParams(GEO, conv)
            rng = random.Random(seed)
            st = initial_state(p)
            trail = []
            for _ in range(30):
                action, picks = sample_picks(st, rng)
                st = run_action(st, action, picks).state
                trail.append({k: v for k, v in st.as_json().items() if k not in WORKER_BUFFERS})
            states.append(trail)
        assert states[0] == states[1]


def _reads_stale_worker_buffers(p, seed, steps=30) -> list[str]:
    """Each step of a random walk run again from its state with the worker's
    per-step buffers scrambled: what differs, outside those buffers or in
    the checks (the explorer keys states without them, ``explore``)."""
    rng = random.Random(seed)
    st, found = initial_state(p), []
    for _ in range(steps):
        action, picks = sample_picks(st, rng)
        out = run_action(st, action, picks)
        scrambled = st.copy()
        for name in system.WORKER_BUFFERS:
            scrambled.v[name] = [rng.randint(-2, 6) for _ in scrambled.v[name]]
        again = run_action(scrambled, action, picks)
        found += [f"{action}: {k}" for k, v in out.state.v.items()
                  if k not in system.WORKER_BUFFERS and again.state.v[k] != v]
        if failed_checks(again) != failed_checks(out):
            found.append(f"{action}: checks {failed_checks(again)}")
        st = out.state
    return found


@pytest.mark.parametrize("conv", [V1, V2], ids=lambda c: c.label())
def test_a_step_reads_no_worker_buffer_it_did_not_write(conv):
    for seed in range(4):
        assert _reads_stale_worker_buffers(SystemParams(GEO, conv), seed) == []


def test_teeth_a_postprocess_that_keeps_last_steps_plan_row_is_seen(monkeypatch):
    """A postprocess that leaves the plan row of a decode without a publish as
    the last step left it: the work list then lists a row from stale data."""
    original = step_phases.postprocess_program

    def stale_plan(mem, geo, conv, batch, group):
        stores = mem.store
        mem.store = lambda buf, idx, value, guard=True: None if buf == "plan_flush_count" and value == -1 \
            else stores(buf, idx, value, guard)
        try:
            return original(mem, geo, conv, batch, group)
        finally:
            mem.store = stores

    monkeypatch.setattr(step_phases, "postprocess_program", stale_plan)
    assert any(_reads_stale_worker_buffers(SystemParams(GEO, V2), seed) for seed in range(4))


def test_fresh_slot_condition_is_a_python_bool_on_ints():
    p = SystemParams(GEO, V2)
    st = run_action(initial_state(p), "admit", dict(req=0, stream=0, prompt=3)).state
    assert needs_fresh_slot(st, 0, 0, True, 0) is True      # null block, not kept null
    assert needs_fresh_slot(st, 0, 0, True, 1) is False     # null block kept null
    assert needs_fresh_slot(st, 0, 0, False, 0) is False    # not scheduled
    st.set("ref", (0, 3), 2)
    assert needs_fresh_slot(st, 0, 3, True, 1) is True      # shared: copy on write
    st.set("ref", (0, 3), 1)
    assert needs_fresh_slot(st, 0, 3, True, 0) is False     # private block


def test_lookup_and_update_select_per_dimension():
    """A symbolic component selects within its own dimension: a symbolic slot
    of group 0 never reads or writes group 1's entries; concrete indices
    outside the shape read ``other`` and write nothing."""
    import z3

    from replayssm.spec.system import lookup, update
    from replayssm.verify.terms import named_int, variables

    vals = [named_int(f"v[{i}]") for i in range(6)]
    slot = named_int("slot")
    assert variables(lookup(vals, (2, 3), (0, slot))) == {"slot", "v[0]", "v[1]", "v[2]"}
    update(vals, (2, 3), (0, slot), 9)
    assert [str(x.z) for x in vals[3:]] == ["v[3]", "v[4]", "v[5]"]
    assert z3.simplify(z3.substitute(vals[1].z, (slot.z, z3.IntVal(1)))).as_long() == 9
    ints = list(range(6))
    assert lookup(ints, (2, 3), (1, 3), other=-2) == -2 and lookup(ints, (2, 3), (1, 2)) == 5
    update(ints, (2, 3), (2, 0), 7)
    assert ints == list(range(6))
    with pytest.raises(ValueError, match=r"has 1 components; the array has shape \(2, 3\)"):
        lookup(ints, (2, 3), (1,))


@pytest.mark.parametrize("geo", [GEO, Geometry(max_num_reqs=2, block_size=4, window=2, ring_len=4),
                                 Geometry(max_num_reqs=2, block_size=1, window=2, ring_len=4),
                                 Geometry(max_num_reqs=2, block_size=2, window=3, ring_len=5)],
                         ids=lambda g: f"bs{g.block_size}W{g.window}R{g.ring_len}")
@pytest.mark.parametrize("conv,mode", [(c, m) for c in system_conventions()
                                       for m in (c.mode, "all") if m == c.mode or not c.live_col_is_zero],
                         ids=lambda x: x.label() if isinstance(x, Conventions) else x)
def test_row_rule_is_exactly_the_caller_assumptions(geo, conv, mode):
    """``RowRule.options`` (which the fuzzer's callers and the wide runner
    draw from too) lists exactly the rows every caller assumption of a row
    admits, within the prompt (prefill) or the model length (decode), in
    the cache mode the conventions serve and in all mode (under either host);
    at a prompt tail (prior state, one token left) also the decodes that
    accept the one real token (``prompt_tail_runs_as_decode``)."""
    from replayssm.spec import assumptions as env
    from replayssm.spec.assumptions import GhostRow
    from replayssm.spec.system import RowRule

    num_cols = 3
    rule = RowRule(geo, conv, num_cols * geo.block_size, mode)
    for prompt in range(1, rule.max_len + 1):
        for computed in range(0, rule.max_len + 1):
            prefilling = computed < prompt
            if prefilling and mode == "align" and computed % geo.block_size:
                continue  # a prefill position is on a boundary in align mode (chunks end there)
            listed = {(o.q, acc, o.live_col, o.tail_as_decode) for o in rule.options(computed, prompt)
                      for acc in o.accepted}
            assert all(o.prefilling == int(prefilling and not o.tail_as_decode) for o in rule.options(computed, prompt))
            admitted = set()
            tails = (0, 1) if computed > 0 and prompt - computed == 1 else (0,)
            for q, acc, live, tail in product(range(rule.max_len + 1), range(geo.window + 1), range(num_cols), tails):
                chunk = prefilling and not tail
                row = GhostRow(computed, q, acc, chunk, live, 0)
                fits = computed + q <= (prompt if chunk else rule.max_len) and (acc <= 1 or not tail)
                if fits and all((env.LIVE_COL_IS_LAST_BLOCK(geo, mode, row), env.DECODE_ROW_FITS(geo, row),
                                 env.ACCEPTED_WITHIN_ROW(geo, row), env.ROW_NONEMPTY(geo, row),
                                 env.DECODE_WITHIN_BLOCK(geo, row),
                                 env.PREFILL_CHUNK_ON_BOUNDARY(geo, mode, row, computed + q == prompt))):
                    admitted.add((q, acc, live, tail))
            assert listed == admitted, (prompt, computed, sorted(listed ^ admitted))


@pytest.mark.parametrize("action", ["admit", "step", "free"])
def test_picks_records_round_trip_and_list_their_leaves_in_domain_order(action):
    """A picks record's leaves come in the order its action declares their
    domains (``checked_picks`` checks a record leaf by leaf against them),
    and its JSON form rebuilds the same record."""
    from replayssm.spec.system import ACTIONS, flat_picks, picks_from_flat, picks_json
    from replayssm.spec.system.picks import leaf_values

    p = SystemParams(GEO, V2)
    picks = default_picks(p, action)
    assert list(flat_picks(picks)) == [s.name for s in ACTIONS[action].picks(p)]
    assert leaf_values(picks) == list(flat_picks(picks).values())
    assert picks_from_flat(ACTIONS[action].record, flat_picks(picks_json(picks))) == picks
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        run_action(initial_state(p), action, picks_from_flat(ACTIONS[action].record,
                                                             {**flat_picks(picks), next(iter(flat_picks(picks))): -1}))
