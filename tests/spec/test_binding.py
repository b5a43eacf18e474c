"""Hand-computed cases of the binding spec on Python ints."""

from __future__ import annotations

import pytest

from replayssm.spec.binding import (
    CopyLayer,
    GroupLayer,
    TrackerPair,
    bind_group,
    block_copies_include,
    block_copy_tensors,
    planner_flags,
)

CUDA, CPU = 1, 2
FRESH = (900, 901)


def pair(start: int = 10, committed: int = 11, length: int = 8, device: int = CUDA,
         committed_len: int | None = None, committed_device: int | None = None) -> TrackerPair:
    return TrackerPair(start, committed, length, length if committed_len is None else committed_len,
                       device, device if committed_device is None else committed_device)


def group(*pairs: TrackerPair, indices: tuple[int, ...] | None = None) -> list[GroupLayer]:
    indices = indices or tuple(range(len(pairs)))
    return [GroupLayer(i, p) for i, p in zip(indices, pairs)]


def bound(b, i=0):
    q = b.layers[i]
    return (q.start, q.committed, q.start_len, q.committed_len, q.start_device, q.committed_device, q.zeroed)


def test_first_bind_allocates() -> None:
    # Unbound layers hold placeholder (empty) trackers.
    layers = group(pair(1, 2, length=0), pair(3, 4, length=0), pair(5, 6, length=0))
    b = bind_group(layers, 8, CUDA, *FRESH)
    assert b.kept is False
    assert [bound(b, i) for i in range(3)] == [(900, 901, 8, 8, CUDA, CUDA, True)] * 3
    assert b.planner == [True, False, False]


def test_rebind_with_larger_old_pair_keeps_identity_and_trims() -> None:
    old = pair(10, 11, length=16)
    b = bind_group(group(old, old, old), 8, CUDA, *FRESH)
    assert b.kept is True
    assert [bound(b, i) for i in range(3)] == [(10, 11, 8, 8, CUDA, CUDA, False)] * 3


def test_rebind_with_exactly_sized_pair_keeps() -> None:
    old = pair(10, 11, length=8)
    b = bind_group(group(old, old), 8, CUDA, *FRESH)
    assert b.kept is True and bound(b) == (10, 11, 8, 8, CUDA, CUDA, False)


@pytest.mark.parametrize("old", [
    pair(length=7),                      # start and committed too short
    pair(length=8, committed_len=7),     # committed too short
    pair(device=CPU),                    # both on another device
    pair(committed_device=CPU),          # committed on another device
])
def test_unfit_old_pair_reallocates(old: TrackerPair) -> None:
    b = bind_group(group(old, old), 8, CUDA, *FRESH)
    assert b.kept is False
    assert [bound(b, i) for i in range(2)] == [(900, 901, 8, 8, CUDA, CUDA, True)] * 2


@pytest.mark.parametrize("second", [pair(12, 11, length=16), pair(10, 13, length=16), pair(12, 13, length=16)])
def test_layers_disagreeing_reallocates(second: TrackerPair) -> None:
    b = bind_group(group(pair(10, 11, length=16), second), 8, CUDA, *FRESH)
    assert b.kept is False
    assert [bound(b, i) for i in range(2)] == [(900, 901, 8, 8, CUDA, CUDA, True)] * 2


def test_only_first_layer_disagreement_at_the_end_matters() -> None:
    old = pair(10, 11, length=16)
    b = bind_group(group(old, old, old, pair(10, 99, length=16)), 8, CUDA, *FRESH)
    assert b.kept is False


def test_planner_is_lowest_index_not_first_name() -> None:
    p = pair()
    b = bind_group(group(p, p, p, p, indices=(7, 3, 9, 5)), 8, CUDA, *FRESH)
    assert b.planner == [False, True, False, False]


def test_planner_ties_pick_first_in_name_order() -> None:
    assert planner_flags([4, 2, 2, 6]) == [False, True, False, False]
    assert planner_flags([5]) == [True]


def test_empty_group_is_not_bound() -> None:
    with pytest.raises(ValueError):
        bind_group([], 8, CUDA, *FRESH)


def test_block_copies_include_bound_pairs() -> None:
    a = bind_group(group(pair(10, 11, length=16), pair(10, 11, length=16)), 8, CUDA, *FRESH)
    b = bind_group(group(pair(20, 21, length=0)), 8, CUDA, 800, 801)
    ctx = [CopyLayer(True, 10, 11), CopyLayer(True, 10, 11), CopyLayer(True, 800, 801), CopyLayer(False, 5, 6)]
    tensors = block_copy_tensors(ctx)
    assert [ident for present, ident in tensors if present] == [10, 11, 10, 11, 800, 801]
    assert block_copies_include(tensors, [a, b]) is True


def test_block_copies_miss_a_layer_not_listed() -> None:
    b = bind_group(group(pair(20, 21, length=0)), 8, CUDA, 800, 801)
    assert block_copies_include(block_copy_tensors([CopyLayer(False, 800, 801)]), [b]) is False
