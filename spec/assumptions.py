"""What the kernels assume about their callers, as named objects.

Each :class:`Assumption` is a predicate written in the spec vocabulary, so the
proofs assume it on Z3 terms and the fuzzers' generators check it on the
inputs they build. Each carries its provenance (``spec.provenance``): whether
vLLM guarantees it, with citations into the vLLM corpus that
``tests/spec/test_provenance.py`` checks. :func:`encode_row` is the other half
of the contract: how a caller lays one row's true step (:class:`GhostRow`) into
the kernel inputs under each convention. Proofs constrain memory to it;
generators write it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .geometry import MAX_WINDOW_LIMIT, Conventions, Geometry, chunks_on_boundary, has_prefix_cache, moves_live_column
from .provenance import (
    A1, C1, HOST, HOST_README, PAGE, T1, T2, T3, T5, T6, VERSIONS_README,
    Provenance, cite, cite_flashinfer, contradicted, guaranteed, not_guaranteed,
)
from .vocab import INT32_MAX, Cond, Value, cdiv, conj, disj, implies, ite, negate

MAX_MODEL_LEN_LIMIT = 2**30
"""The largest ``max_model_len`` the int32 obligations cover."""


@dataclass(frozen=True)
class Assumption:
    """A named caller obligation; ``holds`` is a vocabulary predicate and
    ``provenance`` says whether vLLM guarantees it, and where
    (``spec.provenance``). ``built_in`` lists the repository files whose
    caller model keeps it by construction (not as a droppable hypothesis)."""

    name: str
    statement: str
    holds: Callable[..., Cond]
    provenance: Provenance
    built_in: tuple[str, ...] = ()

    def __call__(self, *args: Any) -> Cond:
        return self.holds(*args)


@dataclass(frozen=True)
class GhostRow:
    """One row's step as the scheduler and forward pass know it."""

    computed_before: Value
    query_len: Value
    accepted: Value
    prefilling: Cond
    live_col: Value
    req: Value
    cum_base: Value = 0


def encode_row(conv: Conventions, batch: Value, row: GhostRow) -> list[tuple[str, tuple[Value, ...], Value]]:
    """The kernel-input entries (buffer, index, value) a caller writes for ``row``.

    v1 passes per-row lengths and pre-step counts, v2 cumulative offsets,
    post-step counts (advanced by ``accepted`` on decode rows and by the whole
    query on prefill rows) and an ``idx_mapping``.
    """
    entries: list[tuple[str, tuple[Value, ...], Value]] = []
    if conv.has_idx_mapping:
        entries.append(("idx_mapping", (batch,), row.req))
    if conv.cumulative:
        entries.append(("query_metadata", (batch,), row.cum_base))
        entries.append(("query_metadata", (batch + 1,), row.cum_base + row.query_len))
    else:
        entries.append(("query_metadata", (batch,), row.query_len))
    advance = ite(row.prefilling, row.query_len, row.accepted)
    computed = row.computed_before + advance if conv.post_step else row.computed_before
    entries.append(("num_computed_tokens", (row.req,), computed))
    entries.append(("num_accepted_tokens", (row.req,), row.accepted))
    entries.append(("is_prefilling", (batch,), ite(row.prefilling, 1, 0)))
    if not conv.live_col_is_zero:
        entries.append(("live_cols", (row.req,), row.live_col))
    return entries


def _geometry_supported(geo: Geometry) -> Cond:
    return conj(
        geo.block_size >= 1,
        geo.window >= 1,
        geo.window <= MAX_WINDOW_LIMIT,
        geo.ring_len >= geo.window + 1,
        geo.max_num_reqs >= 1,
    )


GEOMETRY_SUPPORTED = Assumption(
    "geometry_supported",
    "block size >= 1, window W in [1, 16], ring R >= W + 1, max_num_reqs >= 1",
    _geometry_supported,
    guaranteed(
        cite_flashinfer("flashinfer/mamba/checkpointing_ssu.py", 'raise ValueError("max_window must be in [1, 16]")',
                        "FlashInfer's decode kernel refuses a logical window outside [1, 16]."),
        cite(T1, "(MambaBackendEnum.FLASHINFER, 0, 17),",
             "vLLM sizes FlashInfer's ring as the window plus the executed width (17 = 16 + 1 without "
             "speculative tokens), so R >= W + 1."),
        cite(PAGE, "mamba_block_size=first_spec.block_size,",
             "the block size is the Mamba cache spec's block size, a positive tensor dimension."),
    ),
)


