"""Differential tests: our kernels against the reference design's own kernels.

The reference kernels are cut from the reference page at test time
(``impl_reference_kernels``) and run on identical copies of random, in-bounds
inputs; every output (trackers of both groups, plan rows, slot tables, active
list) must be bit-identical. Needs the corpus (the ``corpus`` marker:
``$REPLAYSSM_CORPUS``, default ``../shared/reference``).
"""

from __future__ import annotations

import itertools
import random

import pytest
import torch
import triton

import impl_reference_kernels
from impl_builders import Model, i32, make_model
from replayssm.impl import kernels as ours

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def reference() -> object:
    """The reference kernels, cut from the corpus's page once per module."""
    return impl_reference_kernels.load()


MAX_REQS, COLS, SLOTS, BS, WINDOW, RING = 4, 8, 32, 4, 16, 20
FLAGS = ["cumulative", "post_step", "idx_mapping", "materialize", "live_zero"]


def race_free_table(rng: random.Random) -> list[list[int]]:
    """One group's block table, ``MAX_REQS`` rows of ``COLS`` columns: most
    cells a slot, the others the null slot 0, no slot in two cells. Two
    programs storing to one slot's trackers race on a GPU (the last store
    wins, in no fixed order), so two kernels can be compared bit for bit
    only where no slot repeats; what a repeated slot does is the conflict
    obligation's to judge (``prove``)."""
    free = rng.sample(range(1, SLOTS), SLOTS - 1)
    return [[free.pop() if free and rng.random() < 0.8 else 0 for _ in range(COLS)] for _ in range(MAX_REQS)]


def random_model(device: torch.device, rng: random.Random) -> tuple[Model, Model]:
    tables = [race_free_table(rng) for _ in range(2)]
    twins = []
    for _ in range(2):
        m = make_model(device, tables, layers_per_group=[2, 1], num_slots=[SLOTS, SLOTS],
                       max_num_reqs=MAX_REQS, block_size=BS, window=WINDOW, ring=RING)
        twins.append(m)
    for g in range(2):
        start = [rng.randrange(RING) for _ in range(SLOTS)]
        committed = [rng.randrange(WINDOW + 1) for _ in range(SLOTS)]
        for m in twins:
            m.trackers(g)[0].copy_(i32(start, device))
            m.trackers(g)[1].copy_(i32(committed, device))
    garbage = [rng.randrange(SLOTS) for _ in range(3 * MAX_REQS)]
    for m in twins:
        m.ctx.src_slots.copy_(i32(garbage, device).view(3, MAX_REQS))
        m.ctx.dst_slots.copy_(i32(garbage[::-1], device).view(3, MAX_REQS))
        m.ctx.plan_ring_start.fill_(5)
        m.ctx.plan_flush_count.fill_(2)
    return twins[0], twins[1]


def random_step(device: torch.device, rng: random.Random, flags: tuple[bool, ...]) -> dict:
    cumulative, post_step, with_mapping, _, live_zero = flags
    num_reqs = rng.randint(1, MAX_REQS)
    lengths, computed, accepted, prefill, live = [], [], [], [], []
    for _ in range(MAX_REQS):
        is_prefill = rng.random() < 0.4
        if is_prefill:
            before, length = rng.randint(0, 16), rng.randint(1, 12)
            after, acc = before + length, rng.randint(0, 2)
        else:
            before, length = rng.randint(0, 20), rng.randint(1, 4)
            acc = rng.randint(0, length)
            after = before + max(acc, 1)
        lengths.append(length)
        computed.append(after if post_step else before)
        accepted.append(acc)
        prefill.append(is_prefill)
        live.append(rng.randint(-1, COLS - 1))
    if with_mapping:
        requests = list(range(MAX_REQS))
        rng.shuffle(requests)
        mapping = [r if rng.random() < 0.8 else -1 for r in requests]
        by_request = [0] * MAX_REQS
        for values in (computed, accepted, live):
            permuted = list(by_request)
            for row, r in enumerate(requests):
                permuted[r] = values[row]
            values[:] = permuted
    starts = [0] + list(itertools.accumulate(lengths))
    return dict(
        idx_mapping=i32(mapping, device) if with_mapping else None,
        query_metadata=i32(starts if cumulative else lengths, device),
        num_computed_tokens=i32(computed, device),
        num_accepted_tokens=i32(accepted, device),
        is_prefilling=torch.tensor(prefill, device=device),
        live_cols=None if live_zero else i32(live, device),
        num_reqs=num_reqs,
    )


