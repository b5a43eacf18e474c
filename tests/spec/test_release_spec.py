"""The released (0.33.0) lifecycle in the spec runs on every interpreter: hand-computed cases on Python
ints, whole launches on numpy lanes equal to the lane-by-lane oracle, seeded lifecycles whose ghost
refinement holds after every pass, the Triton cursor, and the validator's allowed combinations."""

from __future__ import annotations

import random

import numpy as np
import pytest

from replayssm.spec import release_caller as caller
from replayssm.spec.memory import ConcreteMemory, VectorMemory
from replayssm.spec.provenance import citation_problems
from replayssm.spec.release_cursor import decode_cursor
from replayssm.spec.release_ghost import (
    BufferGhost, RingGhost, accept, flashinfer_pass, flashinfer_reads_ok, prefill, refines, triton_decode,
    triton_reads_ok, triton_refines,
)
from replayssm.spec.release_trackers import PROGRAMS, TRACKERS, ReleaseGeometry

GEO = ReleaseGeometry(16, 4, 20)


def buffers(slots: list[int], start: list[int], prev: list[int], pending: list[int], accepted: list[int],
            qsl: list[int]) -> dict[str, np.ndarray]:
    return {"state_batch_indices": np.array(slots, dtype=np.int32), "ring_start": np.array(start, dtype=np.int32),
            "prev_num_accepted": np.array(prev, dtype=np.int32), "prev_query_len": np.array(pending, dtype=np.int32),
            "num_accepted_tokens": np.array(accepted, dtype=np.int32), "query_start_loc": np.array(qsl, dtype=np.int32)}


def test_commit_by_hand_folds_and_wraps_modulo_twenty() -> None:
    b = buffers([1], [0, 18], [0, 14], [0, 4], [2], [0, 3])
    t = PROGRAMS["commit"](ConcreteMemory(b), GEO, 0, 1, 2)
    assert (t.next_start, t.next_prev, t.next_pending) == ((18 + 14) % 20, 2, 3)
    assert [int(b[n][1]) for n in TRACKERS] == [12, 2, 3]


def test_commit_without_fold_adds_the_accepted_rows() -> None:
    b = buffers([1], [0, 5], [0, 3], [0, 4], [4], [0, 4])
    PROGRAMS["commit"](ConcreteMemory(b), GEO, 0, 1, 2)
    assert [int(b[n][1]) for n in TRACKERS] == [5, 7, 4]


def test_commit_after_reset_commits_nothing_and_records_the_query() -> None:
    b = buffers([1], [0, 0], [0, 0], [0, 0], [3], [0, 4])
    PROGRAMS["commit"](ConcreteMemory(b), GEO, 0, 1, 2)
    assert [int(b[n][1]) for n in TRACKERS] == [0, 0, 4]


def test_advance_and_reset_by_hand() -> None:
    stp = ReleaseGeometry(16, 1, 17)
    b = buffers([1, 0], [0, 9], [0, 16], [0, 2], [1, 1], [0, 1, 2])
    PROGRAMS["advance"](ConcreteMemory(b), stp, 0, 2, 2)
    PROGRAMS["advance"](ConcreteMemory(b), stp, 1, 2, 2)  # the pad slot 0 is skipped
    assert [int(b[n][1]) for n in TRACKERS] == [(9 + 16) % 17, 1, 2] and int(b["ring_start"][0]) == 0
    PROGRAMS["reset"](ConcreteMemory(b), stp, 0, 2, 2)
    assert [int(b[n][1]) for n in TRACKERS] == [0, 0, 0]


@pytest.mark.parametrize("transition", ["reset", "advance", "commit"])
def test_a_launch_on_numpy_lanes_equals_the_lane_by_lane_oracle(transition: str) -> None:
    rng = np.random.default_rng(7)
    geo = GEO if transition != "advance" else ReleaseGeometry(16, 1, 17)
    for _ in range(30):
        n, states = 6, 9
        slots = rng.permutation(np.arange(-1, states + 2))[:n]  # pad, negative and past-the-end slots too
        start = rng.integers(0, geo.ring_len, states)
        prev = rng.integers(0, geo.window + 1, states)
        pending = rng.integers(0, geo.query_len + 1, states)
        accepted = rng.integers(1, geo.query_len + 1, n)
        qsl = np.concatenate([[0], np.cumsum(rng.integers(1, geo.query_len + 1, n))])
        one = buffers(list(slots), list(start), list(prev), list(pending), list(accepted), list(qsl))
        many = {k: v.copy() for k, v in one.items()}
        for lane in range(8):  # lanes past n_slots too, as a block of the launch
            PROGRAMS[transition](ConcreteMemory(one), geo, lane, n, states)
        PROGRAMS[transition](VectorMemory(many, 8), geo, np.arange(8), n, states)
        for k in one:
            assert (one[k] == many[k]).all(), k


def test_a_seeded_mtp_lifecycle_keeps_the_refinement_on_ints() -> None:
    """Prefill, reset, then passes: commit (with the count of the previous pass), FlashInfer's pass of the
    current query; the ghost refinement and FlashInfer's contract hold before every pass."""
    rng = random.Random(3)
    for geo in (GEO, ReleaseGeometry(4, 2, 6), ReleaseGeometry(3, 3, 6)):
        b = buffers([1], [0, 7], [0, 5], [0, 2], [1], [0, 1])
        ghost = RingGhost(0, 0, tuple([-1] * geo.ring_len))
        PROGRAMS["reset"](ConcreteMemory(b), geo, 0, 1, 2)
        ghost = prefill(ghost, 40)
        accepted = 1
        for _ in range(200):
            query = rng.randint(1, geo.query_len)
            b["num_accepted_tokens"][0] = accepted
            b["query_start_loc"][1] = query
            PROGRAMS["commit"](ConcreteMemory(b), geo, 0, 1, 2)
            start, prev, pending = (int(b[n][1]) for n in TRACKERS)
            assert refines(ghost, start, prev, geo) and flashinfer_reads_ok(start, prev, pending, geo)
            ghost = flashinfer_pass(ghost, start, prev, query, geo)
            accepted = rng.randint(1, query)
            ghost = accept(ghost, accepted)