def _decode_row_fits(geo: Geometry, row: GhostRow) -> Cond:
    return implies(
        negate(row.prefilling),
        conj(row.query_len >= 1, row.query_len <= geo.window, row.query_len <= geo.max_step),
    )


DECODE_ROW_FITS = Assumption(
    "decode_row_fits",
    "a decode row has 1 <= query_len <= min(W, R - W): FlashInfer's T <= max_window and R = W + T",
    _decode_row_fits,
    guaranteed(
        cite_flashinfer("flashinfer/mamba/checkpointing_ssu.py", "max_window = RING_BUFFER_LEN - T",
                        "FlashInfer's ring holds the window plus the executed width T."),
        cite_flashinfer("flashinfer/mamba/checkpointing_ssu.py", "must be <= max_window ({max_window})",
                        "FlashInfer refuses an executed width longer than the window."),
        cite(T1, "(MambaBackendEnum.FLASHINFER, 3, 20),",
             "with 3 speculative tokens vLLM's ring is 20 = 16 + 4 rows: a decode row of up to 4 tokens fits "
             "beside the full window."),
    ),
)


def _accepted_within_row(geo: Geometry, row: GhostRow) -> Cond:
    return ite(
        row.prefilling,
        conj(row.accepted >= 0, row.accepted <= geo.window),
        conj(row.accepted >= 1, row.accepted <= row.query_len),
    )


ACCEPTED_WITHIN_ROW = Assumption(
    "accepted_within_row",
    "a decode row accepts between 1 and query_len tokens; a prefill row's stale count is in [0, W]",
    _accepted_within_row,
    guaranteed(
        cite(T1, "row 1 rejects all drafts and stops at 15",
             "a decode row that rejects every draft still accepts one token (num_accepted_tokens 1)."),
        cite(T2, "(256, 4, False, 3, 5),  # Ordinary speculative decode commits acceptance.",
             "a decode row accepts at most the tokens it scheduled (3 of 4 here)."),
        cite(PAGE, "computed if NUM_COMPUTED_IS_POST_STEP else computed_before + accepted,",
             "on a prefill row the kernel advances by query_len: the accepted count is not used there."),
    ),
)


def _row_nonempty(geo: Geometry, row: GhostRow) -> Cond:
    return row.query_len >= 1


ROW_NONEMPTY = Assumption(
    "row_nonempty",
    "every real row schedules at least one token (prefill chunks included)",
    _row_nonempty,
    not_guaranteed(
        "vLLM's scheduler would have to promise that every real batch row schedules at least one token; the "
        "corpus holds no scheduler code, and FlashInfer's variable-length decode skips an empty row instead of "
        "refusing it",
        cite_flashinfer("flashinfer/data/include/flashinfer/mamba/kernel_checkpointing_ssu_main.cuh",
                        "return meta.seq_len > 0;", "FlashInfer's varlen decode treats a zero-length row as no work."),
    ),
)


def _decode_within_block(geo: Geometry, row: GhostRow) -> Cond:
    return implies(negate(row.prefilling), row.query_len <= geo.block_size)


DECODE_WITHIN_BLOCK = Assumption(
    "decode_within_block",
    "a decode step is no longer than a block (so it crosses at most one boundary)",
    _decode_within_block,
    not_guaranteed(
        "vLLM would have to promise mamba_block_size >= 1 + num_speculative_tokens; nothing in the corpus does: "
        "its own test runs align mode with 4-token blocks while FlashInfer executes widths up to 16",
        cite(T5, 'block_size=1024 if cache_mode == "none" else 4,',
             "vLLM's model-wide test runs align mode with a block of 4 tokens."),
    ),
)


def _positions_in_model(geo: Geometry, row: GhostRow, max_model_len: Value) -> Cond:
    after = row.computed_before + ite(row.prefilling, row.query_len, row.accepted)
    return conj(
        row.computed_before >= 0,
        row.query_len >= 0,
        row.computed_before + row.query_len <= max_model_len,
        after <= max_model_len,
        max_model_len <= MAX_MODEL_LEN_LIMIT,
    )


