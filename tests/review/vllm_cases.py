"""vLLM's own kernel tests (T1-T5, the test files beside the corpus versions) as scenario records.

Each :class:`VllmCase` is one case of one vLLM test, written in our own
terms: the launch the test makes (its block table, trackers, batch rows and
input vectors, in the test's own slot ids and ``PAD_SLOT_ID``), each row's
true step, and every value the test asserts about the kernels' buffers. The
vLLM source is not copied: a record cites its file, test function and
parametrize id, and holds the numbers.

Three checks read a record (``test_vllm_cases.py``):

- :func:`admission`: every caller assumption of ``spec.assumptions`` that
  bears on one launch holds on it, and the caller's encoding of the rows
  (``encode_row``) gives the test's input vectors;
- :func:`prediction`: the spec's launch (the fuzzer's ``SpecSide``) on the
  test's inputs leaves every asserted value;
- :func:`reproduction`: the review harness drives the corpus version the
  test was written for (``VERSIONS``) through its own host API and the
  kernels leave every asserted value.

Direct kernel launches in the tests pass ``PAD_SLOT_ID = -1``, so slot 0 is a
real slot there; our geometry (and vLLM's host) has the null block 0 as the
pad. :meth:`VllmCase.relabelled` renames slot ``s`` to ``s + 1`` (the pad to
0, a null entry in front of the tracker arrays) for the spec and the
harness: the kernels compare slots only with the pad and use them as
indices, so the renamed launch computes the same values.

:data:`OUTSIDE` lists the test functions (and parametrized kernel cases)
that are no caller situation of the ReplaySSM kernels the spec models, each
with the reason; :func:`table` renders every case for ``docs/reviewing.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from replayssm.review.arguments import Row
from replayssm.spec import assumptions as env
from replayssm.spec.assumptions import GhostRow, encode_row
from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.model_choices import BATCH_ORDER_PICKED_PER_STEP
from replayssm.spec.postprocess import running_position

VERSIONS = {"T1": "A1", "T2": "A1", "T3": "A2", "T4": "A5", "T5": "D2"}
"""The corpus version each test file was written for (the corpus README's API
column): T1 and T2 call ``materialize(fn)`` and launch the kernel with A1's
signature (T1's cache mode ``all`` materializes in A1 only); T3 calls
``materialize()`` with A1's kernel signature (A2); T4 passes
``EXECUTED_QUERY_WIDTH`` and ``GDN_STP`` (A5); T5 calls
``materialize_reassigned_slots`` (D2)."""


def _row(req: int, computed_before: int, query_len: int, accepted: int, prefilling: bool, live_col: int) -> Row:
    """One scheduled batch row's true step, as the review harness takes it
    (request ``req`` of stream 0, its live column unmoved)."""
    return Row(req, 0, req, computed_before, query_len, accepted, prefilling, live_col, live_col)


def _ghost(row: Row, cum_base: int) -> GhostRow:
    return GhostRow(row.computed_before, row.query_len, row.accepted, row.prefilling, row.live_col, row.req, cum_base)


def _end(row: Row) -> int:
    """The position after the row's last scheduled token."""
    return row.computed_before + row.query_len


@dataclass(frozen=True)
class VllmCase:
    """One case of a vLLM test: one postprocess launch on one cache group."""

    file: str
    test: str
    params: str
    conv: Conventions
    block_size: int
    window: int
    ring_len: int
    pad: int
    table: tuple[tuple[int, ...], ...]
    """``[batch row][column]``; rows past the launch are the test's canary rows."""
    ring_start: tuple[int, ...]
    num_committed: tuple[int, ...]
    rows: tuple[Row | None, ...]
    """Batch rows in order; None is a padding row (``idx_mapping`` -1)."""
    inputs: dict[str, Any]
    """The test's input vectors: ``idx_mapping`` (None without), ``query_metadata``,
    ``num_computed_tokens``, ``num_accepted_tokens`` (per request), ``is_prefilling``
    (per batch row), ``live_cols`` (per request, None without)."""
    expect: tuple[tuple[str, int, int], ...]
    """``(buffer, index, value)`` the test asserts: trackers by slot, plan
    entries by batch row, ``src_slots``/``dst_slots`` of layer 0 by batch row."""
    note: str = ""
    fixed_in: str | None = None
    """The first corpus version that holds the case, where the version the test
    was written for has the bug the case catches (the harness runs both)."""
    cache_mode: str | None = None
    """The cache mode the test creates its context in (``None``: the one
    ``conv`` serves by default): the caller rules admission checks follow it."""

    @property
    def mode(self) -> str:
        return self.conv.mode if self.cache_mode is None else self.cache_mode

    @property
    def name(self) -> str:
        return f"{self.file}::{self.test}[{self.params}]"

    @property
    def version(self) -> str:
        return VERSIONS[self.file]

    @property
    def versions(self) -> tuple[str, ...]:
        """The corpus versions the harness drives on this case."""
        return (self.version,) if self.fixed_in is None else (self.version, self.fixed_in)

    @property
    def max_num_reqs(self) -> int:
        return len(self.table)

    @property
    def num_cols(self) -> int:
        return len(self.table[0])

    @property
    def max_model_len(self) -> int:
        """The shortest model length that holds every row: the test does not set one."""
        return max(_end(r) for r in self.rows if r is not None)

    def geometry(self) -> Geometry:
        return Geometry(self.max_num_reqs, self.block_size, self.window, self.ring_len, self.pad)

    def relabelled(self) -> "VllmCase":
        """The same launch with the null block 0 as the pad (see the module docstring)."""
        if self.pad == 0:
            return self
        shift = lambda s: 0 if s == self.pad else s + 1  # noqa: E731
        tracker = lambda buf: buf in ("ring_start", "num_committed")  # noqa: E731
        return replace(self, pad=0, table=tuple(tuple(shift(s) for s in row) for row in self.table),
                       ring_start=(0, *self.ring_start), num_committed=(0, *self.num_committed),
                       expect=tuple((b, i + 1 if tracker(b) else i, shift(v) if b in ("src_slots", "dst_slots") else v)
                                    for b, i, v in self.expect))


# -- the records -------------------------------------------------------------------------------------

V1 = Conventions(cumulative=False, post_step=False, has_idx_mapping=False, materialize_prefixes=False,
                 live_col_is_zero=True)
V2 = Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=False,
                 live_col_is_zero=True)
