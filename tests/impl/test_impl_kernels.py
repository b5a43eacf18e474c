"""Worked examples of the boundary helper, compaction and migration kernels."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from impl_builders import i32, make_model
from replayssm.impl.replayssm_utils import mamba_state_copy_boundary


@triton.jit
def _boundary_probe(running, computed, needs, bias, col, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    n, b, c = mamba_state_copy_boundary(tl.load(running + i), tl.load(computed + i), BLOCK)
    tl.store(needs + i, n.to(tl.int32))
    tl.store(bias + i, b)
    tl.store(col + i, c)


def test_boundary_helper(device: torch.device) -> None:
    # (running, new computed) with block 4 -> (copy?, bias, destination column)
    cases = [
        ((7, 9), (1, 1, 1)),  # boundary 8 inside the step
        ((8, 8), (1, 0, 1)),  # ends exactly on 8 (prefill shape)
        ((22, 23), (0, -2, 4)),  # last boundary 20 already behind the running state
        ((1, 3), (0, -1, -1)),  # before the first boundary
        ((0, 0), (1, 0, -1)),  # empty: copy flag set but no column
        ((5, 12), (1, 7, 2)),  # two boundaries in one step: only the last (12)
    ]
    running = i32([c[0][0] for c in cases], device)
    computed = i32([c[0][1] for c in cases], device)
    out = [torch.full((len(cases),), 99, dtype=torch.int32, device=device) for _ in range(3)]
    _boundary_probe[(len(cases),)](running, computed, *out, BLOCK=4)
    got = list(zip(*(o.tolist() for o in out)))
    assert got == [c[1] for c in cases]


def compact_model(device: torch.device, max_num_reqs: int):
    return make_model(device, [[[1, 2]] * max_num_reqs], max_num_reqs=max_num_reqs)


@pytest.mark.parametrize(
    "max_num_reqs,flush,num_reqs,expected",
    [
        (5, [0, -1, 3, 2, -1], 5, [0, 2, 3, -1, -1]),
        (5, [0, -1, 3, 2, 1], 3, [0, 2, -1, -1, -1]),  # rows >= num_reqs ignored
        (5, [-1] * 5, 5, [-1] * 5),
        (4, [1, 1, 1, 1], 4, [0, 1, 2, 3]),  # power-of-two capacity, all active
        (3, [-1, 0, 0], 0, [-1, -1, -1]),
    ],
)
def test_compaction(device: torch.device, max_num_reqs: int, flush: list[int], num_reqs: int,
                    expected: list[int]) -> None:
    model = compact_model(device, max_num_reqs)
    ctx = model.ctx
    ctx.plan_flush_count.copy_(i32(flush, device))
    ctx.active_request_indices.fill_(7)
    ctx.compact(num_reqs)
    assert ctx.active_request_indices.tolist() == expected
    assert ctx.plan_flush_count.tolist() == flush


MIGRATION_ROWS = [
    [1, 2, 3, 0],  # row 0: copy from col 0 (slot 1) to col 1 (slot 2)
    [4, 5, 0, 0],  # row 1: fresh request (src col -1): reset col 1 (slot 5)
    [6, 0, 7, 0],  # row 2: src col 1 is null: reset col 2 (slot 7)
    [8, 9, 0, 0],  # row 3: same column: no-op
    [10, 11, 0, 0],  # row 4: destination null column 2: no-op
    [12, 12, 0, 0],  # row 5: different columns, same slot: no-op
    [13, 14, 0, 0],  # row 6: padding row when an idx_mapping is used
    [15, 16, 0, 0],  # row 7: never launched
]
MIGRATION_SRC = [0, -1, 1, 1, 0, 0]
MIGRATION_DST = [1, 1, 2, 1, 2, 1]


@pytest.mark.parametrize("with_mapping", [False, True])
def test_migration(device: torch.device, with_mapping: bool) -> None:
    groups = [MIGRATION_ROWS, [[s + 20 if s else 0 for s in row] for row in MIGRATION_ROWS]]
    model = make_model(device, groups, layers_per_group=[1, 2], max_num_reqs=8)
    for g in range(2):
        start, committed = model.trackers(g)
        start.copy_(torch.arange(start.numel(), dtype=torch.int32) % 20)
        committed.copy_(torch.arange(committed.numel(), dtype=torch.int32) % 13 + 1)
    before = [[t.clone() for t in model.trackers(g)] for g in range(2)]
    if with_mapping:
        # rows 0..5 are requests 7, 0..4; row 6 is padding. Request 5, 6 are unused.
        mapping = i32([7, 0, 1, 2, 3, 4, -1, -1], device)
        order = [7, 0, 1, 2, 3, 4]
        src = [50] * 8
        dst = [50] * 8
        for row, request in enumerate(order):
            src[request], dst[request] = MIGRATION_SRC[row], MIGRATION_DST[row]
        num_reqs = 7
    else:
        mapping = None
        src, dst = MIGRATION_SRC + [0, 0], MIGRATION_DST + [0, 0]
        num_reqs = 6
    model.ctx.reset_new_slots(idx_mapping=mapping, src_cols=i32(src, device),
                              dst_cols=i32(dst, device), num_reqs=num_reqs)
    for g, offset in enumerate((0, 20)):
        start, committed = (t.clone() for t in before[g])
        start[2 + offset], committed[2 + offset] = start[1 + offset], committed[1 + offset]
        for fresh in (5, 7):
            start[fresh + offset], committed[fresh + offset] = 0, 0
        got = model.trackers(g)
        assert got[0].tolist() == start.tolist(), f"group {g} ring_start"
        assert got[1].tolist() == committed.tolist(), f"group {g} committed"


def test_migration_zero_requests_is_a_no_op(device: torch.device) -> None:
    model = make_model(device, [[[1, 2]]], max_num_reqs=1)
    start, committed = model.trackers(0)
    start.fill_(4)
    model.ctx.reset_new_slots(idx_mapping=None, src_cols=i32([-1], device),
                              dst_cols=i32([1], device), num_reqs=0)
    assert start.tolist() == [4] * start.numel()