POSITIONS_IN_MODEL = Assumption(
    "positions_in_model",
    "0 <= computed_before and computed_before + query_len <= max_model_len <= 2^30",
    _positions_in_model,
    not_guaranteed(
        "vLLM's scheduler would have to promise that no request computes past max_model_len (the corpus holds no "
        "scheduler code); max_model_len <= 2^30 is this model's bound for int32 arithmetic, which vLLM does not "
        "state",
        cite(T2, "(0, 50_000, True, 1, 0),  # Long prefill still has only one live column.",
             "vLLM's tests run positions of 50,000 tokens, far inside 2^30."),
    ),
)


def last_scheduled_block(row: GhostRow, block_size: Value) -> Value:
    """The block of the row's last scheduled token: ``ceil((N + q) / bs) - 1``."""
    return cdiv(row.computed_before + row.query_len + block_size - 1, block_size) - 1


def _live_col_is_last_block(geo: Geometry, mode: str, row: GhostRow) -> Cond:
    if not moves_live_column(mode):
        return row.live_col == 0
    return row.live_col == last_scheduled_block(row, geo.block_size)


LIVE_COL_IS_LAST_BLOCK = Assumption(
    "live_col_is_last_block",
    "align and all mode: the live column is the block of the last scheduled token; mode none: column 0",
    _live_col_is_last_block,
    guaranteed(
        cite(PAGE, "# Mode none has one live column, regardless of the prompt length.",
             "in mode none the live state is always in column 0."),
        cite(T2, "(50_000, 4, True, 1, 0),  # Later chunks must also reset column zero.",
             "a mode-none chunk far past the first block still uses column 0."),
        cite(T3, "live_cols=_cuda_ints([0, 2, 1]),",
             "align mode: requests whose last scheduled tokens are 15, 47 and 31 (block size 16) name columns 0, 2 "
             "and 1 live, the blocks of those tokens."),
        cite(T1, "live_cols=ints([1, 1, 1]),",
             "rows at 14 scheduling 4 tokens (last token 17, block size 16) name column 1 live."),
    ),
)


def _prefill_chunk_on_boundary(geo: Geometry, mode: str, row: GhostRow, final_chunk: Cond) -> Cond:
    if not chunks_on_boundary(mode):
        return True
    ends_on_boundary = cdiv(row.computed_before + row.query_len, geo.block_size) * geo.block_size == (
        row.computed_before + row.query_len
    )
    starts_on_boundary = cdiv(row.computed_before, geo.block_size) * geo.block_size == row.computed_before
    return implies(row.prefilling, conj(disj(final_chunk, ends_on_boundary), starts_on_boundary))


PREFILL_CHUNK_ON_BOUNDARY = Assumption(
    "prefill_chunk_on_boundary",
    "align mode: a prefill chunk starts on a block boundary and, unless it is the last, ends on one",
    _prefill_chunk_on_boundary,
    not_guaranteed(
        "vLLM's scheduler in align mode would have to promise that a prefill chunk starts on a block boundary "
        "and that a non-final chunk ends on one (the purpose of align mode, vLLM #30877); the corpus holds no "
        "scheduler code, only tests whose chunks end on boundaries",
        cite(HOST_README, "#30877 (the align-mode PR)", "the align-mode PR is where vLLM aligns Mamba caching to blocks."),
        cite(T3, "_cuda_ints([0, 48, 52, 68, 68]) if post_step else _cuda_ints([48, 4, 16, 0])",
             "vLLM's align-mode test schedules prefill chunks of 48 and 16 tokens from 0 (block size 16)."),
    ),
)


def _slot_in_capacity(slot: Value, num_slots: Value, pad: Value) -> Cond:
    return disj(slot == pad, conj(slot >= 0, slot < num_slots))


def _pool_has_null_block(num_slots: Value, pad_slot: Value) -> Cond:
    return num_slots > pad_slot