"""The direct launches' conventions: T1-T4 switch all three count flags with ``post_step``, mode none, column 0."""


def _one_row_inputs(conv: Conventions, row: Row) -> dict[str, Any]:
    """The vectors a test builds for its one-row direct launch, as it builds them."""
    computed = row.computed_before + ((row.query_len if row.prefilling else row.accepted) if conv.post_step else 0)
    return {"idx_mapping": [0] if conv.has_idx_mapping else None,
            "query_metadata": [0, row.query_len] if conv.cumulative else [row.query_len],
            "num_computed_tokens": [computed], "num_accepted_tokens": [row.accepted],
            "is_prefilling": [row.prefilling], "live_cols": None}


MODE_NONE_FIX = "A3"
"""The first corpus version whose mode-none prefill resets only the live
column: A1 and A2 reset every column a chunk spans, which in a one-column
table reads past the row (T2 and T3's 50,000-token canaries)."""


def _staged(file: str, post_step: bool, case: tuple, trackers: list[tuple[int, int]], table: tuple,
            expect: list[tuple[str, int, int]], note: str = "") -> VllmCase:
    """A ``test_replayssm_postprocess_commits_staged_transition`` case: one
    mode-none row in batch 0 on slot 0 (block size 256, W = 16, R = 20), direct launch."""
    before, q, prefilling, accepted = case[:4]
    conv = V2 if post_step else V1
    row = _row(0, before, q, accepted, prefilling, 0)
    past_first_block = prefilling and before + q > 256 and len(table[0]) == 1
    return VllmCase(file, "test_replayssm_postprocess_commits_staged_transition",
                    "-".join(str(x) for x in (*case, post_step)), conv, 256, 16, 20, -1, table,
                    tuple(s for s, _ in trackers), tuple(c for _, c in trackers), (row,), _one_row_inputs(conv, row),
                    tuple(expect), note, MODE_NONE_FIX if past_first_block else None)


