"""Bad input is a ValueError naming the field and its range: the system
model's parameters, its actions and picks, and the launch sizes."""

from __future__ import annotations

import numpy as np
import pytest

from system_worlds import GEO, V2

from replayssm.spec.geometry import Geometry
from replayssm.spec.launch import allocate, compact_launch, migrate_launch, next_power_of_2, postprocess_step
from replayssm.spec.system import (
    StepRefused,
    SystemParams,
    default_picks,
    initial_state,
    run_action,
)


# ---- SystemParams


@pytest.mark.parametrize("kwargs, message", [
    (dict(layers=()), r"layers must be a non-empty tuple"),
    (dict(layers=(1, 0)), r"layers\[1\] must be in \[1, inf\], got 0"),
    (dict(layers=(1, 2.0)), r"layers\[1\] must be an int"),
    (dict(layers=3), r"layers must be a non-empty tuple"),
    (dict(num_cols=0), r"num_cols must be in \[1, inf\], got 0"),
    (dict(num_slots=1), r"num_slots must be in \[2, inf\], got 1"),
    (dict(num_slots=-3), r"num_slots must be in \[2, inf\]"),
    (dict(num_streams=0), r"num_streams must be in \[1, inf\], got 0"),
    (dict(num_cols=True), r"num_cols must be an int"),
    (dict(geo=Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=2)), r"geo\.ring_len must be in \[3, inf\]"),
    (dict(geo=Geometry(max_num_reqs=0, block_size=2, window=2, ring_len=4)), r"geo\.max_num_reqs"),
    (dict(geo=Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=4, pad_slot=1)), r"geo\.pad_slot must be 0"),
    (dict(geo=None), r"geo must be a Geometry"),
    (dict(conv="v2"), r"conv must be a Conventions"),
])
def test_system_params_name_the_bad_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SystemParams(**{"geo": GEO, "conv": V2, **kwargs})


def test_system_params_smallest_world_runs_and_layers_become_a_tuple():
    p = SystemParams(GEO, V2, layers=[1], num_cols=1, num_slots=2, num_streams=1)
    assert p.layers == (1,) and hash(p) == hash(SystemParams(GEO, V2, (1,), 1, 2, 1))
    st = run_action(initial_state(p), "admit", dict(req=0, stream=0, prompt=2)).state
    picks = {"rows": [{"sched": 1, "q": 2, "acc": 1, "live_col": 0, "is_prefilling": 1, "slot": [1]}]}
    assert run_action(st, "step", picks).state.get("N", 0) == 2


# ---- actions and picks


def test_run_action_rejects_a_misspelt_pick_naming_the_allowed_ones():
    st = initial_state(SystemParams(GEO, V2))
    with pytest.raises(ValueError, match=r"unknown pick 'promt'; the picks of admit are req, stream, prompt, hit"):
        run_action(st, "admit", dict(req=0, stream=0, promt=3))
    st = run_action(st, "admit", dict(req=0, stream=0, prompt=3)).state
    with pytest.raises(ValueError, match=r"step: unknown picks 'rows\[0\]\.q0', 'rows\[0\]\.slot\[2\]'.*rows\[0\]\.sched, rows\[0\]\.q"):
        run_action(st, "step", {"rows": [{"sched": 1, "q0": 2, "slot": [1, 1, 1]}]})
    with pytest.raises(ValueError, match="unknown pick 'rq'"):
        default_picks(st.p, "free", rq=0)


def test_run_action_rejects_a_pick_outside_its_domain_naming_it():
    """The guard would refuse it too, but without naming the pick."""
    st = initial_state(SystemParams(GEO, V2))
    with pytest.raises(ValueError, match=r"admit: pick prompt must be in \[1, \d+\], got 0"):
        run_action(st, "admit", dict(req=0, stream=0, prompt=0))
    with pytest.raises(ValueError, match=r"admit: pick req must be in \[0, 1\], got 2"):
        run_action(st, "admit", dict(req=2, stream=0, prompt=3))
    with pytest.raises(ValueError, match=r"free: pick req must be an int in \[0, 1\], got '0'"):
        default_picks(st.p, "free", req="0")
    with pytest.raises(ValueError, match=r"pick req must be an int .*got True"):
        default_picks(st.p, "free", req=True)