POOL_HAS_NULL_BLOCK = Assumption(
    "pool_has_null_block",
    "the tracker arrays hold the null block (num_slots > PAD_SLOT_ID), which vLLM's block pool always "
    "allocates (slot_in_capacity admits the null id whatever num_slots is)",
    _pool_has_null_block,
    guaranteed(
        cite(VERSIONS_README, "`NULL_BLOCK_ID = 0`", "vLLM's null block is block 0 of every pool."),
        cite(PAGE, "ring_start = torch.zeros(num_blocks, dtype=torch.int32, device=device)",
             "the trackers have one entry per block of the pool, the null block included."),
    ),
)


SLOT_IN_CAPACITY = Assumption(
    "slot_in_capacity",
    "every block-table entry is the null id or a slot below the tracker length",
    _slot_in_capacity,
    guaranteed(
        cite(PAGE, "# Block-table writers emit either the null sentinel or an in-capacity ID.",
             "the kernels' authors state that block-table entries are the null id or a block of the pool."),
        cite(PAGE, "ring_start = torch.zeros(num_blocks, dtype=torch.int32, device=device)",
             "the trackers are as long as the pool, so every pool block has an entry."),
    ),
)


def _idx_mapping_in_range(req: Value, max_num_reqs: Value) -> Cond:
    return req < max_num_reqs


IDX_MAPPING_IN_RANGE = Assumption(
    "idx_mapping_in_range",
    "idx_mapping entries are negative (padding) or persistent indices below max_num_reqs",
    _idx_mapping_in_range,
    guaranteed(
        cite(VERSIONS_README, "a negative value marks a padded row",
             "idx_mapping entries are persistent request indices, or negative for padding."),
        cite(T3, "idx_mapping=_cuda_ints([1, 2, 0, -1]),",
             "vLLM's test maps rows to persistent indices below max_num_reqs (4) and pads with -1."),
    ),
)


def _columns_in_table(col: Value, num_cols: Value) -> Cond:
    return col < num_cols


COLUMNS_IN_TABLE = Assumption(
    "columns_in_table",
    "live, source and destination columns are below the block table's width",
    _columns_in_table,
    not_guaranteed(
        "the model runner computes live, source and destination columns (not part of the corpus); vLLM would "
        "have to promise they stay below the block table's width, which in mode none is 1 + speculative blocks "
        "whatever the prompt length (vLLM #30877)",
        cite(VERSIONS_README, "The model runner code that computes the per-step inputs",
             "the code that computes live_cols and src_cols/dst_cols is outside the corpus."),
        cite(HOST_README, "`(max_num_blocks_per_req if enable_prefix_caching else 1) + num_speculative_blocks` columns",
             "the table width vLLM allocates per Mamba group."),
    ),
)


NUM_SPECULATIVE_BLOCKS = 0
"""The block-table columns vLLM adds to a ReplaySSM group for speculative
tokens: none, since the replay ring holds the drafts (vLLM's own block-copy
test asserts ``num_speculative_blocks == 0`` in align mode with 3 speculative
tokens, ``../shared/reference/vllm-host/T6_block_copy_test.py``). The model
keeps it a parameter of :func:`block_table_width`; every world uses 0."""