T1_STAGED = [(256, 4, False, 1, 3), (1, 4, False, 1, 3), (256, 1, False, 1, 3), (0, 4, True, 1, 0),
             (256, 4, True, 1, 0), (256, 4, False, 3, 5)]
"""T1's (and T4's) cases: ``computed_before, query_len, prefilling, accepted, expected committed``."""

T2_STAGED = T1_STAGED[:5] + [(0, 50_000, True, 1, 0), (50_000, 4, True, 1, 0)] + T1_STAGED[5:]
"""T2 adds a 50,000-token first chunk and a chunk starting at 50,000, in a one-column table."""

T3_STAGED = [(256, 4, False, 1, 2, 3, 3, 3), (256, 4, False, 3, 2, 3, 5, 3), (0, 50_000, True, 1, 2, 3, 0, 0),
             (50_000, 4, True, 1, 2, 3, 0, 0), (256, 4, False, 1, 15, 7, 1, 2)]
"""T3's: ``..., old committed, old start, expected committed, expected start``."""

CANARY_TABLE = ((0,), (1,), (1,), (1,))
"""T2 and T3's one-column table: row 0 holds slot 0, the rows after it slot 1
(the test's canary: a read past column 0 lands on the next row's slot)."""


def _staged_cases() -> list[VllmCase]:
    out = []
    for file in ("T1", "T4"):
        for post in (False, True):
            for c in T1_STAGED:
                out.append(_staged(file, post, c, [(3, 2)], ((0, 0),),
                                   [("num_committed", 0, c[4]), ("ring_start", 0, 0 if c[2] else 3)],
                                   note="T4 passes EXECUTED_QUERY_WIDTH=0, GDN_STP=False (A5's defaults)"
                                   if file == "T4" else ""))
    for post in (False, True):
        for c in T2_STAGED:
            out.append(_staged("T2", post, c, [(3, 2), (7, 9)], CANARY_TABLE,
                               [("num_committed", 0, c[4]), ("num_committed", 1, 9),
                                ("ring_start", 0, 0 if c[2] else 3), ("ring_start", 1, 7)]))
        for c in T3_STAGED:
            out.append(_staged("T3", post, c, [(c[5], c[4]), (7, 9)], CANARY_TABLE,
                               [("num_committed", 0, c[6]), ("num_committed", 1, 9),
                                ("ring_start", 0, c[7]), ("ring_start", 1, 7)]))
    return out


def _boundary_cases() -> list[VllmCase]:
    """``test_replayssm_materializes_only_accepted_boundary_with_compacted_rows``
    (T1 in mode ``all``, T2 and T3 in ``align``): batch rows of requests 2, 0, 1
    and a padding row; request 2 crosses token 16 and publishes column 0 (slot
    2) by replaying 4 rows of its live slot 3 from ring row 7, request 0
    rejects every draft, request 1's slots are null. The test's materialized
    state (slot 2 = slot 3 replayed from ring row 7, every other slot
    unchanged) is asserted here through the plan FlashInfer executes."""
    out = []
    for file in ("T1", "T2", "T3"):
        for post, label in ((False, "v1"), (True, "v2")):
            conv = Conventions(cumulative=post, post_step=post, has_idx_mapping=True, materialize_prefixes=True,
                               live_col_is_zero=False)
            rows = (_row(2, 14, 4, 3, False, 1), _row(0, 14, 4, 1, False, 1), _row(1, 14, 4, 3, False, 1), None)
            inputs = {"idx_mapping": [2, 0, 1, -1],
                      "query_metadata": [0, 4, 8, 12, 16] if post else [4] * 4,
                      "num_computed_tokens": [15, 17, 17] if post else [14] * 3,
                      "num_accepted_tokens": [1, 3, 3], "is_prefilling": [False] * 4, "live_cols": [1, 1, 1]}
            expect = [("active_request_indices", 0, 0), *(("active_request_indices", b, -1) for b in (1, 2, 3)),
                      ("plan_flush_count", 0, 4), *(("plan_flush_count", b, -1) for b in (1, 2, 3)),
                      ("num_committed", 3, 5), ("num_committed", 2, 0),
                      ("plan_ring_start", 0, 7), ("src_slots", 0, 3), ("dst_slots", 0, 2)]
            out.append(VllmCase(file, "test_replayssm_materializes_only_accepted_boundary_with_compacted_rows", label,
                                conv, 16, 16, 20, 0, ((2, 3), (0, 5), (0, 0), (0, 0)), (0, 0, 0, 7, 0, 2),
                                (0, 0, 0, 2, 0, 1), rows, inputs, tuple(expect),
                                "cache mode all (A1 publishes prefixes in all)" if file == "T1" else "",
                                cache_mode="all" if file == "T1" else "align"))
    return out


