"""Each generation's adapter on hand-computed steps (every corpus version and the reference).

Geometry: block size 4, W = 16, R = 20, two cache groups of two layers, one
request whose block-table rows are [1, 2, 3] (group 0) and [4, 5, 6] (group 1),
as in the model-wide worked examples of vLLM's tests (T5).
"""

from __future__ import annotations

import pytest
import torch

from replayssm.fuzz.launcher import Setup
from replayssm.spec.generations import detect
from replayssm.review.arguments import CallerStep, Row, boundary_work
from replayssm.review.harness import Harness
from replayssm.base.targets import load_target
from replayssm.spec.assumptions import GhostRow, encode_row
from replayssm.spec.geometry import Conventions, Geometry
from review_corpus import VERSIONS, needs_corpus, version_path

GEO = Geometry(max_num_reqs=2, block_size=4, window=16, ring_len=20)
V1_ALIGN = Conventions(cumulative=False, post_step=False, has_idx_mapping=False, materialize_prefixes=True,
                       live_col_is_zero=False)
V2_ALIGN = Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=True,
                       live_col_is_zero=False)
TABLE = [[[1, 2, 3], [0, 0, 0]], [[4, 5, 6], [0, 0, 0]]]
TARGETS = [pytest.param(str(version_path(v)), id=v, marks=needs_corpus) for v in VERSIONS]
TARGETS.append(pytest.param("replayssm.impl.replayssm_utils", id="reference"))


def _harness(target: str, conv: Conventions) -> Harness:
    module = load_target(target)
    setup = Setup(GEO, conv, (2, 2), num_cols=3, num_slots=8)
    return Harness(setup, module, detect(module), torch.device("cpu"))


def _step(row: Row, conv: Conventions, src_col: int, dst_col: int) -> CallerStep:
    pp = {"idx_mapping": [-1], "query_metadata": [0, 0] if conv.cumulative else [0],
          "num_computed_tokens": [0, 0], "num_accepted_tokens": [0, 0], "is_prefilling": [False],
          "live_cols": [0, 0]}
    ghost = GhostRow(row.computed_before, row.query_len, row.accepted, row.prefilling, row.live_col, row.req)
    for buf, (i,), value in encode_row(conv, 0, ghost):
        pp[buf][i] = bool(value) if buf == "is_prefilling" else int(value)
    if not conv.has_idx_mapping:
        pp["idx_mapping"] = None
    mg = {"idx_mapping": pp["idx_mapping"], "src_cols": [src_col, -1], "dst_cols": [dst_col, -1]}
    return CallerStep([row], TABLE, [], mg, pp)


def _set(h: Harness, slot_by_group: tuple[int, int], trackers: tuple[int, int]) -> None:
    for g, slot in enumerate(slot_by_group):
        h.ring_start[g][slot], h.num_committed[g][slot] = trackers


def _plan(h: Harness, name: str = "plan") -> list[dict]:
    return [p.numpy() for p in h.plans[name]]


def test_caller_computes_the_boundary_columns_and_count() -> None:
    # N 6 -> 8 with 2 accepted of 2: the running state is at 7, the boundary at 8 (column 1), 2 tokens up to it.
    assert boundary_work(Row(0, 0, 0, 6, 2, 2, False, 1, 1), 4, True) == (1, 1, 2)
    assert boundary_work(Row(0, 0, 0, 6, 2, 2, False, 1, 1), 4, False) == (-1, -1, 0)
    # N 5 -> 6: no boundary crossed.
    assert boundary_work(Row(0, 0, 0, 5, 2, 1, False, 1, 1), 4, True) == (-1, -1, 0)
    # A prefill chunk 0 -> 8 ends on the boundary at 8: an exact copy (count 0) of the live column 1.
    assert boundary_work(Row(0, 0, 0, 0, 8, 0, True, 1, -1), 4, True) == (1, 1, 0)


