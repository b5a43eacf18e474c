"""Worked examples of ``ReplaySSMModelContext.postprocess`` (and its kernels).

Every expected number below was worked out by hand from the lifecycle rules
(design note sections 2-3); none comes from a model of the kernel.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from impl_builders import Model, i32, make_model

# Block-table rows (batch rows) of group 0; group 1 uses slot + 40 (null stays 0).
ROWS = [
    [11, 12, 13, 14, 0, 0, 0, 0],  # row 0, request A: decode crossing block 1's end
    [21, 22, 23, 0, 0, 0, 0, 0],  # row 1, request B: prefill chunk ending at 8
    [31, 32, 33, 34, 35, 36, 37, 0],  # row 2, request C: decode that checkpoints
    [41, 42, 0, 0, 0, 0, 0, 0],  # row 3: padding row when an idx_mapping is used
    [0] * 8,  # row 4: never launched
]
OFFSET = [0, 40]
GARBAGE_SLOT = 47
FLAGS = ["cumulative", "post_step", "idx_mapping", "materialize", "live_zero"]


def slot(group: int, s: int) -> int:
    return s + OFFSET[group] if s else 0


def build(device: torch.device, mode: str) -> Model:
    tables = [[[slot(g, s) for s in row] for row in ROWS] for g in range(2)]
    model = make_model(
        device, tables, layers_per_group=[2, 1], num_slots=[48, 96], max_num_reqs=5, mode=mode
    )
    for g in range(2):
        start, committed = model.trackers(g)
        start.fill_(3)
        committed.fill_(4)
        for row, (s0, c0) in zip(ROWS[:4], [(5, 2), (9, 3), (15, 14), (1, 1)]):
            for s in row:
                if s:
                    start[slot(g, s)] = s0
                    committed[slot(g, s)] = c0
        start[0] = 7
        committed[0] = 7
    ctx = model.ctx
    ctx.plan_ring_start.fill_(7)
    ctx.plan_flush_count.fill_(6)
    ctx.src_slots.fill_(GARBAGE_SLOT)
    ctx.dst_slots.fill_(GARBAGE_SLOT)
    ctx.active_request_indices.fill_(3)
    return model


def step_inputs(device: torch.device, cumulative: bool, post_step: bool, idx_mapping: bool,
                live_zero: bool) -> dict:
    """The same logical step (rows A, B, C, padding) under each input convention."""
    lengths = [4, 5, 4, 2]
    computed = [9, 8, 23, 10] if post_step else [6, 3, 21, 8]
    accepted = [3, 0, 2, 1]
    live = [2, 1, 6, 0]
    # Request slots no row maps to hold 1: wrong indexing reads a wrong but
    # in-bounds value (planted-bug tests stay memory safe).
    if idx_mapping:
        mapping = [3, 0, 4, -1]
        num_reqs = 4
        by_request = lambda values: [values[1], 1, 1, values[0], values[2]]  # noqa: E731
    else:
        mapping = None
        num_reqs = 3
        by_request = lambda values: values[:3] + [1, 1]  # noqa: E731
    return dict(
        idx_mapping=None if mapping is None else i32(mapping + [-1], device),
        query_metadata=i32([0, 4, 9, 13, 15, 15] if cumulative else lengths + [0], device),
        query_metadata_is_cumulative=cumulative,
        num_computed_tokens=i32(by_request(computed), device),
        num_computed_is_post_step=post_step,
        num_accepted_tokens=i32(by_request(accepted), device),
        is_prefilling=torch.tensor([False, True, False, False, False], device=device),
        live_cols=None if live_zero else i32(by_request(live), device),
        num_reqs=num_reqs,
    )


@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=5)),
                         ids=lambda f: "-".join(n for n, on in zip(FLAGS, f) if on) or "none")
def test_postprocess_all_variants(device: torch.device, flags: tuple[bool, ...]) -> None:
    run_variant(device, flags)


def run_variant(device: torch.device, flags: tuple[bool, ...], tamper=None) -> None:
    """The shared worked example under one input convention; ``tamper`` plants a bug."""
    cumulative, post_step, idx_mapping, materialize, live_zero = flags
    model = build(device, "align" if materialize else "none")
    ctx = model.ctx
    if tamper is not None:
        tamper(ctx)
    starts0 = [model.trackers(g)[0].clone() for g in range(2)]
    committed0 = [model.trackers(g)[1].clone() for g in range(2)]
    states0 = [[layer.kv_cache[1].clone() for layer in layers] for layers in model.groups]
    tables0 = [t.clone() for t in model.tables]

    ctx.postprocess(**step_inputs(device, cumulative, post_step, idx_mapping, live_zero))

    live_a, live_b, live_c = (11, 21, 31) if live_zero else (13, 22, 37)
    for g in range(2):
        start, committed = starts0[g].clone(), committed0[g].clone()
        # A: no checkpoint (2 + 4 <= 16): start 5, committed 2 + 3.
        start[slot(g, live_a)], committed[slot(g, live_a)] = 5, 5
        # C: checkpoint (14 + 4 > 16): start (15 + 14) mod 20 = 9, committed 2.
        start[slot(g, live_c)], committed[slot(g, live_c)] = 9, 2
        if materialize:
            # A publishes block 1 (slot 12); B resets both blocks it wrote.
            for s in (12, 21, 22):
                start[slot(g, s)], committed[slot(g, s)] = 0, 0
        else:
            start[slot(g, live_b)], committed[slot(g, live_b)] = 0, 0
        got_start, got_committed = model.trackers(g)
        assert got_start.tolist() == start.tolist(), f"group {g} ring_start"
        assert got_committed.tolist() == committed.tolist(), f"group {g} committed"
        assert torch.equal(model.tables[g], tables0[g])

    # Plan rows: A, B, C, then padding (reset only when launched), then never launched.
    plan_start = [7] * 5
    plan_flush = [6] * 5
    plan_start[:3] = [0, 0, 0]
    plan_flush[:3] = [-1, -1, -1]
    if idx_mapping:
        plan_start[3], plan_flush[3] = 0, -1
    if materialize:
        plan_start[0], plan_flush[0] = 5, 4  # replay bias 1 + 1 + 2 committed rows
        if live_zero:
            plan_flush[1] = 0  # exact copy from the live block 0 into block 1
    assert ctx.plan_ring_start.tolist() == plan_start
    assert ctx.plan_flush_count.tolist() == plan_flush

    for layer in range(3):
        g = 0 if layer < 2 else 1
        src = [GARBAGE_SLOT] * 5
        dst = [GARBAGE_SLOT] * 5
        if materialize:
            src[:3] = [slot(g, live_a), slot(g, live_b), 0]
            dst[:3] = [slot(g, 12), slot(g, 22), 0]
        assert ctx.src_slots[layer].tolist() == src, f"layer {layer} src"
        assert ctx.dst_slots[layer].tolist() == dst, f"layer {layer} dst"

    if materialize:
        active = [0, 1, -1, -1, -1] if live_zero else [0, -1, -1, -1, -1]
        assert ctx.active_request_indices.tolist() == active
    else:
        assert ctx.active_request_indices.tolist() == [3] * 5

    # Materialize wrote exactly the published slots.
    for g, layers in enumerate(model.groups):
        for layer, before in zip(layers, states0[g]):
            after = layer.kv_cache[1]
            written = {slot(g, 12)} | ({slot(g, 22)} if live_zero else set()) if materialize else set()
            for s in range(after.shape[0]):
                if s not in written:
                    assert torch.equal(after[s], before[s]), f"group {g} slot {s} touched"
            if materialize:
                assert not torch.equal(after[slot(g, 12)], before[slot(g, 12)])
                if live_zero:
                    assert torch.equal(after[slot(g, 22)], before[slot(g, 21)])


def single_row(device: torch.device, row: list[int], tracker: dict[int, tuple[int, int]], *,
               mode: str = "align", **layer_kwargs: object) -> Model:
    model = make_model(device, [[row]], max_num_reqs=1, mode=mode, **layer_kwargs)
    start, committed = model.trackers(0)
    start.fill_(3)
    committed.fill_(4)
    for s, (s0, c0) in tracker.items():
        start[s], committed[s] = s0, c0
    return model


def run_step(model: Model, device: torch.device, *, length: int, computed: int, accepted: int,
             prefill: bool, live: int | None) -> None:
    model.ctx.postprocess(
        idx_mapping=None,
        query_metadata=i32([length], device),
        query_metadata_is_cumulative=False,
        num_computed_tokens=i32([computed], device),
        num_computed_is_post_step=False,
        num_accepted_tokens=i32([accepted], device),
        is_prefilling=torch.tensor([prefill], device=device),
        live_cols=None if live is None else i32([live], device),
        num_reqs=1,
    )


def trackers_of(model: Model, slots: list[int]) -> list[tuple[int, int]]:
    start, committed = model.trackers(0)
    return [(int(start[s]), int(committed[s])) for s in slots]


def plan(model: Model) -> tuple[int, int, int, int, int]:
    ctx = model.ctx
    return (int(ctx.plan_ring_start[0]), int(ctx.plan_flush_count[0]), int(ctx.src_slots[0, 0]),
            int(ctx.dst_slots[0, 0]), int(ctx.active_request_indices[0]))


def test_decode_checkpoint_and_boundary_wraps_ring_of_20(device: torch.device) -> None:
    # 22 computed, 14 committed from start 15; 4 tokens, 3 accepted -> 25.
    # 14 + 4 > 16: checkpoint, start (15 + 14) mod 20 = 9 (a bit mask would give 29).
    # Running state at 23, boundary 24: bias 1, replay 2 rows from 9 into block 5.
    row = [1, 2, 3, 4, 5, 6, 7, 0]
    model = single_row(device, row, {7: (15, 14), 6: (11, 11)})
    run_step(model, device, length=4, computed=22, accepted=3, prefill=False, live=6)
    # (a bit-mask ring would give (15 + 14) & 31 = 29, not the wrapped 9)
    assert trackers_of(model, [7, 6, 5, 0]) == [(9, 3), (0, 0), (3, 4), (3, 4)]
    assert plan(model) == (9, 2, 7, 6, 0)


def test_decode_live_is_destination_publishes_canonical(device: torch.device) -> None:
    # 5 computed, 3 committed from start 4; 3 tokens all accepted -> 8 = boundary.
    # Running state at 6: bias 2, replay 2 + 1 + 3 = 6 rows; live slot = destination,
    # so the canonical (0, 0) replaces the live (4, 6).
    model = single_row(device, [1, 2, 0, 0], {2: (4, 3)})
    run_step(model, device, length=3, computed=5, accepted=3, prefill=False, live=1)
    assert trackers_of(model, [2, 1]) == [(0, 0), (3, 4)]
    assert plan(model) == (4, 6, 2, 2, 0)


def test_prefill_over_several_blocks_skips_null_slot(device: torch.device) -> None:
    # 3 computed, 10 prefilled -> 13: blocks 0..3 written (block 2 is null: untouched),
    # no boundary reached exactly (12 < 13), so no plan.
    model = single_row(device, [1, 2, 0, 4, 5, 0], {s: (6, 6) for s in (0, 1, 2, 4, 5)})
    run_step(model, device, length=10, computed=3, accepted=1, prefill=True, live=3)
    assert trackers_of(model, [1, 2, 0, 4, 5]) == [(0, 0), (0, 0), (6, 6), (0, 0), (6, 6)]
    assert plan(model) == (0, -1, 0, 0, -1)


def test_prefill_first_chunk_ending_on_boundary_in_live_block(device: torch.device) -> None:
    # 0 -> 8 tokens: boundary 8 ends block 1, which is the live block: nothing to copy.
    model = single_row(device, [1, 2, 3, 0], {1: (6, 6), 2: (6, 6), 3: (6, 6)})
    run_step(model, device, length=8, computed=0, accepted=1, prefill=True, live=1)
    assert trackers_of(model, [1, 2, 3]) == [(0, 0), (0, 0), (6, 6)]
    assert plan(model) == (0, -1, 2, 2, -1)


def test_null_live_slot_changes_nothing(device: torch.device) -> None:
    model = single_row(device, [1, 0, 3, 0], {1: (6, 6), 0: (7, 7)})
    before = [t.clone() for t in model.trackers(0)]
    run_step(model, device, length=4, computed=6, accepted=3, prefill=False, live=1)
    assert all(torch.equal(a, b) for a, b in zip(model.trackers(0), before))
    assert plan(model) == (0, -1, 0, 0, -1)


def test_negative_live_column_changes_nothing(device: torch.device) -> None:
    model = single_row(device, [1, 2, 3, 0], {1: (6, 6)})
    before = [t.clone() for t in model.trackers(0)]
    run_step(model, device, length=4, computed=6, accepted=3, prefill=False, live=-1)
    assert all(torch.equal(a, b) for a, b in zip(model.trackers(0), before))
    assert plan(model) == (0, -1, 0, 0, -1)


def test_null_destination_keeps_plan_but_pads_slots(device: torch.device) -> None:
    # Decode 6 -> 9 crossing boundary 8 whose block 1 is null: the row still has a
    # plan (replay 1 + 1 + 2 = 4 rows from 5) but its slot pair is padding.
    model = single_row(device, [1, 0, 3, 0], {3: (5, 2), 0: (7, 7)})
    run_step(model, device, length=4, computed=6, accepted=3, prefill=False, live=2)
    assert trackers_of(model, [3, 0]) == [(5, 5), (7, 7)]
    assert plan(model) == (5, 4, 0, 0, 0)


def test_mode_none_prefill_resets_only_live_slot(device: torch.device) -> None:
    model = single_row(device, [1, 2, 3, 0], {1: (6, 6), 2: (6, 6)}, mode="none")
    model.ctx.src_slots.fill_(9)
    run_step(model, device, length=8, computed=0, accepted=1, prefill=True, live=None)
    assert trackers_of(model, [1, 2]) == [(0, 0), (6, 6)]
    assert plan(model) == (0, -1, 9, 0, -1)


def test_zero_requests_is_a_no_op(device: torch.device) -> None:
    model = single_row(device, [1, 2, 3, 0], {1: (6, 6)})
    model.ctx.plan_flush_count.fill_(5)
    model.ctx.postprocess(
        idx_mapping=None, query_metadata=i32([0], device), query_metadata_is_cumulative=False,
        num_computed_tokens=i32([0], device), num_computed_is_post_step=False,
        num_accepted_tokens=i32([0], device), is_prefilling=torch.tensor([False], device=device),
        live_cols=None, num_reqs=0,
    )
    assert model.ctx.plan_flush_count.tolist() == [5]
    assert trackers_of(model, [1]) == [(6, 6)]


class _FlippedFlag:
    """Planted bug: launches the postprocess kernel with one constexpr flag inverted."""

    def __init__(self, kernel, flag: str) -> None:
        self.kernel, self.flag = kernel, flag

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def run(*args, **kwargs):
            kwargs[self.flag] = not kwargs[self.flag]
            return launch(*args, **kwargs)

        return run


@pytest.mark.parametrize(
    "flag,flags",
    [
        ("QUERY_METADATA_IS_CUMULATIVE", (False, False, False, True, False)),
        ("NUM_COMPUTED_IS_POST_STEP", (False, False, False, True, False)),
        ("HAS_IDX_MAPPING", (False, False, True, True, False)),
        ("MATERIALIZE_PREFIXES", (False, False, False, True, False)),
        ("LIVE_COL_IS_ZERO", (False, False, False, False, False)),
    ],
)
def test_teeth_wrong_kernel_variant_is_caught(device: torch.device, monkeypatch: pytest.MonkeyPatch,
                                              flag: str, flags: tuple[bool, ...]) -> None:
    from replayssm.impl import context

    monkeypatch.setattr(context, "_postprocess_replayssm_kernel",
                        _FlippedFlag(context._postprocess_replayssm_kernel, flag))
    with pytest.raises(AssertionError):
        run_variant(device, flags)


def test_teeth_power_of_two_ring_is_caught(device: torch.device) -> None:
    # Planted bug: ring length 32 (where a bit mask would be right) instead of 20.
    with pytest.raises(AssertionError, match="ring_start"):
        run_variant(device, (False, False, False, True, False),
                    tamper=lambda ctx: setattr(ctx, "ring_buffer_len", 32))