def _self_copy_cases() -> list[VllmCase]:
    """T3's ``test_replayssm_skips_canonical_self_copy_but_resets_prefill_trackers``:
    request 1 prefills 48 tokens into columns 0-2 (its live slot 2 canonical
    at 48, no copy), request 2 decodes 4 tokens from 28 and publishes column 1
    in place (its live slot 4, replaying 6 rows), request 0 prefills a block
    into null slots, and a padding row."""
    out = []
    for post, label in ((False, "v1"), (True, "v2")):
        conv = Conventions(cumulative=post, post_step=post, has_idx_mapping=True, materialize_prefixes=True,
                           live_col_is_zero=False)
        rows = (_row(1, 0, 48, 1, True, 2), _row(2, 28, 4, 4, False, 1), _row(0, 0, 16, 1, True, 0), None)
        inputs = {"idx_mapping": [1, 2, 0, -1],
                  "query_metadata": [0, 48, 52, 68, 68] if post else [48, 4, 16, 0],
                  "num_computed_tokens": [16, 48, 32] if post else [0, 0, 28],
                  "num_accepted_tokens": [1, 1, 4], "is_prefilling": [True, False, True, True],
                  "live_cols": [0, 2, 1]}
        expect = [("plan_flush_count", 0, -1), ("plan_flush_count", 1, 6), ("plan_flush_count", 2, -1),
                  ("plan_flush_count", 3, -1), ("active_request_indices", 0, 1),
                  *(("active_request_indices", b, -1) for b in (1, 2, 3)),
                  ("src_slots", 1, 4), ("dst_slots", 1, 4),
                  *(("ring_start", s, v) for s, v in enumerate((3, 0, 0, 3, 0, 3))),
                  *(("num_committed", s, v) for s, v in enumerate((2, 0, 0, 2, 0, 2)))]
        out.append(VllmCase("T3", "test_replayssm_skips_canonical_self_copy_but_resets_prefill_trackers", label,
                            conv, 16, 16, 20, 0, ((0, 1, 2), (3, 4, 5), (0, 0, 0), (0, 0, 0)), (3,) * 6, (2,) * 6,
                            rows, inputs, tuple(expect)))
    return out


CASES: tuple[VllmCase, ...] = tuple(_staged_cases() + _boundary_cases() + _self_copy_cases())
"""Every kernel case of T1-T4 the spec's API expresses."""

BY_NAME = {c.name: c for c in CASES}


@dataclass(frozen=True)
class Outside:
    """A test (or parametrized case) that is no caller situation of the modelled kernels."""

    file: str
    test: str
    cases: int
    why: str


_BACKEND = "SSU backend selection, no ReplaySSM kernel"
_NOT_RECORDED = ("not recorded yet: D2's caller passes the publish columns and counts itself "
                 "(materialize_src_cols, materialize_dst_cols, materialize_token_counts), which the spec's API "
                 "derives from the row and the review harness from boundary_work")