def block_table_width(mode: str, max_model_len: int, block_size: int,
                      num_speculative_blocks: int = NUM_SPECULATIVE_BLOCKS) -> int:
    """The columns vLLM gives a Mamba group's block table in cache mode
    ``mode`` (vLLM #30877): one per block of ``max_model_len`` tokens with
    prefix caching (align and all mode), a single one without (mode none:
    the live column holds a request of any length), plus the speculative
    blocks."""
    blocks = -(-max_model_len // block_size) if has_prefix_cache(mode) else 1
    return blocks + num_speculative_blocks


def _model_fits_table(mode: str, max_model_len: Value, block_size: Value, num_cols: Value) -> Cond:
    if not has_prefix_cache(mode):
        return num_cols >= 1
    return conj(num_cols >= 1, max_model_len <= num_cols * block_size)


MODEL_FITS_TABLE = Assumption(
    "model_fits_table",
    "the block table has at least one column; in align and all mode one for every block of max_model_len tokens "
    "(mode none: one live column whatever the prompt length)",
    _model_fits_table,
    guaranteed(
        cite(HOST_README, "`(max_num_blocks_per_req if enable_prefix_caching else 1) + num_speculative_blocks`",
             "vLLM gives a Mamba group's table a column per block of a request with prefix caching (align), one "
             "without (mode none), plus the speculative blocks."),
        cite(T2, "block_table = torch.ones((256, 1), dtype=torch.int32, device=\"cuda\")",
             "vLLM's mode-none test runs a one-column table ..."),
        cite(T2, "(0, 50_000, True, 1, 0),  # Long prefill still has only one live column.",
             "... with a 50,000-token chunk at block size 256."),
    ),
)


def _packed_tables_match_layers(base: Value, layers: Value, total_layers: Value, max_num_reqs: Value) -> Cond:
    return conj(
        base >= 0,
        layers >= 1,
        base + layers * max_num_reqs <= total_layers * max_num_reqs,
        total_layers * max_num_reqs <= INT32_MAX,
    )


PACKED_TABLES_MATCH_LAYERS = Assumption(
    "packed_tables_match_layers",
    "each group's packed-table entries [base, base + layers * MAX_NUM_REQS) lie inside the [layer, batch] "
    "allocation, whose size fits int32",
    _packed_tables_match_layers,
    not_guaranteed(
        "the layout is the reference's, but vLLM states no bound keeping layers * max_num_reqs inside int32 "
        "(the kernels index the tables with int32 offsets)",
        cite(PAGE, "# Each pointer selects a group's first row in the flat [layer, batch]",
             "each group's src/dst tables start at its first layer's row of one [layer, batch] allocation."),
        cite(PAGE, "(len(mixers), max_num_reqs),",
             "that allocation has one row of max_num_reqs entries per layer."),
    ),
)


def _packed_groups_disjoint(base_a: Value, layers_a: Value, base_b: Value, layers_b: Value, max_num_reqs: Value, same_group: Cond) -> Cond:
    return disj(same_group, base_a + layers_a * max_num_reqs <= base_b, base_b + layers_b * max_num_reqs <= base_a)


PACKED_GROUPS_DISJOINT = Assumption(
    "packed_groups_disjoint",
    "two cache groups own disjoint rows of the packed [layer, batch] tables",
    _packed_groups_disjoint,
    guaranteed(
        cite(PAGE, "layer_offsets.append(layer_offsets[-1] + len(group))",
             "the groups' first rows are the running sums of their layer counts, so their rows do not overlap."),
    ),
)


def _batch_in_launch(batch: Value, group: Value, num_reqs: Value, groups: Value, max_num_reqs: Value) -> Cond:
    return conj(batch >= 0, batch < num_reqs, num_reqs <= max_num_reqs, group >= 0, group < groups)


BATCH_IN_LAUNCH = Assumption(
    "batch_in_launch",
    "0 <= batch < num_reqs <= max_num_reqs and 0 <= group < number of groups",
    _batch_in_launch,
    not_guaranteed(
        "the program ids are in range by the grid, but num_reqs <= max_num_reqs is the scheduler's bound on a "
        "batch, which the corpus does not show and the reference does not check",
        cite(PAGE, "_postprocess_replayssm_kernel[(num_reqs, len(self.block_tables))](",
             "the grid is (num_reqs, number of groups): program ids are in range by construction."),
        cite(PAGE, "(max_num_reqs,), -1, dtype=torch.int32, device=device",
             "the per-row plan buffers have max_num_reqs entries."),
    ),
)


def _exclusive_decode_live_slot(live_slot: Value, decode: Cond, other_written_slot: Value, pad: Value) -> Cond:
    return implies(conj(decode, live_slot != pad), other_written_slot != live_slot)


EXCLUSIVE_DECODE_LIVE_SLOT = Assumption(
    "exclusive_decode_live_slot",
    "within one launch and group, no other row writes the trackers of a decode row's live slot",
    _exclusive_decode_live_slot,
    guaranteed(
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "vLLM's block manager maps distinct live columns to distinct allocated blocks."),
    ),
)


def _fresh_distinct_destinations(dst_slot: Value, other_src_or_dst: Value, pad: Value) -> Cond:
    return implies(dst_slot != pad, dst_slot != other_src_or_dst)