def launch_postprocess(module, m: Model, step: dict, flags: tuple[bool, ...]) -> None:
    cumulative, post_step, with_mapping, materialize, live_zero = flags
    c = m.ctx
    module._postprocess_replayssm_kernel[(step["num_reqs"], 2)](
        step["idx_mapping"], step["query_metadata"], step["num_computed_tokens"],
        step["num_accepted_tokens"], step["is_prefilling"], step["live_cols"],
        c.block_table_ptrs, c.ring_start_ptrs, c.num_committed_ptrs, c.src_slots_ptrs,
        c.dst_slots_ptrs, c.plan_ring_start, c.plan_flush_count, c.block_table_strides,
        c.num_layers, MAX_NUM_REQS=MAX_REQS, MAMBA_BLOCK_SIZE=BS, LOGICAL_WINDOW=WINDOW,
        RING_BUFFER_LEN=RING, PAD_SLOT_ID=0, QUERY_METADATA_IS_CUMULATIVE=cumulative,
        NUM_COMPUTED_IS_POST_STEP=post_step, HAS_IDX_MAPPING=with_mapping,
        MATERIALIZE_PREFIXES=materialize, LIVE_COL_IS_ZERO=live_zero,
    )
    module._compact_replayssm_requests_kernel[(1,)](
        c.plan_flush_count, c.active_request_indices, step["num_reqs"],
        MAX_NUM_REQS=MAX_REQS, BLOCK_SIZE=triton.next_power_of_2(MAX_REQS),
    )


def outputs(m: Model) -> list[list[int]]:
    c = m.ctx
    return [t.flatten().tolist() for t in (*m.trackers(0), *m.trackers(1), c.plan_ring_start,
                                             c.plan_flush_count, c.src_slots, c.dst_slots,
                                             c.active_request_indices)]


@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=5)),
                         ids=lambda f: "-".join(n for n, on in zip(FLAGS, f) if on) or "none")
def test_postprocess_and_compaction_match_reference(device: torch.device, flags: tuple[bool, ...],
                                                    reference: object) -> None:
    rng = random.Random(hash(flags) & 0xFFFF)
    for _ in range(3):
        mine, theirs = random_model(device, rng)
        step = random_step(device, rng, flags)
        launch_postprocess(ours, mine, step, flags)
        launch_postprocess(reference, theirs, step, flags)
        assert outputs(mine) == outputs(theirs), step


@pytest.mark.parametrize("with_mapping", [False, True])
def test_migration_matches_reference(device: torch.device, with_mapping: bool, reference: object) -> None:
    rng = random.Random(7 + with_mapping)
    for _ in range(8):
        mine, theirs = random_model(device, rng)
        num_reqs = rng.randint(1, MAX_REQS)
        src = i32([rng.randint(-1, COLS - 1) for _ in range(MAX_REQS)], device)
        dst = i32([rng.randint(-1, COLS - 1) for _ in range(MAX_REQS)], device)
        mapping = None
        if with_mapping:
            mapping = i32([r if rng.random() < 0.8 else -1
                           for r in rng.sample(range(MAX_REQS), MAX_REQS)], device)
        for module, m in ((ours, mine), (reference, theirs)):
            c = m.ctx
            module._reset_new_replayssm_slots_kernel[(num_reqs, 2)](
                mapping, src, dst, c.block_table_ptrs, c.ring_start_ptrs, c.num_committed_ptrs,
                c.block_table_strides, PAD_SLOT_ID=0, HAS_IDX_MAPPING=with_mapping,
            )
        assert outputs(mine) == outputs(theirs)


def test_random_steps_reach_publish_and_checkpoint(device: torch.device) -> None:
    """Non-vacuity: the generator produces published rows, exact copies and checkpoints."""
    flags = (False, False, False, True, False)
    rng = random.Random(11)
    published = copies = checkpoints = 0
    for _ in range(24):
        m, _ = random_model(device, rng)
        committed_before = m.trackers(0)[1].clone()
        step = random_step(device, rng, flags)
        launch_postprocess(ours, m, step, flags)
        published += int((m.ctx.active_request_indices >= 0).sum())
        copies += int((m.ctx.plan_flush_count == 0).sum())
        # A checkpoint leaves committed = accepted <= 4 where it was larger.
        after = m.trackers(0)[1]
        checkpoints += int(((after > 0) & (after < committed_before)).sum())
    assert published > 0 and copies > 0 and checkpoints > 0, (published, copies, checkpoints)