def test_a_step_order_that_is_no_permutation_is_named():
    """The batch order is a permutation of the requests; a step leaving it out lists them by index."""
    st = run_action(initial_state(SystemParams(GEO, V2)), "admit", dict(req=0, stream=0, prompt=3)).state
    row = {"sched": 1, "q": 2, "acc": 1, "live_col": 0, "is_prefilling": 1, "slot": [1, 1]}
    with pytest.raises(ValueError, match=r"step: pick order must be a permutation of the requests 0\.\.1 "
                                         r"\(the batch order\), got \[1, 1\]"):
        run_action(st, "step", {"rows": [row], "order": [1, 1]})
    assert default_picks(st.p, "step", rows=[row]).order == (0, 1)
    assert run_action(st, "step", {"rows": [row], "order": [1, 0]}).state.get("N", 0) == 2


def test_run_action_rejects_an_unknown_action_naming_the_known_ones():
    st = initial_state(SystemParams(GEO, V2))
    with pytest.raises(ValueError, match=r"action must be one of admit, step, free, got 'admitt'"):
        run_action(st, "admitt", {})
    with pytest.raises(ValueError, match="action must be one of"):
        default_picks(st.p, "finish")


def test_run_action_rejects_a_misspelt_dropped_assumption():
    st = initial_state(SystemParams(GEO, V2))
    with pytest.raises(ValueError, match=r"dropped names no system assumption: \['fresh_slot_isfree'\].*fresh_slot_is_free"):
        run_action(st, "admit", dict(req=0, stream=0, prompt=3), dropped=("fresh_slot_isfree",))
    run_action(st, "admit", dict(req=0, stream=0, prompt=3), dropped=("fresh_slot_is_free",))


def test_proofs_reject_a_misspelt_dropped_assumption():
    """The symbolic BMC and the inductive claims check the names as the
    concrete runs do."""
    from replayssm.verify import bmc, system_proofs, system_steps, system_world

    p = system_world.system_params(system_world.SYSTEM_CONVENTIONS["v2-align"])
    with pytest.raises(ValueError, match=r"dropped names no system assumption: \['row_non_empty'\]"):
        bmc.Unrolling(p, ("row_non_empty",))
    with pytest.raises(ValueError, match=r"dropped names no system assumption: \['row_non_empty'\]"):
        system_proofs.hypotheses(system_steps.context().transition(p, "free", req=0), ("row_non_empty",))


def test_a_refused_action_is_still_step_refused():
    st = initial_state(SystemParams(GEO, V2))
    with pytest.raises(StepRefused):
        run_action(st, "free", dict(req=0))


# ---- launch sizes


def test_launch_sizes_are_checked():
    geo = Geometry(max_num_reqs=4, block_size=16, window=16, ring_len=20)
    conv = V2
    buf = allocate(geo, 2, 4, [1])
    for launch in (lambda n: postprocess_step(buf, geo, conv, n), lambda n: migrate_launch(buf, geo, True, n),
                   lambda n: compact_launch(buf, geo, n)):
        with pytest.raises(ValueError, match=r"num_reqs must be in \[0, 4\], got -1"):
            launch(-1)
        with pytest.raises(ValueError, match=r"num_reqs must be in \[0, 4\], got 5"):
            launch(5)
        with pytest.raises(ValueError, match=r"num_reqs must be an int"):
            launch(2.0)
    assert postprocess_step(buf, geo, conv, np.int64(0)) == []  # an empty launch is fine


@pytest.mark.parametrize("args, message", [
    ((0, 4, [1]), r"num_cols must be in \[1, inf\], got 0"),
    ((-2, 4, [1]), r"num_cols must be in \[1, inf\], got -2"),
    ((2, 0, [1]), r"num_slots must be in \[1, inf\], got 0"),
    ((2, 4, [1.5]), r"layers_per_group\[0\] must be an int in \[1, inf\], got 1.5"),
    ((2, 4, [2, 0]), r"layers_per_group\[1\] must be in \[1, inf\], got 0"),
])
def test_allocate_names_the_bad_size(args, message):
    with pytest.raises(ValueError, match=message):
        allocate(GEO, *args)
    with pytest.raises(ValueError, match="window"):
        allocate(Geometry(max_num_reqs=2, block_size=2, window=0, ring_len=4), 2, 4, [1])


def test_next_power_of_2():
    assert [next_power_of_2(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 4, 4, 8, 8, 16]
    with pytest.raises(ValueError, match=r"n must be in \[1, inf\], got 0"):
        next_power_of_2(0)