def test_a_seeded_stp_lifecycle_keeps_the_refinement_on_ints() -> None:
    geo = ReleaseGeometry(4, 1, 5)
    b = buffers([1], [0, 0], [0, 0], [0, 0], [1], [0, 1])
    ghost = prefill(RingGhost(0, 0, tuple([-1] * geo.ring_len)), 11)
    for _ in range(60):
        start, prev = int(b["ring_start"][1]), int(b["prev_num_accepted"][1])
        assert refines(ghost, start, prev, geo)
        ghost = accept(flashinfer_pass(ghost, start, prev, 1, geo), 1)
        PROGRAMS["advance"](ConcreteMemory(b), geo, 0, 1, 2)
    assert refines(ghost, int(b["ring_start"][1]), int(b["prev_num_accepted"][1]), geo)


@pytest.mark.parametrize("buffer_len, block_size, align", [(16, 1024, False), (4, 6, True), (4, 8, True)])
def test_the_triton_cursor_keeps_the_buffer_refining_the_request(buffer_len: int, block_size: int, align: bool) -> None:
    base = 13
    for tail in (0, 1):  # a prompt whose last token comes as a one-token chunk replayed as decode
        nc = base - tail
        ghost = BufferGhost(nc, tuple([-1] * buffer_len))
        flushes = 0
        for _ in range(70):
            assert triton_refines(ghost, nc, base, buffer_len, block_size, align)
            cur = decode_cursor(nc, 1, base, buffer_len, block_size, align)
            assert 0 <= cur.write_pos < buffer_len and triton_reads_ok(ghost, cur, nc)
            flushes += bool(cur.is_flush)
            ghost = triton_decode(ghost, cur, nc)
            nc += 1
        assert flushes >= 70 // max(buffer_len, 1) - 1


def test_the_triton_cursor_on_numpy_lanes_equals_ints() -> None:
    nc = np.arange(0, 60)
    base = np.full(60, 21)
    lanes = decode_cursor(nc, np.ones(60, dtype=np.int64), base, 4, 6, True)
    for i in range(60):
        one = decode_cursor(int(nc[i]), 1, 21, 4, 6, True)
        assert (int(lanes.write_pos[i]), bool(lanes.is_flush[i])) == (one.write_pos, bool(one.is_flush))
    padding = decode_cursor(5, 0, 21, 4, 6, True)  # a CUDA-graph padding row: row 0, no flush
    assert (padding.write_pos, bool(padding.is_flush)) == (0, False)


@pytest.mark.parametrize("config, rule", [
    (caller.ReleaseConfig("flashinfer", 0, 16, "align"), "flashinfer_without_prefix_caching"),
    (caller.ReleaseConfig("flashinfer", 3, 16, "align"), "speculative_without_prefix_caching"),
    (caller.ReleaseConfig("flashinfer", 3, 3, "none"), "speculative_window_covers_query"),
    (caller.ReleaseConfig("triton", 2, 16, "none"), "speculative_needs_flashinfer"),
    (caller.ReleaseConfig("triton", 0, 16, "align", v2_runner=True), "triton_v1_runner_only"),
    (caller.ReleaseConfig("flashinfer", 0, 17, "none"), "flashinfer_window_at_most_16"),
    (caller.ReleaseConfig("triton", 0, 16, "none", kv_connector=True), "no_kv_connectors"),
    (caller.ReleaseConfig("other", 0, 16, "none"), "backend_triton_or_flashinfer"),
])
def test_the_validator_rejects_what_0_33_0_rejects(config: caller.ReleaseConfig, rule: str) -> None:
    rejected = caller.rejection(config)
    assert rejected is not None and rejected.name == rule


def test_the_callers_are_the_accepted_combinations_only() -> None:
    configs = list(caller.accepted_configs())
    assert configs and all(caller.rejection(c) is None for c in configs)
    assert caller.ReleaseConfig("triton", 0, 16, "align") in configs  # Triton with prefix caching, V1
    assert caller.ReleaseConfig("flashinfer", 3, 16, "none") in configs
    assert not any(c.backend == "flashinfer" and c.cache_mode == "align" for c in configs)
    assert not any(c.num_speculative_tokens and c.backend != "flashinfer" for c in configs)
    assert all(c.buffer_len >= c.query_len for c in configs if c.num_speculative_tokens)
    for c in configs:
        if c.backend == "flashinfer":
            ReleaseGeometry(c.buffer_len, c.query_len, c.ring_len)  # every accepted geometry is one the spec takes


def test_a_geometry_the_validator_rejects_is_refused() -> None:
    with pytest.raises(ValueError, match="query_len"):
        ReleaseGeometry(3, 4, 7)
    with pytest.raises(ValueError, match="window"):
        ReleaseGeometry(17, 1, 18)


@pytest.mark.corpus
def test_every_validator_rule_cites_the_validator() -> None:
    assert [p for r in caller.VALIDATOR_RULES for p in citation_problems(r.evidence)] == []
