"""Hand-computed cases for the spec's int interpreter (the oracle).

Every expected value below is worked out by hand in a comment from the
reference arithmetic (``mamba_state_copy_boundary``, the checkpoint rule
``committed + T > W``, ``start' = (start + committed) % R``, the replay
``bias + 1 (+ old committed when no checkpoint)``); none is computed by a spec
helper. Each test checks the *whole* of every buffer: the expected buffers are
a copy of the inputs with only the listed entries edited, so anything else the
spec wrote would show up as a difference (frame condition).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.launch import allocate, compact_launch, migrate_launch, postprocess_step

# vLLM-like ring: W = 16, T = 4, R = W + T = 20 (not a power of two); small blocks.
GEO = Geometry(max_num_reqs=4, block_size=16, window=16, ring_len=20)
M = GEO.max_num_reqs
LAYERS = (2, 3)  # group 0 has 2 layers, group 1 has 3: packed bases 0 and 2 * M = 8

V1_ALIGN = Conventions(cumulative=False, post_step=False, has_idx_mapping=False,
                       materialize_prefixes=True, live_col_is_zero=False)
V2_ALIGN = Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                       materialize_prefixes=True, live_col_is_zero=False)
V1_NONE = Conventions(cumulative=False, post_step=False, has_idx_mapping=False,
                      materialize_prefixes=False, live_col_is_zero=True)


def make_buffers(geo: Geometry, num_reqs: int, num_cols: int, num_slots: int,
                 layers=LAYERS, cumulative: bool = False) -> dict[str, np.ndarray]:
    """Worker buffers plus the step's input buffers, with recognisable tracker
    values in every slot so that unexpected writes are visible."""
    buf = allocate(geo, num_cols, num_slots, list(layers))
    m = geo.max_num_reqs
    i32 = np.int32
    buf.update(
        idx_mapping=np.zeros(num_reqs, dtype=i32),
        query_metadata=np.zeros(num_reqs + 1 if cumulative else num_reqs, dtype=i32),
        num_computed_tokens=np.zeros(m, dtype=i32),
        num_accepted_tokens=np.zeros(m, dtype=i32),
        is_prefilling=np.zeros(num_reqs, dtype=i32),
        live_cols=np.zeros(m, dtype=i32),
        src_cols=np.full(m, -1, dtype=i32),
        dst_cols=np.full(m, -1, dtype=i32),
    )
    groups = len(layers)
    for g in range(groups):
        for s in range(num_slots):
            buf["ring_start"][g, s] = (3 * s + g) % geo.ring_len
            buf["num_committed"][g, s] = (s + 2 * g) % (geo.window + 1)
    return buf


def snapshot(buf):
    return {k: v.copy() for k, v in buf.items()}


def assert_buffers(actual, expected):
    assert set(actual) == set(expected)
    for k in expected:
        np.testing.assert_array_equal(actual[k], expected[k], err_msg=f"buffer {k}")


def set_packed(exp, batch, src_per_group, dst_per_group, layers=LAYERS, m=M):
    """Every layer of every group: entry = base(g) + layer * M + batch, base(g) = M * layers before g."""
    base = 0
    for g, n in enumerate(layers):
        for layer in range(n):
            exp["src_slots"][base + layer * m + batch] = src_per_group[g]
            exp["dst_slots"][base + layer * m + batch] = dst_per_group[g]
        base += n * m


# --------------------------------------------------------------------------------------
# (a) decode crossing a block boundary without checkpoint
# --------------------------------------------------------------------------------------


def test_decode_crosses_boundary_without_checkpoint():
    buf = make_buffers(GEO, num_reqs=1, num_cols=4, num_slots=12)
    # Row 0: decode, N = 14 computed before, T = 4 scheduled, 3 accepted.
    buf["query_metadata"][0] = 4
    buf["num_computed_tokens"][0] = 14
    buf["num_accepted_tokens"][0] = 3
    # live col = block of last scheduled token = ceil((14 + 4) / 16) - 1 = 1
    buf["live_cols"][0] = 1
    buf["block_table"][0, 0, :2] = [3, 4]  # group 0: col 0 -> slot 3, col 1 -> slot 4
    buf["block_table"][1, 0, :2] = [7, 8]  # group 1: col 0 -> slot 7, col 1 -> slot 8
    for g, live in ((0, 4), (1, 8)):
        buf["ring_start"][g, live] = 2
        buf["num_committed"][g, live] = 5
    exp = snapshot(buf)

    postprocess_step(buf, GEO, V1_ALIGN, 1)

    # computed_after = 14 + 3 = 17; running_pos = 17 - 3 + 1 = 15
    # aligned = (17 // 16) * 16 = 16 >= 15 -> publish; bias = 16 - 15 = 1; dst_col = 16/16 - 1 = 0
    # checkpoint? 5 + 4 = 9 > 16: no -> live trackers (2, 5 + 3) = (2, 8)
    # plan: ring start 2, replay = bias + 1 + old committed = 1 + 1 + 5 = 7
    #   (check: P = 14 - 5 = 9, aligned - P = 16 - 9 = 7)
    for g, live, dst in ((0, 4, 3), (1, 8, 7)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 2, 8
        exp["ring_start"][g, dst], exp["num_committed"][g, dst] = 0, 0
    exp["plan_ring_start"][0] = 2
    exp["plan_flush_count"][0] = 7
    set_packed(exp, 0, src_per_group=(4, 8), dst_per_group=(3, 7))
    # compaction: row 0 active (7 >= 0), the rest -1
    exp["active_request_indices"][:] = [0, -1, -1, -1]
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (b) decode with checkpoint, publishing; (c) checkpoint whose ring start wraps on R = 20
# --------------------------------------------------------------------------------------


def test_decode_with_checkpoint_publishes_bias_plus_one():
    buf = make_buffers(GEO, num_reqs=1, num_cols=4, num_slots=12)
    # N = 30, T = 4, accepted 2; old trackers (3, 14)
    buf["query_metadata"][0] = 4
    buf["num_computed_tokens"][0] = 30
    buf["num_accepted_tokens"][0] = 2
    # live col = ceil((30 + 4) / 16) - 1 = 3 - 1 = 2
    buf["live_cols"][0] = 2
    buf["block_table"][0, 0, :3] = [1, 2, 5]
    buf["block_table"][1, 0, :3] = [9, 10, 11]
    for g, live in ((0, 5), (1, 11)):
        buf["ring_start"][g, live] = 3
        buf["num_committed"][g, live] = 14
    exp = snapshot(buf)

    postprocess_step(buf, GEO, V1_ALIGN, 1)

    # checkpoint: 14 + 4 = 18 > 16 -> start (3 + 14) % 20 = 17, committed = accepted = 2
    # after = 32, running = 32 - 2 + 1 = 31, aligned = 32 >= 31; bias 1; dst_col = 32/16 - 1 = 1
    # replay = bias + 1 = 2 (P' = 30 - 14 + 14 = 30; 32 - 30 = 2)
    for g, live, dst in ((0, 5, 2), (1, 11, 10)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 17, 2
        exp["ring_start"][g, dst], exp["num_committed"][g, dst] = 0, 0
    exp["plan_ring_start"][0] = 17
    exp["plan_flush_count"][0] = 2
    set_packed(exp, 0, src_per_group=(5, 11), dst_per_group=(2, 10))
    exp["active_request_indices"][:] = [0, -1, -1, -1]
    assert_buffers(buf, exp)


def test_checkpoint_ring_start_wraps_modulo_20():
    buf = make_buffers(GEO, num_reqs=1, num_cols=4, num_slots=12)
    # N = 20, T = 4, accepted 4; old trackers (10, 14); no boundary in (20, 24]
    buf["query_metadata"][0] = 4
    buf["num_computed_tokens"][0] = 20
    buf["num_accepted_tokens"][0] = 4
    buf["live_cols"][0] = 1  # ceil(24 / 16) - 1 = 1
    buf["block_table"][0, 0, :2] = [3, 4]
    buf["block_table"][1, 0, :2] = [7, 8]
    for g, live in ((0, 4), (1, 8)):
        buf["ring_start"][g, live] = 10
        buf["num_committed"][g, live] = 14
    buf["plan_ring_start"][0] = 9   # stale plan from an earlier step
    buf["plan_flush_count"][0] = 6
    buf["active_request_indices"][:] = [3, 3, 3, 3]
    exp = snapshot(buf)

    postprocess_step(buf, GEO, V1_ALIGN, 1)

    # checkpoint: 14 + 4 = 18 > 16 -> start (10 + 14) = 24 -> 24 - 20 = 4 (a mask & 19 would give 16)
    # committed = 4
    # after = 24, running = 21, aligned = 16 < 21 -> no publish: plan (0, -1), pad packed entries
    for g, live in ((0, 4), (1, 8)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 4, 4
    exp["plan_ring_start"][0] = 0
    exp["plan_flush_count"][0] = -1
    set_packed(exp, 0, src_per_group=(0, 0), dst_per_group=(0, 0))  # already pad; written anyway
    exp["active_request_indices"][:] = [-1, -1, -1, -1]
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (d) prefill over several blocks in align mode
# --------------------------------------------------------------------------------------


def _prefill_buffers(live_col: int):
    buf = make_buffers(GEO, num_reqs=1, num_cols=6, num_slots=16)
    # chunk from N = 16 (a boundary) of 48 tokens -> ends at 64, a boundary
    buf["query_metadata"][0] = 48
    buf["num_computed_tokens"][0] = 16
    buf["num_accepted_tokens"][0] = 3  # stale count, ignored for prefill
    buf["is_prefilling"][0] = 1
    buf["live_cols"][0] = live_col
    # col 2 is null in both groups (slot 0 = pad) to check the null slot is left alone
    buf["block_table"][0, 0, :5] = [1, 2, 0, 3, 4]
    buf["block_table"][1, 0, :5] = [11, 12, 0, 13, 14]
    buf["plan_ring_start"][0] = 5
    buf["plan_flush_count"][0] = 5
    return buf


def test_prefill_align_resets_touched_columns_and_copies_when_live_is_elsewhere():
    buf = _prefill_buffers(live_col=4)
    exp = snapshot(buf)
    postprocess_step(buf, GEO, V1_ALIGN, 1)
    # after = 16 + 48 = 64; touched cols: first = 16 // 16 = 1, last = ceil(64/16) - 1 = 3
    # -> cols 1, 2, 3 -> slots (2, null, 3) in group 0 and (12, null, 13) in group 1: reset (0, 0)
    # col 0 (slot 1/11) and col 4 (live slot 4/14) untouched; null slot 0 untouched
    for g, slots in ((0, (2, 3)), (1, (12, 13))):
        for s in slots:
            exp["ring_start"][g, s], exp["num_committed"][g, s] = 0, 0
    # boundary: running = after = 64, aligned = 64 >= 64, bias 0, dst_col = 3 != live col 4
    # -> plan (ring start 0 from the initial clear, replay 0): an exact copy slot 4 -> slot 3
    exp["plan_ring_start"][0] = 0
    exp["plan_flush_count"][0] = 0
    set_packed(exp, 0, src_per_group=(4, 14), dst_per_group=(3, 13))
    exp["active_request_indices"][:] = [0, -1, -1, -1]
    assert_buffers(buf, exp)


def test_prefill_align_live_is_destination_has_no_plan():
    buf = _prefill_buffers(live_col=3)  # the vLLM live column: ceil(64 / 16) - 1 = 3
    exp = snapshot(buf)
    postprocess_step(buf, GEO, V1_ALIGN, 1)
    # same resets: cols 1..3 non-null slots
    for g, slots in ((0, (2, 3)), (1, (12, 13))):
        for s in slots:
            exp["ring_start"][g, s], exp["num_committed"][g, s] = 0, 0
    # dst_col 3 == live col 3: the live slot already is canonical -> no plan, replay -1
    exp["plan_ring_start"][0] = 0
    exp["plan_flush_count"][0] = -1
    # the packed tables still name the (same) slot as source and destination for every layer
    set_packed(exp, 0, src_per_group=(3, 13), dst_per_group=(3, 13))
    exp["active_request_indices"][:] = [-1, -1, -1, -1]
    assert_buffers(buf, exp)


def test_final_prefill_chunk_off_boundary_publishes_nothing():
    buf = make_buffers(GEO, num_reqs=1, num_cols=4, num_slots=12)
    buf["query_metadata"][0] = 20  # N = 0 -> 20
    buf["is_prefilling"][0] = 1
    buf["live_cols"][0] = 1  # ceil(20 / 16) - 1 = 1
    buf["block_table"][0, 0, :3] = [3, 4, 5]
    buf["block_table"][1, 0, :3] = [7, 8, 9]
    exp = snapshot(buf)
    postprocess_step(buf, GEO, V1_ALIGN, 1)
    # cols 0 .. ceil(20/16) - 1 = 1 reset; col 2 (slots 5, 9) untouched
    for g, slots in ((0, (3, 4)), (1, (7, 8))):
        for s in slots:
            exp["ring_start"][g, s], exp["num_committed"][g, s] = 0, 0
    # aligned = 16 < running 20: nothing published
    exp["plan_ring_start"][0], exp["plan_flush_count"][0] = 0, -1
    set_packed(exp, 0, (0, 0), (0, 0))
    exp["active_request_indices"][:] = [-1, -1, -1, -1]
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (e) live slot == destination: the last accepted token ends a block
# --------------------------------------------------------------------------------------


def test_decode_publishes_in_place_when_live_is_destination():
    buf = make_buffers(GEO, num_reqs=1, num_cols=4, num_slots=12)
    # N = 12, T = 4, accepted 4 -> after 16; live col = ceil(16 / 16) - 1 = 0
    buf["query_metadata"][0] = 4
    buf["num_computed_tokens"][0] = 12
    buf["num_accepted_tokens"][0] = 4
    buf["live_cols"][0] = 0
    buf["block_table"][0, 0, :1] = [6]
    buf["block_table"][1, 0, :1] = [10]
    for g, live in ((0, 6), (1, 10)):
        buf["ring_start"][g, live] = 6
        buf["num_committed"][g, live] = 5
    exp = snapshot(buf)
    postprocess_step(buf, GEO, V1_ALIGN, 1)
    # no checkpoint (5 + 4 = 9 <= 16): commit would be (6, 9)
    # running = 16 - 4 + 1 = 13, aligned 16, bias 3, dst_col 0 == live col
    # publish makes the live slot canonical: (0, 0) supersedes (6, 9)
    # plan replays from it: start 6, replay 3 + 1 + 5 = 9 (P = 12 - 5 = 7; 16 - 7 = 9)
    for g, live in ((0, 6), (1, 10)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 0, 0
    exp["plan_ring_start"][0], exp["plan_flush_count"][0] = 6, 9
    set_packed(exp, 0, (6, 10), (6, 10))
    exp["active_request_indices"][:] = [0, -1, -1, -1]
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (f) mode none
# --------------------------------------------------------------------------------------


def test_mode_none_commits_live_slot_only():
    buf = make_buffers(GEO, num_reqs=2, num_cols=3, num_slots=12)
    buf["src_slots"][:] = 99  # markers: mode none never writes packed tables
    buf["dst_slots"][:] = 98
    buf["active_request_indices"][:] = [7, 7, 7, 7]
    buf["plan_ring_start"][:2] = [5, 5]
    buf["plan_flush_count"][:2] = [5, 5]
    # row 0: decode N = 14, T = 4, accepted 3, trackers (2, 5); the live column is 0
    buf["query_metadata"][:2] = [4, 100]
    buf["num_computed_tokens"][:2] = [14, 0]
    buf["num_accepted_tokens"][:2] = [3, 0]
    buf["is_prefilling"][:2] = [0, 1]
    buf["live_cols"][:2] = [2, 2]  # ignored: LIVE_COL_IS_ZERO
    buf["block_table"][0, 0] = [3, 4, 5]
    buf["block_table"][1, 0] = [6, 7, 8]
    buf["block_table"][0, 1] = [9, 10, 11]
    buf["block_table"][1, 1] = [1, 2, 0]
    for g, live in ((0, 3), (1, 6)):
        buf["ring_start"][g, live], buf["num_committed"][g, live] = 2, 5
    exp = snapshot(buf)
    postprocess_step(buf, GEO, V1_NONE, 2)
    # row 0: no checkpoint (5 + 4 <= 16) -> (2, 5 + 3) = (2, 8) in slot 3 / 6
    # (the boundary at 16 is crossed, but mode none publishes nothing)
    for g, live in ((0, 3), (1, 6)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 2, 8
    # row 1: prefill of 100 tokens: only the live slot (col 0: 9 / 1) resets, not cols 1..6
    for g, live in ((0, 9), (1, 1)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 0, 0
    # plans cleared by group 0 for both rows; no packed writes; no compaction
    exp["plan_ring_start"][:2] = [0, 0]
    exp["plan_flush_count"][:2] = [-1, -1]
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (g) padding rows with idx_mapping (v2 conventions)
# --------------------------------------------------------------------------------------


def test_padding_rows_with_idx_mapping():
    buf = make_buffers(GEO, num_reqs=3, num_cols=4, num_slots=12, cumulative=True)
    # batch 0 -> request 2 (decode T = 4, accepted 3, N = 14 -> post-step 17)
    # batch 1 -> padding (-1)
    # batch 2 -> request 0 (decode T = 1, accepted 1, N = 5 -> post-step 6)
    buf["idx_mapping"][:] = [2, -1, 0]
    buf["query_metadata"][:] = [0, 4, 4, 5]  # lengths 4, 0, 1
    buf["num_computed_tokens"][[2, 0]] = [17, 6]
    buf["num_accepted_tokens"][[2, 0]] = [3, 1]
    buf["num_computed_tokens"][1] = 1000  # request 1 is not in this batch: never read
    buf["live_cols"][[2, 0]] = [1, 0]  # ceil(18/16) - 1 = 1; ceil(6/16) - 1 = 0
    buf["block_table"][0, 0, :2] = [3, 4]
    buf["block_table"][1, 0, :2] = [7, 8]
    buf["block_table"][0, 1, :2] = [1, 2]  # padding row's table: must stay untouched
    buf["block_table"][1, 1, :2] = [5, 6]
    buf["block_table"][0, 2, :1] = [9]
    buf["block_table"][1, 2, :1] = [10]
    for g, live in ((0, 4), (1, 8)):
        buf["ring_start"][g, live], buf["num_committed"][g, live] = 2, 5
    for g, live in ((0, 9), (1, 10)):
        buf["ring_start"][g, live], buf["num_committed"][g, live] = 1, 3
    buf["plan_ring_start"][:3] = [4, 4, 4]
    buf["plan_flush_count"][:3] = [4, 4, 4]
    buf["src_slots"][:] = 77
    buf["dst_slots"][:] = 77
    exp = snapshot(buf)
    postprocess_step(buf, GEO, V2_ALIGN, 3)
    # batch 0: as case (a): commit (2, 8), plan (2, 7), publish col 0 (slots 3 / 7)
    for g, live, dst in ((0, 4, 3), (1, 8, 7)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 2, 8
        exp["ring_start"][g, dst], exp["num_committed"][g, dst] = 0, 0
    exp["plan_ring_start"][0], exp["plan_flush_count"][0] = 2, 7
    set_packed(exp, 0, (4, 8), (3, 7))
    # batch 1 (padding): plan (0, -1) and nothing else (packed entries keep 77)
    exp["plan_ring_start"][1], exp["plan_flush_count"][1] = 0, -1
    # batch 2: 3 + 1 = 4 <= 16 no checkpoint -> (1, 4); after 6, running 6, aligned 0 < 6: no publish
    for g, live in ((0, 9), (1, 10)):
        exp["ring_start"][g, live], exp["num_committed"][g, live] = 1, 4
    exp["plan_ring_start"][2], exp["plan_flush_count"][2] = 0, -1
    set_packed(exp, 2, (0, 0), (0, 0))
    # compaction over rows 0..2: only row 0
    exp["active_request_indices"][:] = [0, -1, -1, -1]
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (h) v1 and v2 conventions give identical buffers
# --------------------------------------------------------------------------------------

# (computed_before, query_len, accepted, prefilling, live_col) per batch row; table per row
STEP = [
    (14, 4, 3, False, 1),   # case (a)
    (16, 48, 0, True, 3),   # multi-block prefill ending on a boundary
    (30, 4, 2, False, 2),   # checkpoint and publish
]
TABLES = [([3, 4, 0, 0], [13, 14, 0, 0]),
          ([0, 5, 6, 7], [0, 15, 16, 17]),
          ([1, 2, 8, 0], [11, 12, 18, 0])]
TRACKERS = {0: (2, 5), 2: (3, 14)}  # live-slot trackers of the decode rows


def _encode(conv: Conventions, mapping: list[int]) -> dict[str, np.ndarray]:
    buf = make_buffers(GEO, num_reqs=3, num_cols=4, num_slots=20, cumulative=conv.cumulative)
    cum = 0
    for b, (n, q, acc, pre, live) in enumerate(STEP):
        req = mapping[b] if conv.has_idx_mapping else b
        if conv.has_idx_mapping:
            buf["idx_mapping"][b] = req
        if conv.cumulative:
            buf["query_metadata"][b] = cum
            buf["query_metadata"][b + 1] = cum + q
        else:
            buf["query_metadata"][b] = q
        cum += q
        # post-step counts advance by the whole chunk (prefill) or the accepted tokens (decode)
        buf["num_computed_tokens"][req] = n + ((q if pre else acc) if conv.post_step else 0)
        buf["num_accepted_tokens"][req] = acc
        buf["is_prefilling"][b] = int(pre)
        buf["live_cols"][req] = live
        for g in range(2):
            buf["block_table"][g, b] = TABLES[b][g]
        if b in TRACKERS:
            for g in range(2):
                slot = TABLES[b][g][live]
                buf["ring_start"][g, slot], buf["num_committed"][g, slot] = TRACKERS[b]
    return buf


OUTPUTS = ("ring_start", "num_committed", "plan_ring_start", "plan_flush_count",
           "src_slots", "dst_slots", "active_request_indices")


@pytest.mark.parametrize("other", [c for c in Conventions.all()
                                   if c.materialize_prefixes and not c.live_col_is_zero],
                         ids=lambda c: c.label())
def test_v1_and_v2_conventions_agree(other):
    v1 = _encode(V1_ALIGN, [0, 1, 2])
    before = snapshot(v1)
    postprocess_step(v1, GEO, V1_ALIGN, 3)
    vx = _encode(other, [2, 0, 1])  # a permuted idx_mapping where there is one
    postprocess_step(vx, GEO, other, 3)
    for k in OUTPUTS:
        np.testing.assert_array_equal(vx[k], v1[k], err_msg=k)
    # not vacuous: the step published rows 0 and 2 (replays 7 and 2) and row 1 published in place
    assert list(v1["plan_flush_count"][:3]) == [7, -1, 2]
    assert list(v1["active_request_indices"]) == [0, 2, -1, -1]
    assert not np.array_equal(before["ring_start"], v1["ring_start"])


# --------------------------------------------------------------------------------------
# (i) migration
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vectorized", [False, True])
def test_migration_copy_reset_noop(vectorized):
    geo = Geometry(max_num_reqs=6, block_size=16, window=16, ring_len=20)
    buf = make_buffers(geo, num_reqs=5, num_cols=3, num_slots=16)
    # row 0: copy  src col 0 (slot 3 / 13) -> dst col 1 (slot 4 / 14)
    # row 1: reset no source (-1) -> dst col 0 (slot 5 / 15)
    # row 2: no-op src col == dst col (slot 6 / 12)
    # row 3: no-op destination column is null (slot 0)
    # row 4: reset source column holds the null slot -> dst col 2 (slot 7 / 11)
    buf["block_table"][0, :5] = [[3, 4, 0], [5, 0, 0], [1, 6, 0], [2, 0, 0], [0, 8, 7]]
    buf["block_table"][1, :5] = [[13, 14, 0], [15, 0, 0], [1, 12, 0], [2, 0, 0], [0, 10, 11]]
    buf["src_cols"][:5] = [0, -1, 1, 0, 0]
    buf["dst_cols"][:5] = [1, 0, 1, 1, 2]
    buf["src_cols"][5], buf["dst_cols"][5] = 0, 1  # row 5 is beyond num_reqs: ignored
    exp = snapshot(buf)
    migrate_launch(buf, geo, False, 5, vectorized=vectorized)
    # initial markers: ring_start[g, s] = (3s + g) % 20, num_committed[g, s] = (s + 2g) % 17
    # row 0: slot 4 <- slot 3 = (9 % 20, 3 % 17) = (9, 3)
    #        slot 14 <- slot 13 = ((39 + 1) % 20, (13 + 2) % 17) = (0, 15)
    exp["ring_start"][0, 4], exp["num_committed"][0, 4] = 9, 3
    exp["ring_start"][1, 14], exp["num_committed"][1, 14] = 0, 15
    # rows 1 and 4: fresh destinations get (0, 0)
    for g, s in ((0, 5), (1, 15), (0, 7), (1, 11)):
        exp["ring_start"][g, s], exp["num_committed"][g, s] = 0, 0
    assert_buffers(buf, exp)


def test_migration_with_idx_mapping_skips_padding_rows():
    geo = Geometry(max_num_reqs=4, block_size=16, window=16, ring_len=20)
    buf = make_buffers(geo, num_reqs=2, num_cols=2, num_slots=8, layers=(1,))
    buf["idx_mapping"][:] = [-1, 3]
    buf["block_table"][0, 0] = [1, 2]
    buf["block_table"][0, 1] = [4, 5]
    buf["src_cols"][:] = [0, 0, 0, 0]
    buf["dst_cols"][:] = [1, 1, 1, 1]
    exp = snapshot(buf)
    migrate_launch(buf, geo, True, 2)
    # batch 0 is padding: nothing; batch 1 (request 3) copies slot 4 -> slot 5: (12, 4)
    exp["ring_start"][0, 5], exp["num_committed"][0, 5] = 12, 4
    assert_buffers(buf, exp)


# --------------------------------------------------------------------------------------
# (j) compaction
# --------------------------------------------------------------------------------------


def test_compaction_with_gaps_ignores_stale_rows_beyond_num_reqs():
    geo = Geometry(max_num_reqs=6, block_size=16, window=16, ring_len=20)  # 8 lanes, 6 in capacity
    buf = make_buffers(geo, num_reqs=4, num_cols=2, num_slots=4)
    buf["plan_flush_count"][:] = [3, -1, 0, -1, 5, 2]  # rows 4, 5 hold stale counts
    buf["active_request_indices"][:] = [9, 9, 9, 9, 9, 9]
    exp = snapshot(buf)
    trace = compact_launch(buf, geo, 4)
    # rows < 4 with flush >= 0: 0 (3) and 2 (0, an exact copy is active) -> [0, 2], then -1 up to 6
    exp["active_request_indices"][:] = [0, 2, -1, -1, -1, -1]
    assert_buffers(buf, exp)
    assert trace.num_active == 2


def test_compaction_all_rows_active_and_none_active():
    geo = Geometry(max_num_reqs=4, block_size=16, window=16, ring_len=20)
    buf = make_buffers(geo, num_reqs=4, num_cols=2, num_slots=4)
    buf["plan_flush_count"][:] = [0, 1, 2, 16]
    compact_launch(buf, geo, 4)
    assert list(buf["active_request_indices"]) == [0, 1, 2, 3]
    buf["plan_flush_count"][:] = [-1, -1, -1, -1]
    compact_launch(buf, geo, 4)
    assert list(buf["active_request_indices"]) == [-1, -1, -1, -1]


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, field", [
    (dict(max_num_reqs=0, block_size=16, window=16, ring_len=20), "max_num_reqs"),
    (dict(max_num_reqs=4, block_size=0, window=16, ring_len=20), "block_size"),
    (dict(max_num_reqs=4, block_size=16, window=17, ring_len=21), "window"),
    (dict(max_num_reqs=4, block_size=16, window=0, ring_len=20), "window"),
    (dict(max_num_reqs=4, block_size=16, window=16, ring_len=16), "ring_len"),
    (dict(max_num_reqs=4, block_size=16, window=16, ring_len=20, pad_slot=-1), "pad_slot"),
    (dict(max_num_reqs=4, block_size=16.0, window=16, ring_len=20), "block_size"),
    (dict(max_num_reqs=True, block_size=16, window=16, ring_len=20), "max_num_reqs"),
])
def test_geometry_validated_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Geometry(**kwargs).validated()


def test_geometry_validated_accepts_vllm_geometry():
    geo = Geometry(max_num_reqs=256, block_size=2048, window=16, ring_len=20)
    assert geo.validated() is geo
    assert geo.max_step == 4  # R - W = 20 - 16


@pytest.mark.parametrize("layers", [[], [2, 0], [-1]])
def test_allocate_rejects_empty_groups(layers):
    with pytest.raises(ValueError, match="layers_per_group"):
        allocate(GEO, 4, 4, layers)


def test_allocate_layout():
    buf = allocate(GEO, 3, 5, [2, 3])
    # packed bases: group 0 at 0, group 1 at 2 layers * 4 rows = 8; 5 layers * 4 rows = 20 entries
    assert list(buf["packed_base"]) == [0, 8]
    assert buf["src_slots"].shape == (20,) and (buf["src_slots"] == 0).all()
    assert buf["block_table"].shape == (2, 4, 3)
    assert (buf["plan_flush_count"] == -1).all() and (buf["active_request_indices"] == -1).all()