@pytest.mark.parametrize("conv", [V1_ALIGN, V2_ALIGN], ids=["v1", "v2"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("old, plan_start, flush", [((3, 2), 3, 4), ((3, 15), 18, 2)], ids=["no-checkpoint", "checkpoint"])
def test_decode_publishing_in_place(target: str, conv: Conventions, old: tuple, plan_start: int, flush: int) -> None:
    """Decode N 6 -> 8 (q 2, both accepted) on live column 1 (slots 2 and 5) publishes column 1 in place.

    Without a checkpoint (trackers (3, 2): 2 + 2 <= 16) the live window grows to (3, 4) and the replay
    covers the 2 old rows and the 2 new: flush 4 from ring row 3. With one (trackers (3, 15): 15 + 2 > 16)
    the window restarts at (3 + 15) % 20 = 18 with the 2 new rows: flush 2 from row 18. The published
    slot is then canonical (0, 0); the other slots keep their trackers.
    """
    h = _harness(target, conv)
    _set(h, (2, 5), old)
    _set(h, (1, 4), (7, 9))
    step = _step(Row(0, 0, 0, 6, 2, 2, False, 1, 1), conv, 1, 1)
    h.set_tables(TABLE)
    plans, broken = h.run_phase("postprocess", step, conv)
    assert broken == []
    for g, (live, other) in enumerate(((2, 1), (5, 4))):
        assert h.trackers(g, live) == (0, 0)
        assert h.trackers(g, other) == (7, 9)
    for p, plan in zip(h.plans["plan"], _plan(h)):
        assert plan["plan_ring_start"][0] == plan_start and plan["plan_flush_count"][0] == flush
        assert plan["plan_flush_count"][1] == -1
        want = [2 if layer < 2 else 5 for layer in p.layers]
        assert plan["src_slots"][:, 0].tolist() == want and plan["dst_slots"][:, 0].tolist() == want
        if h.api.work_list:
            assert plan["active_request_indices"].tolist() == [0, -1]


@pytest.mark.parametrize("target", TARGETS)
def test_live_column_move(target: str) -> None:
    """The live column moves 0 -> 1 (slots 1 -> 2 and 4 -> 5); the source holds (2, 4), the destination
    a previous owner's (7, 9). Generations A, B and D1 leave the destination to the scheduler's block copy;
    the reference copies the trackers; C, D2 and D3 plan an exact copy of the live state (ring start 2,
    flush 4 = the source's committed rows) and reset the destination to (0, 0)."""
    h = _harness(target, V2_ALIGN)
    _set(h, (1, 4), (2, 4))
    _set(h, (2, 5), (7, 9))
    step = _step(Row(0, 0, 0, 3, 2, 1, False, 1, 0), V2_ALIGN, 0, 1)
    h.set_tables(TABLE)
    plans, broken = h.run_phase("migrate", step, V2_ALIGN)
    assert broken == []
    copies = h.api.name == "C" or "precopy" in h.plans and hasattr(h.module, "_copy_reassigned_replayssm_slots_kernel")
    expected_dst = (0, 0) if copies else (2, 4) if h.api.name == "reference" else (7, 9)
    for g, (src, dst) in enumerate(((1, 2), (4, 5))):
        assert h.trackers(g, src) == (2, 4)
        assert h.trackers(g, dst) == expected_dst
    if copies:
        name = "precopy" if h.api.name == "D" else "plan"
        for p, plan in zip(h.plans[name], _plan(h, name)):
            assert (plan["plan_ring_start"][0], plan["plan_flush_count"][0]) == (2, 4)
            assert plan["src_slots"][:, 0].tolist() == [1 if layer < 2 else 4 for layer in p.layers]
            assert plan["dst_slots"][:, 0].tolist() == [2 if layer < 2 else 5 for layer in p.layers]
        assert plans, "the copy plan is materialized before the forward pass"


@pytest.mark.parametrize("target", TARGETS)
def test_prefill_resets_every_column_it_touches(target: str) -> None:
    """A first prefill chunk of 8 tokens touches columns 0 and 1 (slots 1, 2 / 4, 5): their trackers become
    (0, 0), column 2 is untouched; the chunk ends on the boundary at 8, in the live column: the corpus
    versions plan an exact copy (flush 0) of the slot onto itself, the reference plans nothing (the live
    slot already holds the boundary)."""
    h = _harness(target, V1_ALIGN)
    for slot_pair in ((1, 4), (2, 5), (3, 6)):
        _set(h, slot_pair, (7, 9))
    step = _step(Row(0, 0, 0, 0, 8, 0, True, 1, -1), V1_ALIGN, -1, 1)
    h.set_tables(TABLE)
    h.run_phase("migrate", step, V1_ALIGN)
    h.run_phase("postprocess", step, V1_ALIGN)
    for g, slots in enumerate(((1, 2, 3), (4, 5, 6))):
        assert [h.trackers(g, s) for s in slots] == [(0, 0), (0, 0), (7, 9)]
    for plan in _plan(h):
        assert plan["plan_flush_count"][0] == (-1 if h.api.name == "reference" else 0)