OUTSIDE = (
    *(Outside(f, t, n, _BACKEND) for f in ("T1", "T2", "T3", "T4", "T5") for t, n in (
        ("test_default_backend_is_triton", 1), ("test_explicit_triton_backend", 1), ("test_flashinfer_backend_init", 1),
        ("test_flashinfer_forwards_ssu_algorithm", 5), ("test_uninitialized_backend_raises", 1),
        ("test_init_is_noop_for_non_ssu_mamba_type", 3), ("test_flashinfer_import_error", 1),
        ("test_triton_basic_call", 1))),
    *(Outside(f, "test_replayssm_physical_ring_shape", 3,
              "ring tensor shapes: R = W + 1 + speculative tokens with FlashInfer (geometry_supported's R >= W + 1); "
              "the Triton backend's R = W runs no FlashInfer replay") for f in ("T1", "T2", "T3", "T4", "T5")),
    Outside("T2", "test_replayssm_flashinfer_call_forwards_mtp_layout", 2, "FlashInfer decode call layout"),
    Outside("T2", "test_replayssm_mixer_selects_mtp_layout", 2, "Mamba mixer's decode layout"),
    Outside("T3", "test_replayssm_mixer_selects_mtp_layout", 2, "Mamba mixer's decode layout"),
    Outside("T4", "test_gdn_replayssm_physical_ring_layout", 2, "GDN ring tensor shapes"),
    Outside("T4", "test_gdn_replayssm_postprocess_uses_executed_width", 2,
            "EXECUTED_QUERY_WIDTH > 0 (a GDN layer's executed width): the spec models Mamba2 rows, whose width "
            "is the query length"),
    Outside("T4", "test_gdn_stp_postprocess_matches_fold_absorb_commit", 2,
            "GDN_STP (GDN single-token rule) on a ring of 16 = W: not a Mamba2 layer"),
    Outside("T4", "test_gdn_stp_prefix_plan_resets_canonical_destination", 2,
            "GDN_STP (GDN single-token rule) on a ring of 16 = W: not a Mamba2 layer"),
    Outside("T5", "test_replayssm_flashinfer_call_forwards_packed_mtp", 1, "FlashInfer decode call layout"),
    Outside("T5", "test_replayssm_flashinfer_backend_init", 1, _BACKEND),
    Outside("T5", "test_reinterpret_u64_as_i64", 4, "pointer reinterpretation helper"),
    Outside("T5", "test_validate_replayssm_cache_rejects_incomplete_cache", 1, "cache validation"),
    Outside("T5", "test_validate_replayssm_cache_requires_cuda_state", 1, "cache validation"),
    *(Outside("T5", t, 1, _NOT_RECORDED) for t in (
        "test_modelwide_replayssm_postprocess_launches_materializer_once",
        "test_modelwide_replayssm_postprocess_commits_checkpoint_boundary",
        "test_modelwide_replayssm_postprocess_resets_prefill_slot",
        "test_modelwide_replayssm_copies_reassigned_live_slot_once",
        "test_modelwide_replayssm_copies_only_reassigned_cache_group")),
    Outside("T5", "test_modelwide_replayssm_none_commits_trackers_without_materialization", 1,
            _NOT_RECORDED + "; its decode rows of 14, 16 and 18 tokens on R = 20, W = 16 break decode_row_fits "
            "(T <= R - W = 4, which vLLM's ring sizing R = W + 1 + speculative tokens keeps)"),
)
"""The tests of T1-T5 without a record, by function: outside the kernels'
caller model, or (T5's model-wide kernel cases) not recorded yet."""


# -- the checks ------------------------------------------------------------------------------------

def _rows_with_base(case: VllmCase) -> list[tuple[int, Row, int]]:
    out, base = [], 0
    for b, row in enumerate(case.rows):
        if row is not None:
            out.append((b, row, base))
            base += row.query_len
    return out


def _encoded_inputs(case: VllmCase) -> dict[str, Any]:
    """The vectors ``encode_row`` writes for the case's rows, over the test's own (filled where no row writes)."""
    conv = case.conv
    got = {k: (None if v is None else list(v)) for k, v in case.inputs.items()}
    for b, row, base in _rows_with_base(case):
        for buf, (i,), value in encode_row(conv, b, _ghost(row, base)):
            got[buf][i] = bool(value) if buf == "is_prefilling" else int(value)
    return got