FRESH_DISTINCT_DESTINATIONS = Assumption(
    "fresh_distinct_destinations",
    "within one migration launch and group, a destination slot is no other row's source or destination",
    _fresh_distinct_destinations,
    guaranteed(
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "distinct live columns (a fresh destination is one) map to distinct physical blocks."),
    ),
)


def _distinct_slots_in_row(slot_a: Value, slot_b: Value, col_a: Value, col_b: Value, pad: Value) -> Cond:
    return implies(conj(col_a != col_b, slot_a != pad), slot_a != slot_b)


DISTINCT_SLOTS_IN_ROW = Assumption(
    "distinct_slots_in_row",
    "the non-null slots of one block-table row are pairwise distinct",
    _distinct_slots_in_row,
    contradicted(
        "vLLM's own model-wide test names one physical block in two columns of a row (a live column moved "
        "while the block stays), and C1's comment promises distinct blocks for distinct live columns only: "
        "vLLM would have to promise distinct blocks for every column of a row, and its test shows it does not",
        cite(T5, "block_tables[0][0, 1] = block_tables[0][0, 0]",
             "vLLM's test aliases columns 0 and 1 of a row to one block in one cache group."),
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "the block manager's promise is about distinct live columns, not every column of a row."),
    ),
)


def _groups_agree_on_null(null_in_group: list[Value]) -> Cond:
    return conj(*[x == 0 for x in null_in_group])


GROUPS_AGREE_ON_NULL = Assumption(
    "groups_agree_on_null",
    "groups agree on null slots: a scheduled request's live column is a real block in every cache group "
    "(no group hands it the null block while another gives it a real one)",
    _groups_agree_on_null,
    not_guaranteed(
        "vLLM's scheduler would have to promise that a request's live column is a real block in every cache "
        "group or in none; the reference says groups share logical columns but are given their own slots, and "
        "vLLM's own test schedules a row whose live column is null",
        cite(PAGE, "# transitions. The scheduler still assigns each group its own slots.",
             "groups share logical columns while each group gets its own physical slots."),
        cite(T1, "# Rows 2 and 3 exercise padded physical slots and padded request indices.",
             "vLLM's test schedules a request whose live column holds the null block."),
    ),
)


def _is_prefilling_agrees(flag: Cond, forward_prefill: Cond) -> Cond:
    return flag == forward_prefill


IS_PREFILLING_AGREES = Assumption(
    "is_prefilling_agrees",
    "the is_prefilling input of a row equals how the forward pass treated it (chunked scan vs FlashInfer decode)",
    _is_prefilling_agrees,
    not_guaranteed(
        "the reference stages is_prefilling from the Mamba forward's own classification, but earlier versions "
        "(A1, A2, B1, B3) say that vLLM runs a one-token final prefill chunk with prior state as a decode while "
        "is_prefilling says prefill, and correct it in the kernel: vLLM would have to promise the reference's "
        "staging in every version",
        cite(PAGE, "# Staged from forward metadata using Mamba attention's classification.",
             "in the reference, is_prefilling is the forward pass's classification."),
        cite(A1, "# Mamba attention runs a one-token final prefill chunk with prior state as",
             "in A1's era the flag and the forward pass disagree on one-token final chunks."),
    ),
)


def _fresh_slot_is_free(ref: Value) -> Cond:
    return ref == 0


FRESH_SLOT_IS_FREE = Assumption(
    "fresh_slot_is_free",
    "a newly allocated block is referenced by no block table (the pool hands out only free blocks)",
    _fresh_slot_is_free,
    not_guaranteed(
        "vLLM's block pool would have to promise that a newly allocated block is in no block table; the corpus "
        "holds no block-pool code (C1's comment speaks of distinct live columns only)",
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "the block manager's promise covers distinct live columns, not a fresh block versus every table."),
    ),
)


def _moved_block_carries(moved: Cond, carried: Cond) -> Cond:
    return implies(moved, carried)


LIVE_MOVE_COPIES_STATE = Assumption(
    "live_move_copies_state",
    "when a request's live column moves to another real block, the scheduler's block copy puts the old block's "
    "state and replay ring into the new one (copy-on-write)",
    _moved_block_carries,
    guaranteed(
        cite(T6, "assert spec.requires_live_state_copy",
             "in align mode vLLM's Mamba cache spec asks the scheduler to copy the live state when it moves."),
        cite(T6, "assert torch.equal(raw[1], before[0])",
             "the block copy 0 -> 1 copies the packed state and ring pages."),
    ),
    ("spec/system/step.py",),
)


