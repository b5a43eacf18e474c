"""The vectorized interpreter (numpy lanes, one per program) agrees with the
sequential oracle on random valid launches.

A step has several rows (decode or prefill, some padding under an
``idx_mapping``), 1-3 cache groups with different layer counts, conventions
drawn from all 32 combinations, trackers in range and slots that are distinct
across every row and column of a group (so no two programs race: the launch is
deterministic, which is when the two interpreters must agree). Inputs are laid
out by hand per convention here, independently of ``assumptions.encode_row``.
"""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.launch import allocate, migrate_launch, postprocess_step

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def geometries(draw) -> Geometry:
    window = draw(st.integers(1, 16))
    ring = draw(st.integers(window + 1, window + 6))
    block = draw(st.sampled_from([1, 2, 3, 4, 5, 8, 16]))
    max_num_reqs = draw(st.integers(1, 6))
    return Geometry(max_num_reqs=max_num_reqs, block_size=block, window=window, ring_len=ring).validated()


@st.composite
def tables(draw, geo: Geometry, num_reqs: int, groups: int, num_cols: int, null_p: float = 0.2):
    """Block tables whose non-null slots are distinct within each group; slot 0 is null."""
    bt = np.zeros((groups, geo.max_num_reqs, num_cols), dtype=np.int32)
    next_slot = 1
    for g in range(groups):
        for b in range(num_reqs):
            for c in range(num_cols):
                if draw(st.floats(0, 1)) >= null_p:
                    bt[g, b, c] = next_slot
                    next_slot += 1
    return bt, next_slot


def _fill_trackers(draw, buf, geo: Geometry) -> None:
    groups, slots = buf["ring_start"].shape
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    buf["ring_start"][:] = rng.integers(0, geo.ring_len, size=(groups, slots))
    buf["num_committed"][:] = rng.integers(0, geo.window + 1, size=(groups, slots))
    # stale plans and work list from an earlier step
    buf["plan_ring_start"][:] = rng.integers(0, geo.ring_len, size=geo.max_num_reqs)
    buf["plan_flush_count"][:] = rng.integers(-1, geo.window + 1, size=geo.max_num_reqs)
    buf["active_request_indices"][:] = rng.integers(-1, geo.max_num_reqs, size=geo.max_num_reqs)


@st.composite
def postprocess_launches(draw):
    geo = draw(geometries())
    conv = draw(st.sampled_from(Conventions.all()))
    num_reqs = draw(st.integers(1, geo.max_num_reqs))
    layers = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    max_step = min(geo.window, geo.max_step, geo.block_size)
    rows = []
    for _ in range(num_reqs):
        computed = draw(st.integers(0, 40))
        if draw(st.booleans()):
            # prefill; in align mode chunks start on a boundary
            if conv.materialize_prefixes:
                computed = (computed // geo.block_size) * geo.block_size
            q = draw(st.integers(1, 3 * geo.block_size + 2))
            rows.append((computed, q, draw(st.integers(0, geo.window)), True))
        else:
            q = draw(st.integers(1, max_step))
            rows.append((computed, q, draw(st.integers(1, q)), False))
    if conv.has_idx_mapping:
        reqs = draw(st.permutations(list(range(geo.max_num_reqs))))[:num_reqs]
        reqs = [r if draw(st.floats(0, 1)) > 0.2 else -1 for r in reqs]
    else:
        reqs = list(range(num_reqs))
    num_cols = max(-(-(n + q) // geo.block_size) for n, q, _, _ in rows) + 1
    bt, num_slots = draw(tables(geo, num_reqs, len(layers), num_cols))

    buf = allocate(geo, num_cols, num_slots, layers)
    buf["block_table"][:] = bt
    _fill_trackers(draw, buf, geo)
    m, i32 = geo.max_num_reqs, np.int32
    buf.update(
        idx_mapping=np.asarray(reqs, dtype=i32),
        query_metadata=np.zeros(num_reqs + 1 if conv.cumulative else num_reqs, dtype=i32),
        num_computed_tokens=np.full(m, 7, dtype=i32),
        num_accepted_tokens=np.full(m, 2, dtype=i32),
        is_prefilling=np.zeros(num_reqs, dtype=i32),
        live_cols=np.zeros(m, dtype=i32),
    )
    cum = draw(st.integers(0, 5))
    for b, ((n, q, acc, pre), req) in enumerate(zip(rows, reqs)):
        if conv.cumulative:
            buf["query_metadata"][b], buf["query_metadata"][b + 1] = cum, cum + q
        else:
            buf["query_metadata"][b] = q
        cum += q
        buf["is_prefilling"][b] = int(pre)
        if req < 0:
            continue
        buf["num_computed_tokens"][req] = n + (q if pre else acc) if conv.post_step else n
        buf["num_accepted_tokens"][req] = acc
        last_block = -(-(n + q) // geo.block_size) - 1
        buf["live_cols"][req] = last_block if conv.materialize_prefixes else 0
    return geo, conv, num_reqs, buf


@SETTINGS
@given(postprocess_launches())
def test_postprocess_step_vectorized_matches_oracle(launch):
    geo, conv, num_reqs, buf = launch
    seq, vec = copy.deepcopy(buf), copy.deepcopy(buf)
    postprocess_step(seq, geo, conv, num_reqs)
    postprocess_step(vec, geo, conv, num_reqs, vectorized=True)
    for k in buf:
        np.testing.assert_array_equal(vec[k], seq[k], err_msg=f"{k} under {conv.label()}")
    # the oracle always rewrites group 0's plan entries of every launched row
    assert all(seq["plan_flush_count"][b] >= -1 for b in range(num_reqs))


@st.composite
def migration_launches(draw):
    geo = draw(geometries())
    has_map = draw(st.booleans())
    num_reqs = draw(st.integers(1, geo.max_num_reqs))
    groups = draw(st.integers(1, 3))
    num_cols = draw(st.integers(1, 4))
    bt, num_slots = draw(tables(geo, num_reqs, groups, num_cols, null_p=0.25))
    buf = allocate(geo, num_cols, num_slots, [1] * groups)
    buf["block_table"][:] = bt
    _fill_trackers(draw, buf, geo)
    m, i32 = geo.max_num_reqs, np.int32
    cols = st.integers(-1, num_cols - 1)
    buf["src_cols"] = np.asarray([draw(cols) for _ in range(m)], dtype=i32)
    buf["dst_cols"] = np.asarray([draw(cols) for _ in range(m)], dtype=i32)
    if has_map:
        reqs = draw(st.permutations(list(range(m))))[:num_reqs]
        reqs = [r if draw(st.floats(0, 1)) > 0.2 else -1 for r in reqs]
    else:
        reqs = list(range(num_reqs))
    buf["idx_mapping"] = np.asarray(reqs, dtype=i32)
    return geo, has_map, num_reqs, buf


@SETTINGS
@given(migration_launches())
def test_migrate_launch_vectorized_matches_oracle(launch):
    geo, has_map, num_reqs, buf = launch
    seq, vec = copy.deepcopy(buf), copy.deepcopy(buf)
    migrate_launch(seq, geo, has_map, num_reqs)
    migrate_launch(vec, geo, has_map, num_reqs, vectorized=True)
    for k in buf:
        np.testing.assert_array_equal(vec[k], seq[k], err_msg=k)