def _read_columns(case: VllmCase, row: Row) -> set[int]:
    """The block-table columns the postprocess program reads for ``row``, where
    the proofs instantiate ``distinct_slots_in_row`` (``verify/scenarios.py``):
    the live column; in align mode also the boundary's destination and a
    prefill chunk's columns."""
    cols = {row.live_col}
    if case.conv.materialize_prefixes:
        bs = case.block_size
        after = row.computed_after
        b = mamba_state_copy_boundary(running_position(row.prefilling, after, row.accepted), after, bs)
        if b.needs_copy and b.dst_col >= 0:
            cols.add(int(b.dst_col))
        if row.prefilling:
            cols.update(range(row.computed_before // bs, -(-_end(row) // bs)))
    return {c for c in cols if 0 <= c < case.num_cols}


def batch_order_admitted(requests: list[int]) -> bool:
    """Whether the system model runs a launch whose batch rows hold ``requests``
    in this order (model choice ``batch_order_picked_per_step``): each step
    picks any order of distinct requests."""
    return len(set(requests)) == len(requests)


def admission(case: VllmCase) -> dict[str, bool]:
    """Whether each caller assumption that bears on one launch holds on the case
    (``caller_encodes_row``: the rows encode to the test's vectors;
    ``batch_order_picked_per_step``: the system model runs its row order)."""
    geo, conv, pad = case.geometry(), case.conv, case.pad
    out = {BATCH_ORDER_PICKED_PER_STEP.name: batch_order_admitted([row.req for row in case.rows if row is not None]),
           env.GEOMETRY_SUPPORTED.name: bool(env.GEOMETRY_SUPPORTED(geo)),
           env.MODEL_FITS_TABLE.name: bool(env.MODEL_FITS_TABLE(case.mode, case.max_model_len, case.block_size,
                                                                 case.num_cols)),
           env.POOL_HAS_NULL_BLOCK.name: bool(env.POOL_HAS_NULL_BLOCK(len(case.ring_start), pad)),
           "caller_encodes_row": _encoded_inputs(case) == case.inputs}
    per_row: dict[str, list[bool]] = {}

    def note(name: str, ok: Any) -> None:
        per_row.setdefault(name, []).append(bool(ok))

    num_reqs = len(case.rows)
    written = {b: {case.table[b][row.live_col]} for b, row, _ in _rows_with_base(case)}
    for b, row, base in _rows_with_base(case):
        g = _ghost(row, base)
        forward_prefill = row.prefilling and not (row.query_len == 1 and row.computed_before > 0)
        note(env.DECODE_ROW_FITS.name, env.DECODE_ROW_FITS(geo, g))
        note(env.ACCEPTED_WITHIN_ROW.name, env.ACCEPTED_WITHIN_ROW(geo, g))
        note(env.ROW_NONEMPTY.name, env.ROW_NONEMPTY(geo, g))
        note(env.DECODE_WITHIN_BLOCK.name, env.DECODE_WITHIN_BLOCK(geo, g))
        note(env.POSITIONS_IN_MODEL.name, env.POSITIONS_IN_MODEL(geo, g, case.max_model_len))
        note(env.LIVE_COL_IS_LAST_BLOCK.name, env.LIVE_COL_IS_LAST_BLOCK(geo, case.mode, g))
        note(env.PREFILL_CHUNK_ON_BOUNDARY.name, env.PREFILL_CHUNK_ON_BOUNDARY(geo, case.mode, g, True))  # no later chunk
        note(env.PREFILL_CONTINUATION_LONGER_THAN_ONE.name, env.PREFILL_CONTINUATION_LONGER_THAN_ONE(geo, g))
        note(env.IS_PREFILLING_AGREES.name, env.IS_PREFILLING_AGREES(row.prefilling, forward_prefill))
        note(env.IDX_MAPPING_IN_RANGE.name, env.IDX_MAPPING_IN_RANGE(row.req, geo.max_num_reqs))
        note(env.BATCH_IN_LAUNCH.name, env.BATCH_IN_LAUNCH(b, 0, num_reqs, 1, geo.max_num_reqs))
        note(env.COLUMNS_IN_TABLE.name, env.COLUMNS_IN_TABLE(row.live_col, case.num_cols))
        slots = case.table[b]
        for s in slots:
            note(env.SLOT_IN_CAPACITY.name, env.SLOT_IN_CAPACITY(s, len(case.ring_start), pad))
        read = _read_columns(case, row)
        for c in read:
            for d in read:
                note(env.DISTINCT_SLOTS_IN_ROW.name, env.DISTINCT_SLOTS_IN_ROW(slots[c], slots[d], c, d, pad))
        live = slots[row.live_col]
        for other, theirs in written.items():
            if other != b:
                for s in theirs:
                    note(env.EXCLUSIVE_DECODE_LIVE_SLOT.name,
                         env.EXCLUSIVE_DECODE_LIVE_SLOT(live, not row.prefilling, s, pad))
    out.update({name: all(oks) for name, oks in per_row.items()})
    return out


def _expected_values(buffers: dict[str, Any], case: VllmCase) -> list[tuple[str, int, int, int]]:
    """``(buffer, index, want, got)`` for every asserted value, read from group 0 (layer 0) of ``buffers``."""
    out = []
    for buf, i, want in case.expect:
        values = buffers[buf]
        got = values[0][i] if buf in ("ring_start", "num_committed", "src_slots", "dst_slots") and values.ndim == 2 \
            else values[i]
        out.append((buf, i, want, int(got)))
    return out


def _setup(case: VllmCase):
    from replayssm.fuzz.launcher import Setup

    return Setup(case.geometry().validated(), case.conv, (1,), case.num_cols, len(case.ring_start), case.max_model_len)


def _postprocess_action(case: VllmCase):
    from replayssm.fuzz.actions import Postprocess

    inputs = case.inputs
    return Postprocess(len(case.rows), inputs["idx_mapping"], list(inputs["query_metadata"]),
                       _per_request(case, inputs["num_computed_tokens"], 0),
                       _per_request(case, inputs["num_accepted_tokens"], 0), list(inputs["is_prefilling"]),
                       None if inputs["live_cols"] is None else _per_request(case, inputs["live_cols"], 0),
                       [[list(r) for r in case.table]])


def _per_request(case: VllmCase, values: list, fill: int) -> list:
    """A per-request vector at ``max_num_reqs`` entries, as the kernels index it."""
    return list(values) + [fill] * (case.max_num_reqs - len(values))


@cache
def prediction(name: str) -> list[tuple[str, int, int, int]]:
    """The spec's launch on the case's inputs: ``(buffer, index, asserted, predicted)``,
    tracker indices in the relabelled slot ids (:meth:`VllmCase.relabelled`)."""
    from replayssm.fuzz.launcher import SpecSide

    case = BY_NAME[name].relabelled()
    side = SpecSide(_setup(case))
    side.buffers["ring_start"][0, :] = case.ring_start
    side.buffers["num_committed"][0, :] = case.num_committed
    side.buffers["block_table"][0] = case.table
    side.run(_postprocess_action(case))
    buffers = dict(side.buffers)
    buffers["src_slots"] = buffers["src_slots"].reshape(1, -1)
    buffers["dst_slots"] = buffers["dst_slots"].reshape(1, -1)
    return _expected_values(buffers, case)


@dataclass(frozen=True)
class Reproduction:
    """What a version's kernels did on a case: ``(buffer, index, asserted,
    observed)``, the launch's guard violations, and, when the process running
    it died (a kernel reading far outside its buffers can take the Triton
    interpreter down), its exit status instead."""

    values: tuple[tuple[str, int, int, int], ...] = ()
    violations: tuple[str, ...] = ()
    died: int | None = None

    @property
    def reproduced(self) -> bool:
        return self.died is None and not self.violations and all(w == g for _, _, w, g in self.values)

    def describe(self) -> str:
        if self.died is not None:
            return f"the process died (exit status {self.died})"
        wrong = [f"{b}[{i}] = {g}, asserted {w}" for b, i, w, g in self.values if w != g]
        return "; ".join(wrong + [v.split(":")[0] for v in self.violations])


def reproductions(names: tuple[str, ...], version: str | None = None) -> dict[str, Reproduction]:
    """:func:`reproduce` of each case in child processes (one after another,
    a new one after a death), so that a crashing kernel is a result."""
    out: dict[str, Reproduction] = {}
    left = list(names)
    while left:
        child = subprocess.run([sys.executable, __file__, version or "", *left], capture_output=True, text=True,
                               env={**os.environ, "TRITON_INTERPRET": "1"})
        for line in child.stdout.splitlines():
            name, values, violations = json.loads(line)
            out[name] = Reproduction(tuple(map(tuple, values)), tuple(violations))
            left.remove(name)
        if left and child.returncode != 0:
            out[left.pop(0)] = Reproduction(died=child.returncode)
        elif left:
            raise RuntimeError(f"the reproduction child stopped early: {child.stderr[-2000:]}")
    return out


@cache
def all_reproductions() -> dict[tuple[str, str], Reproduction]:
    """Every case on each of its versions, by ``(case name, version)``. Two
    versions at a time: each version's :func:`reproductions` runs in child
    processes of its own (this process only waits for them), so the two take
    both cores of a two-core machine; the result is the same in any order."""
    def one(version: str) -> dict[str, Reproduction]:
        return reproductions(tuple(c.name for c in CASES if version in c.versions), version)

    versions = sorted({v for c in CASES for v in c.versions})
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {(n, version): r for version, done in zip(versions, pool.map(one, versions)) for n, r in done.items()}


def reproduce(name: str, version: str | None = None) -> tuple[list[tuple[str, int, int, int]], list[str]]:
    """The corpus version the test was written for (or ``version``), driven by
    the review harness through its host API on the case's launch:
    ``(buffer, index, asserted, observed)``, and the guard violations of the
    launch (a read past a block-table row, a store outside a buffer)."""
    import torch

    from replayssm.spec.generations import detect
    from replayssm.review.arguments import CallerStep
    from replayssm.review.harness import Harness
    from replayssm.spec import corpus

    case = BY_NAME[name].relabelled()
    module = _loaded(str(corpus.versions() / f"{version or case.version}.py"))
    h = Harness(_setup(case), module, detect(module), torch.device("cpu"))
    h.set_tables([[list(r) for r in case.table]])
    h.ring_start[0][:] = torch.tensor(case.ring_start, dtype=torch.int32)
    h.num_committed[0][:] = torch.tensor(case.num_committed, dtype=torch.int32)
    action = _postprocess_action(case)
    postprocess = {"query_metadata": action.query_metadata, "num_computed_tokens": action.num_computed_tokens,
                   "num_accepted_tokens": action.num_accepted_tokens, "idx_mapping": action.idx_mapping,
                   "is_prefilling": action.is_prefilling, "live_cols": action.live_cols}
    migrate = {"src_cols": [-1] * case.max_num_reqs, "dst_cols": [-1] * case.max_num_reqs}
    _, broken = h.run_phase("postprocess", CallerStep(list(case.rows), [[list(r) for r in case.table]], [], migrate,
                                                     postprocess), case.conv)
    plan = h.plans["plan"][0].numpy()
    start, committed = h.tracker_arrays()
    return _expected_values({"ring_start": start, "num_committed": committed, **plan}, case), broken


@cache
def _loaded(path: str):
    from replayssm.base.targets import load_target

    return load_target(path)


def verdicts(case: VllmCase) -> tuple[str, str, str]:
    """The table's three cells: admitted, predicted, reproduced."""
    broken = [n for n, ok in admission(case).items() if not ok]
    admitted = "yes" if not broken else "no: " + ", ".join(broken)
    if case.mode != case.conv.mode:
        admitted += f" (mode {case.mode})"
    wrong = [f"{b}[{i}] {want} vs {got}" for b, i, want, got in prediction(case.name) if want != got]
    predicted = f"yes ({len(case.expect)} values)" if not wrong else "no: " + "; ".join(wrong)
    done = all_reproductions()
    reproduced = "; ".join(f"{v}: yes" if done[case.name, v].reproduced else f"{v}: no ({done[case.name, v].describe()})"
                           for v in case.versions)
    return admitted, predicted, reproduced


def table() -> list[str]:
    """The markdown table of every case, then the tests outside the model."""
    lines = ["| case | admitted | predicted | reproduced |", "| --- | --- | --- | --- |"]
    for case in CASES:
        a, p, r = verdicts(case)
        lines.append(f"| `{case.name}` | {a} | {p} | {r} |")
    lines += ["", "| test | cases | no record because |", "| --- | --- | --- |"]
    for o in OUTSIDE:
        lines.append(f"| `{o.file}::{o.test}` | {o.cases} | {o.why} |")
    return lines


if __name__ == "__main__":  # the child of :func:`reproductions`: VERSION (or "") and case names
    for case_name in sys.argv[2:]:
        values, broken = reproduce(case_name, sys.argv[1] or None)
        print(json.dumps([case_name, values, broken]), flush=True)