BLOCK_COPY_MOVES_TRACKERS = Assumption(
    "block_copy_moves_trackers",
    "the scheduler's block copy of a moved live block carries its trackers (ring_start, num_committed) with its "
    "state and ring",
    _moved_block_carries,
    guaranteed(
        cite(HOST, "Collect FlashInfer ReplaySSM state for scheduler block copies.",
             "vLLM's host module adds ReplaySSM state, trackers included, to the scheduler's block copies."),
        cite(T6, "t[1] = t[0]", "vLLM's test of the block copy 0 -> 1 expects the tracker entries copied too."),
        cite(PAGE, "Include shared trackers in scheduler block copies alongside packed pages.",
             "the reference's block-copy tensor list holds the trackers."),
    ),
    ("spec/system/step.py",),
)


def _prefill_continuation_longer_than_one(geo: Geometry, row: GhostRow) -> Cond:
    return implies(conj(row.prefilling, row.computed_before > 0), row.query_len >= 2)


PREFILL_CONTINUATION_LONGER_THAN_ONE = Assumption(
    "prefill_continuation_longer_than_one",
    "a row flagged as a prefill chunk that continues a request (N > 0) schedules at least 2 tokens: vLLM's Mamba "
    "forward runs a one-token row with prior state as a decode, so the caller flags a one-token prompt tail as the "
    "decode it is (prompt_tail_runs_as_decode)",
    _prefill_continuation_longer_than_one,
    contradicted(
        "A1-era callers flag the one-token final chunk after prior state as a prefill while the forward runs it as "
        "a decode (A1, A2, B1, B3 correct the flag in the kernel): a review that keeps this assumption does not "
        "judge what those callers pass; the review's probes drop it. The tail as the reference stages it (a "
        "decode row, is_prefilling 0, as vLLM's tests run it) is in every campaign and in the system model",
        cite(A1, "# Mamba attention runs a one-token final prefill chunk with prior state as",
             "A1's callers flag one-token final chunks after prior state as prefill chunks."),
        cite(A1, "prefilling = prefilling & ((query_len != 1) | (computed_before <= 0))",
             "A1's kernel turns such a flag of 1 back into a decode."),
    ),
)


ALL = [
    GEOMETRY_SUPPORTED,
    DECODE_ROW_FITS,
    ACCEPTED_WITHIN_ROW,
    ROW_NONEMPTY,
    DECODE_WITHIN_BLOCK,
    POSITIONS_IN_MODEL,
    LIVE_COL_IS_LAST_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    POOL_HAS_NULL_BLOCK,
    SLOT_IN_CAPACITY,
    IDX_MAPPING_IN_RANGE,
    COLUMNS_IN_TABLE,
    MODEL_FITS_TABLE,
    PACKED_TABLES_MATCH_LAYERS,
    PACKED_GROUPS_DISJOINT,
    BATCH_IN_LAUNCH,
    EXCLUSIVE_DECODE_LIVE_SLOT,
    FRESH_DISTINCT_DESTINATIONS,
    DISTINCT_SLOTS_IN_ROW,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    FRESH_SLOT_IS_FREE,
    LIVE_MOVE_COPIES_STATE,
    BLOCK_COPY_MOVES_TRACKERS,
    PREFILL_CONTINUATION_LONGER_THAN_ONE,
]
"""Every caller assumption, by name."""


PER_REQUEST = (
    DECODE_ROW_FITS,
    ACCEPTED_WITHIN_ROW,
    ROW_NONEMPTY,
    DECODE_WITHIN_BLOCK,
    LIVE_COL_IS_LAST_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    IS_PREFILLING_AGREES,
)
"""The assumptions a caller keeps or breaks one request at a time, inside
the buffers' bounds: one row can break one while the other rows keep it.
The fuzzers' ``--drop NAME`` breaks one of these for some requests and checks
that the kernels contain the damage (every other request's state as the spec
says)."""
