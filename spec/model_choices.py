"""The model's built-in choices about vLLM's caller, as named records.

A caller assumption (``spec.assumptions``) is a predicate the proofs assume
and a probe can drop. The system model, the fuzz callers and the review's
caller model also *build in* choices about what vLLM does (how a block copy
moves state, where padding rows sit, which blocks a step allocates, what
FlashInfer executes). Each is a :class:`ModelChoice` here, named, with the
modules that build it in and its provenance (``spec.provenance``), so review
and proofs can refer to it by name and a reader sees which of them vLLM
guarantees. The records about vLLM's ``all`` cache mode say what the model
assumes there, in its two host shapes (``docs/assumptions.md``, "Cache modes").
"""

from __future__ import annotations

from dataclasses import dataclass

from .provenance import (
    A1, A3, A4, C1, D1, D3, HOST, HOST_README, PAGE, RELEASE_BATCH, T1, T2, T3, T4, T5, T6, VERSIONS_README,
    Provenance, cite, cite_flashinfer, contradicted, guaranteed, not_guaranteed,
)

@dataclass(frozen=True)
class ModelChoice:
    """A choice the model builds in: ``built_in`` lists the repository files
    that build it in (empty: not modelled), ``provenance`` whether vLLM
    guarantees it."""

    name: str
    statement: str
    built_in: tuple[str, ...]
    provenance: Provenance


_RUNNER_CODE = cite(VERSIONS_README, "The model runner code that computes the per-step inputs",
                    "the code that computes live_cols, src_cols/dst_cols, the materialize_* vectors and "
                    "is_prefilling is outside the corpus.")

# -- block copies and allocation -------------------------------------------------------------------

BLOCK_COPY_ON_WRITE = ModelChoice(
    "block_copy_on_write",
    "a scheduled request whose live block another table names (a prefix hit) gets a private copy first: the "
    "scheduler's block copy moves state, ring and trackers",
    ("spec/system/step.py", "fuzz/caller_tables.py"),
    guaranteed(
        cite(T1, "# Slot 1 is an immutable cached prefix, copied to private live slot 3.",
             "vLLM's test copies a cached prefix block to a private live block before running on it."),
        cite(T6, "assert spec.requires_live_state_copy", "align mode asks the scheduler for live-state copies."),
        cite(HOST, "Collect FlashInfer ReplaySSM state for scheduler block copies.",
             "the scheduler's block copies carry the ReplaySSM state and trackers."),
    ),
)

COVERED_BLOCKS_ALLOCATED = ModelChoice(
    "covered_blocks_allocated",
    "a step allocates a block for every column a scheduled row covers before its live column (one that holds "
    "the null block gets a fresh block in every group, or the null block in every group), and the postprocess "
    "resets each real one a prefill chunk touched",
    ("spec/system/step.py", "fuzz/caller_tables.py"),
    guaranteed(
        cite(PAGE, "# Reset every touched prefix block, including intermediate blocks",
             "the kernel resets the intermediate blocks of a chunk, so they are allocated."),
        cite(T3, "[0, 1, 2],", "vLLM's test gives a 48-token chunk (block size 16) three real blocks."),
        cite(PAGE, "valid_prefill_slot = prefill_slot != PAD_SLOT_ID",
             "a touched column may hold the null block, which the reset skips."),
    ),
)

PREFILL_WRITES_COVERED_BLOCK_STATES = ModelChoice(
    "prefill_writes_covered_block_states",
    "align mode: a prefill chunk's forward pass leaves, in each real block it covers whole before its live one, "
    "the state at that block's end",
    ("spec/system/step.py",),
    not_guaranteed(
        "the prefix cache registers every block a step fills (prefix_cache_registers_filled_blocks) and A1 says "
        "a touched intermediate block can become another request's live source through a prefix hit, so its "
        "state must be the boundary's; only all mode's prefill is said to write every boundary state (D1), and "
        "vLLM's chunked-scan forward, which is not in the corpus, would have to promise it in align mode",
        cite(A1, "# Any block touched by prefill can later become another request's live",
             "A1: an intermediate block a prefill touched can be another request's live source through a prefix hit."),
        cite(D1, "All-mode prefill writes every boundary state in this interval.",
             "D1 says all mode's prefill writes the state at every boundary it covers."),
    ),
)

PREFIX_CACHE_REGISTERS_FILLED_BLOCKS = ModelChoice(
    "prefix_cache_registers_filled_blocks",
    "align and all mode: the prefix cache registers each non-null block a step filled, under its stream and "
    "boundary (whether or not the host publishes in the mode)",
    ("spec/system/step.py",),
    not_guaranteed(
        "vLLM's KV-cache manager would have to promise which Mamba blocks it registers for prefix hits; the "
        "corpus holds no cache-manager code",
        _RUNNER_CODE,
    ),
)

# -- prefix hits -----------------------------------------------------------------------------------

PREFIX_HIT_WHOLE_BLOCKS_EVERY_GROUP = ModelChoice(
    "prefix_hit_whole_blocks_every_group",
    "a prefix hit serves whole blocks registered under the request's stream, the same columns in every cache "
    "group",
    ("spec/system/admission.py", "fuzz/callers.py"),
    guaranteed(
        cite(PAGE, "# Homogeneous groups share cache-hit lookup, logical columns, and replay",
             "one cache-hit lookup serves every group, over the same logical columns."),
    ),
)

PREFIX_HIT_LEAVES_A_CHUNK = ModelChoice(
    "prefix_hit_leaves_a_chunk",
    "a prefix hit leaves at least one prompt token to compute: a prefill chunk, or with one token left a "
    "prompt tail that may run as a decode (prompt_tail_runs_as_decode)",
    ("spec/system/admission.py", "fuzz/callers.py"),
    not_guaranteed(
        "vLLM's scheduler would have to promise that a prefix hit never covers the whole prompt; the corpus holds "
        "no scheduler code, only a test whose cached prompt leaves its last token to compute",
        cite(T2, "(256, 4, False, 1, 3),  # Padded cached prompt tail commits its real token.",
             "vLLM's test computes the one-token tail of a cached prompt (as a decode row of width 4)."),
    ),
)

PREFIX_CACHE_ONLY_WITH_CACHING = ModelChoice(
    "prefix_cache_only_with_caching",
    "mode none has no prefix cache: no hit, nothing registered, nothing published",
    ("spec/system/admission.py", "spec/system/step.py", "fuzz/callers.py"),
    guaranteed(
        cite(HOST_README, "`(max_num_blocks_per_req if enable_prefix_caching else 1) + num_speculative_blocks`",
             "mode none is vLLM without prefix caching."),
        cite(PAGE, "if not self.materialize_prefixes:", "without prefix materialization nothing is published."),
    ),
)

PREFIX_HIT_SOURCE_IS_LAST_HIT_BLOCK = ModelChoice(
    "prefix_hit_source_is_last_hit_block",
    "after a prefix hit, the first step's migration source column is the last hit block",
    ("spec/system/admission.py", "fuzz/callers.py"),
    not_guaranteed("the model runner computes src_cols; vLLM would have to promise this choice", _RUNNER_CODE),
)

# -- rows of a step --------------------------------------------------------------------------------

PROMPT_TAIL_RUNS_AS_DECODE = ModelChoice(
    "prompt_tail_runs_as_decode",
    "a request with prior state (N > 0) and one prompt token left may run it as a decode row of 1..T tokens (the "
    "real token, then placeholders up to the executed width) that accepts exactly the real token (N reaches the "
    "prompt); the forward is FlashInfer's decode, and its live column, as for every decode row, is the block of "
    "the last scheduled token (is_prefilling 0 unless is_prefilling_agrees is dropped); every other row of a "
    "request in its prompt is a prefill chunk",
    ("spec/system/rows.py", "spec/system/step.py", "fuzz/callers.py", "fuzz/wide.py"),
    guaranteed(
        cite(T2, "(256, 4, False, 1, 3),  # Padded cached prompt tail commits its real token.",
             "vLLM's test runs a cached prompt's tail after 256 tokens as a decode row (is_prefilling False) of "
             "width 4 that accepts one token: the real one."),
        cite(T3, "(256, 4, False, 1, 2, 3, 3, 3),  # Padded prompt tail.",
             "the same row in a later generation: a decode of width 4 accepting 1 commits one row."),
        cite(A1, "# Mamba attention runs a one-token final prefill chunk with prior state as",
             "vLLM's Mamba forward runs the one-token final chunk after prior state as a decode (A1-era callers "
             "still flag it is_prefilling 1, which the kernel corrects)."),
        cite(T1, "live_cols=ints([1, 1, 1]),",
             "decode rows at 14 of width 4 (block size 16) name column 1 live, the block of the last scheduled "
             "token, placeholders and drafts included; the corpus has no align-mode tail of its own (its tails "
             "are mode none, live column 0)."),
    ),
)

ONE_TOKEN_CONTINUATION_RUNS_AS_DECODE = ModelChoice(
    "one_token_continuation_runs_as_decode",
    "review: vLLM's Mamba forward runs a one-token row with prior state as a decode",
    ("review/lifecycle.py",),
    guaranteed(
        cite(A1, "# Mamba attention runs a one-token final prefill chunk with prior state as",
             "the forward runs such a row as a decode."),
    ),
)

PREFILL_STARTS_FROM_STATE_ALONE = ModelChoice(
    "prefill_starts_from_state_alone",
    "the forward pass of a prefill chunk starts from its live slot's state (zeros at position 0), not from a "
    "replay of its ring, and leaves the state after the chunk there",
    ("spec/system/step.py", "review/ghost.py", "fuzz/caller_forward.py"),
    not_guaranteed(
        "vLLM's chunked-scan forward, which is not in the corpus, would have to promise it; the kernels are "
        "consistent with it (they reset a prefill row's trackers and publish its state as exact)",
        cite(PAGE, "# Prefill already wrote canonical state; only another slot needs a copy.",
             "after a prefill chunk the live slot holds the exact state."),
    ),
)

EMPTY_STEP_LAUNCHES_NOTHING = ModelChoice(
    "empty_step_launches_nothing",
    "a step that schedules no request launches no kernel",
    ("spec/system/step.py",),
    guaranteed(cite(PAGE, "if num_reqs == 0:", "the host returns before any launch when no request is scheduled.")),
)

DECODE_CHECKPOINTS_ON_ROW_LENGTH = ModelChoice(
    "decode_checkpoints_on_row_length",
    "FlashInfer's decode kernel checkpoints when pnat + query_len > W, query_len being the row's length as the "
    "postprocess reads it",
    ("spec/flashinfer.py", "spec/system/step.py", "fuzz/caller_forward.py"),
    not_guaranteed(
        "FlashInfer decides on the executed width (a fixed-width launch: the padded width of every row); vLLM "
        "would have to promise that the postprocess's query_len is that width for every decode row (its padded "
        "layout does; A4 and A5 pass EXECUTED_QUERY_WIDTH for callers where it is not)",
        cite_flashinfer("flashinfer/data/include/flashinfer/mamba/kernel_checkpointing_ssu_main.cuh",
                        "return meta.pnat + NPREDICTED > MAX_WINDOW;",
                        "a fixed-width launch checkpoints on the executed width NPREDICTED, not a row's own length."),
        cite(A4, "executed_query_len = EXECUTED_QUERY_WIDTH",
             "A4 replaces query_len by the executed width in the checkpoint rule."),
        cite(T4, "def test_gdn_replayssm_postprocess_uses_executed_width(",
             "vLLM's test runs rows of query_len 1 executed at widths 4 and 8 and expects the checkpoint of the "
             "executed width."),
        cite(T2, "(256, 4, False, 1, 3),  # Padded cached prompt tail commits its real token.",
             "vLLM reports the padded width (4) as query_len for a row with one real token."),
    ),
)

# -- batch layout ----------------------------------------------------------------------------------

BATCH_ORDER_PICKED_PER_STEP = ModelChoice(
    "batch_order_picked_per_step",
    "each engine step puts its scheduled requests in batch rows 0..n-1 in an order it picks, any permutation, "
    "whatever the order of the step before (v2 passes it as idx_mapping; v1's kernels take the row as the "
    "request index)",
    ("spec/system/step.py", "spec/system/exploration.py", "verify/system_steps.py", "fuzz/caller_policy.py"),
    guaranteed(
        cite(T3, "# Reordered rows: canonical prefill in slot 2; in-place MTP replay in slot 4;",
             "vLLM's test puts requests in batch rows out of their index order ..."),
        cite(T3, "idx_mapping=_cuda_ints([1, 2, 0, -1]),", "... rows 0, 1, 2 holding requests 1, 2, 0; ..."),
        cite(T1, "mapping = ints([2, 0, 1, -1])", "... another launch's rows holding requests 2, 0, 1."),
        cite(PAGE, "req_idx = tl.load(idx_mapping + batch_idx)",
             "every launch reads each row's request from the mapping it is passed: the kernels keep no order "
             "from one step to the next."),
        cite(PAGE, "req_idx = batch_idx",
             "without a mapping (v1) the row is the request index of whichever request the caller put there."),
    ),
)

PADDING_ROWS_LAST = ModelChoice(
    "padding_rows_last",
    "system model: padding rows (idx_mapping -1) come after the scheduled rows; a v2 launch covers "
    "max_num_reqs rows",
    ("spec/system/step.py",),
    not_guaranteed(
        "vLLM's tests put padding rows last, but nothing promises it; the fuzz callers place padding rows "
        "anywhere",
        cite(T1, "mapping = ints([2, 0, 1, -1])", "vLLM's test pads the batch after its real rows."),
    ),
)

ROWS_BY_BATCH_WITHOUT_IDX_MAPPING = ModelChoice(
    "rows_by_batch_without_idx_mapping",
    "without idx_mapping (v1), per-request inputs sit at the batch row",
    ("spec/ghost_row.py", "spec/system/step.py", "fuzz/callers.py"),
    guaranteed(
        cite(VERSIONS_README, "Without it `req_idx = row`.", "without idx_mapping the request index is the row."),
        cite(PAGE, "req_idx = batch_idx", "the kernel starts from the row as the request index."),
    ),
)

CALLER_ENCODES_ROW = ModelChoice(
    "caller_encodes_row",
    "the caller lays each row into the kernel inputs as spec.ghost_row.encode_row does under the step's "
    "conventions (lengths or cumulative offsets, pre- or post-step counts)",
    ("spec/ghost_row.py", "verify/scenarios.py"),
    guaranteed(
        cite(VERSIONS_README, "`QUERY_METADATA_IS_CUMULATIVE` (D3: `QUERY_IS_CUMULATIVE`) selects",
             "the conventions select lengths or offsets, pre- or post-step counts."),
        cite(PAGE, "NUM_COMPUTED_IS_POST_STEP, computed - query_len, computed",
             "a post-step count is the pre-step count plus the step."),
    ),
)

# -- groups ----------------------------------------------------------------------------------------

GROUPS_SHARE_CACHE_SPEC = ModelChoice(
    "groups_share_cache_spec",
    "every cache group has the same block size, window and ring length (one Geometry)",
    ("spec/system/state.py", "fuzz/caller_shapes.py"),
    guaranteed(cite(PAGE, "FlashInfer ReplaySSM requires equal Mamba cache specs",
                    "the host refuses groups with different cache specs.")),
)

GROUPS_SHARE_TABLE_WIDTH = ModelChoice(
    "groups_share_table_width",
    "every cache group's block table has the same number of columns",
    ("spec/system/state.py", "fuzz/caller_shapes.py"),
    not_guaranteed(
        "the reference passes a block-table stride per group; vLLM would have to promise equal widths (D1-D3 "
        "refuse unequal strides, the reference does not)",
        cite(PAGE, "block_table_strides=_cuda_i64_slot_strides(block_tables),", "one stride per group."),
        cite(D3, "model-wide ReplaySSM requires one block-table row stride", "D3 requires one stride."),
    ),
)

# -- slots -----------------------------------------------------------------------------------------

NULL_BLOCK_IS_PAD = ModelChoice(
    "null_block_is_pad",
    "slot 0 is the null block of every group and the pad id every kernel compares slots with",
    ("spec/geometry.py", "spec/system/state.py"),
    guaranteed(
        cite(PAGE, "PAD_SLOT_ID=NULL_BLOCK_ID,", "the host launches every kernel with the null block as pad id."),
        cite(VERSIONS_README, "`NULL_BLOCK_ID = 0`", "the null block is block 0."),
    ),
)

MIGRATION_COLUMNS_OLD_AND_NEW_LIVE = ModelChoice(
    "migration_columns_old_and_new_live",
    "src_cols is a request's previous live column (-1 when it has none), dst_cols its new live column",
    ("spec/system/step.py", "fuzz/caller_launches.py", "review/arguments.py"),
    guaranteed(cite(VERSIONS_README, "caller supplies the old and new logical column of each request",
                    "the migration kernel's caller passes the old and the new column.")),
)

LIVE_COLS_ZERO_WHEN_ABSENT = ModelChoice(
    "live_cols_zero_when_absent",
    "review: a generation without LIVE_COL_IS_ZERO gets live_cols of column 0 everywhere in mode none",
    ("review/arguments.py",),
    guaranteed(cite(T5, 'live_cols = torch.zeros(2, dtype=torch.int32, device="cuda")',
                    "vLLM's mode-none test of the model-wide kernel passes zeros.")),
)

MATERIALIZE_COLUMNS_FROM_BOUNDARY = ModelChoice(
    "materialize_columns_from_boundary",
    "review: the materialize_src/dst columns and token counts (B2-D) come from mamba_state_copy_boundary of "
    "the row's running position and new count",
    ("review/arguments.py", "verify/kernels/named.py"),
    not_guaranteed("the model runner computes these vectors; vLLM would have to promise this derivation",
                   _RUNNER_CODE),
)

ALIGN_WITH_LIVE_COL_ZERO_IN_BLOCK_ZERO = ModelChoice(
    "align_with_live_col_zero_in_block_zero",
    "fuzz: align mode without live_cols (LIVE_COL_IS_ZERO) runs only requests inside block 0, since no vLLM "
    "caller publishes prefixes without passing live columns",
    ("fuzz/callers.py",),
    guaranteed(
        cite(A4, "# Prefix modes must clear every touched position-indexed state slot.",
             "A4 takes a launch without live_cols for mode none and one with them for the prefix modes."),
        cite(PAGE, "# Mode none has one live column, regardless of the prompt length.",
             "column 0 alone is mode none's layout."),
    ),
)

# -- facts the kernel proofs assume ----------------------------------------------------------------

INT32_INPUTS = ModelChoice(
    "int32_inputs",
    "every kernel input and tracker entry is an int32",
    ("verify/scenarios.py", "verify/kernels/cases.py"),
    guaranteed(
        cite(PAGE, "block_table = tl.load(block_table_ptrs + group_idx).to(tl.pointer_type(tl.int32))",
             "the kernels read block tables and trackers as int32."),
        cite(PAGE, "plan_ring_start=torch.zeros(max_num_reqs, dtype=torch.int32, device=device),",
             "the plan buffers are int32."),
    ),
)

INT32_SIZES = ModelChoice(
    "int32_sizes",
    "num_reqs, the number of groups, slots, columns and layers, the packed [layer, batch] tables' entries "
    "(layers * max_num_reqs) and max_model_len (up to 2^30, so a position rounded up to a block fits) fit int32",
    ("verify/scenarios.py",),
    not_guaranteed("vLLM would have to bound these sizes below 2^31 (max_model_len below 2^30); they are far "
                   "smaller in practice, but nothing in the corpus states a bound. No campaign can break it "
                   "(a launch of 2^31 entries), so no review probes it: the kernel proofs assume it",
                   cite(PAGE, "max_num_reqs: int", "sizes are host ints."),
                   cite(PAGE, "slot_offset = layer_idx * MAX_NUM_REQS + batch_idx",
                        "the kernels index the packed tables with int32 offsets.")),
)

NUM_REQS_IN_CAPACITY = ModelChoice(
    "num_reqs_in_capacity",
    "num_reqs <= MAX_NUM_REQS: a launch has no more rows than the plan buffers",
    ("verify/kernels/cases.py", "verify/compaction_proofs.py"),
    guaranteed(cite(RELEASE_BATCH, "assert new_req_index < self.max_num_reqs",
                    "vLLM's model runner gives every request of its batch an index below max_num_reqs ..."),
               cite(RELEASE_BATCH, "return len(self.req_id_to_index)",
                    "... and its num_reqs counts those requests (as batch_in_launch)."),
               cite(PAGE, "(max_num_reqs,), -1, dtype=torch.int32, device=device",
                    "the plan buffers have max_num_reqs entries.")),
)

POSITIONS_NONNEGATIVE = ModelChoice(
    "positions_nonnegative",
    "the boundary helper's positions are >= 0 and the running position is at most one past the new count",
    ("verify/boundary_proofs.py",),
    not_guaranteed("it follows from positions_in_model and accepted_within_row, and is guaranteed no more than "
                   "positions_in_model",
                   cite(PAGE, "running_state_pos = tl.where(", "the kernel derives the running position.")),
)

# -- vLLM's all cache mode: the worlds v2-all (an A1-era host) and v2-all-unpublished (the reference's host)

ALL_MODE_MATERIALIZES_AS_ALIGN = ModelChoice(
    "all_mode_materializes_as_align",
    "all mode reaches A1, A2, A4, A5, B, C, D1 and D2 with MATERIALIZE_PREFIXES on, as align mode does",
    ("verify/system_world.py", "fuzz/caller_shapes.py", "review/host_modes.py"),
    guaranteed(cite(A1, 'materialize_prefixes=cache_mode in ("align", "all"),',
                    "these versions publish prefixes in all mode too.")),
)

ALL_MODE_UNPUBLISHED_IN_REFERENCE = ModelChoice(
    "all_mode_unpublished_in_reference",
    "all mode reaches the reference (A3) with MATERIALIZE_PREFIXES off: no ReplaySSM publish, the prefill "
    "reset of mode none, live columns given",
    ("verify/system_world.py", "verify/system_findings.py", "fuzz/caller_shapes.py", "review/host_modes.py"),
    guaranteed(
        cite(PAGE, 'materialize_prefixes=first_spec.mamba_cache_mode == "align",', "only align mode publishes."),
        cite(A3, 'materialize_prefixes=cache_mode == "align",', "A3's group context likewise."),
        cite(HOST_README, "the 3431299a version (A3) in `align` only", "the README notes the change."),
    ),
)

ALL_MODE_LIVE_COLUMN_MOVES = ModelChoice(
    "all_mode_live_column_moves",
    "all mode: the live column is the block of the last scheduled token, as in align mode, under either host "
    "(the caller rules key on the cache mode, not on MATERIALIZE_PREFIXES)",
    ("spec/geometry.py", "spec/row_assumptions.py", "spec/system/step.py", "spec/system/rows.py"),
    guaranteed(
        cite(HOST_README, "rather than assuming block-table column",
             "vLLM #55688 selects the actual live page in all mode instead of column 0."),
        cite(T1, '"all",', "vLLM's all-mode test (A1 era) ..."),
        cite(T1, "live_cols=ints([1, 1, 1]),", "... names column 1 live."),
    ),
)

ALL_MODE_POSTPROCESS_RUNS = ModelChoice(
    "all_mode_postprocess_runs",
    "all mode: the postprocess runs every step, as in the other modes",
    ("spec/system/step.py",),
    not_guaranteed("vLLM shipped a mode check that skipped the postprocess in all mode (vLLM #43955)",
                   cite(HOST_README, "`!= \"align\"` also matched `all` and skipped the postprocess there",
                        "a version of vLLM skipped the postprocess in all mode.")),
)

ALL_MODE_PREFILL_WRITES_EVERY_BOUNDARY = ModelChoice(
    "all_mode_prefill_writes_every_boundary",
    "all mode: a prefill chunk leaves the state at every block boundary it covers in that block (the block it "
    "starts inside included)",
    ("spec/geometry.py", "spec/system/step.py"),
    guaranteed(cite(D1, "# All-mode prefill writes every boundary state in this interval.",
                    "D1 resets every block a prefill covers because the prefill wrote each boundary's state.")),
)

ALL_MODE_CHUNKS_ANYWHERE = ModelChoice(
    "all_mode_chunks_anywhere",
    "all mode: a prefill chunk may start and end anywhere (prefill_chunk_on_boundary is align mode's)",
    ("spec/geometry.py", "spec/row_assumptions.py", "spec/system/rows.py"),
    not_guaranteed(
        "vLLM's all-mode scheduler is not in the corpus; the model admits every chunk, so it covers whatever "
        "alignment that scheduler keeps, and the kernels serve a chunk that starts inside a block",
        cite(D1, "first_col = tl.maximum(computed_before // MAMBA_BLOCK_SIZE, 0)",
             "D1's all-mode prefill reset starts at the block of the chunk's first token, inside a block or not."),
    ),
)

# -- how each generation's host code lays out a launch (the generations' kernel proofs, verify/kernels/named.py)

CALLER_PASSES_PRE_STEP_COUNT = ModelChoice(
    "caller_passes_pre_step_count",
    "C's preprocess receives each request's computed count before the step",
    ("verify/kernels/named.py", "review/arguments.py"),
    not_guaranteed("the model runner stages num_computed_tokens for the preprocess; vLLM would have to promise "
                   "that it is the pre-step count there", _RUNNER_CODE),
)

GROUP_LAYERS_ARE_NUM_LAYERS = ModelChoice(
    "group_layers_are_NUM_LAYERS",
    "a per-group launch (A, B, C) is compiled with NUM_LAYERS equal to the group's layer count",
    ("verify/kernels/named.py",),
    guaranteed(cite(A1, "NUM_LAYERS=len(self.mixers),",
                    "the group context compiles the layer count of its own mixers.")),
)

ONE_LAUNCH_PER_GROUP = ModelChoice(
    "one_launch_per_group",
    "A, B and C launch each cache group's kernel on its own: two programs of one launch share a group",
    ("verify/kernels/named.py",),
    guaranteed(cite(A1, "for group in self.groups:",
                    "the model context calls each group context in turn, one launch per group.")),
)

GROUP_LAYER_OFFSETS_MATCH_PACKED_TABLES = ModelChoice(
    "group_layer_offsets_match_packed_tables",
    "D: group_layer_offsets are the running sums of the groups' layer counts, the rows of the packed tables",
    ("verify/kernels/named.py",),
    guaranteed(cite(D1, "group_offsets.append(group_offsets[-1] + len(group_mixers))",
                    "D's create sums the groups' layer counts into the offsets it passes.")),
)

GROUP_LAYERS_WITHIN_MAX_LAYERS_PER_GROUP = ModelChoice(
    "group_layers_within_MAX_LAYERS_PER_GROUP",
    "D: every group has between 1 and MAX_LAYERS_PER_GROUP layers",
    ("verify/kernels/named.py",),
    guaranteed(cite(D1, "max_layers_per_group = max(",
                    "D compiles the largest group's layer count, so no group has more.")),
)

TRACKER_CAPACITIES_ARE_TRACKER_LENGTHS = ModelChoice(
    "tracker_capacities_are_tracker_lengths",
    "D: each group's tracker_capacities entry is the length of its tracker arrays",
    ("verify/kernels/named.py",),
    guaranteed(cite(D1, "[m._replayssm_ring_start.numel() for m in tracker_representatives],",
                    "D's create passes each group's tracker length as its capacity.")),
)

PADDING_PROGRAMS_PAST_NUM_REQS = ModelChoice(
    "padding_programs_past_num_reqs",
    "B, C and D launch a grid of max_num_reqs rows, and only with num_reqs >= 1: the programs of rows "
    "num_reqs <= batch < max_num_reqs are padding (no request's row)",
    ("verify/kernels/named.py",),
    guaranteed(
        cite(C1, "_postprocess_replayssm_kernel[(self.max_num_reqs,)](",
             "a per-group generation launches max_num_reqs programs whatever the batch."),
        cite(D1, "_postprocess_replayssm_modelwide_kernel[(self.max_num_reqs, self.num_groups)](",
             "the model-wide generation launches max_num_reqs rows per group."),
        cite(C1, "if num_reqs == 0:", "the host launches nothing for an empty batch, so row 0 is never padding."),
    ),
)

ALL = [
    BLOCK_COPY_ON_WRITE, COVERED_BLOCKS_ALLOCATED, PREFILL_WRITES_COVERED_BLOCK_STATES,
    PREFIX_CACHE_REGISTERS_FILLED_BLOCKS,
    PREFIX_HIT_WHOLE_BLOCKS_EVERY_GROUP, PREFIX_HIT_LEAVES_A_CHUNK, PREFIX_CACHE_ONLY_WITH_CACHING,
    PREFIX_HIT_SOURCE_IS_LAST_HIT_BLOCK,
    PROMPT_TAIL_RUNS_AS_DECODE, ONE_TOKEN_CONTINUATION_RUNS_AS_DECODE, PREFILL_STARTS_FROM_STATE_ALONE,
    EMPTY_STEP_LAUNCHES_NOTHING,
    DECODE_CHECKPOINTS_ON_ROW_LENGTH,
    BATCH_ORDER_PICKED_PER_STEP, PADDING_ROWS_LAST, ROWS_BY_BATCH_WITHOUT_IDX_MAPPING, CALLER_ENCODES_ROW,
    GROUPS_SHARE_CACHE_SPEC, GROUPS_SHARE_TABLE_WIDTH,
    NULL_BLOCK_IS_PAD, MIGRATION_COLUMNS_OLD_AND_NEW_LIVE, LIVE_COLS_ZERO_WHEN_ABSENT,
    MATERIALIZE_COLUMNS_FROM_BOUNDARY, ALIGN_WITH_LIVE_COL_ZERO_IN_BLOCK_ZERO,
    INT32_INPUTS, INT32_SIZES, NUM_REQS_IN_CAPACITY, POSITIONS_NONNEGATIVE,
    ALL_MODE_MATERIALIZES_AS_ALIGN, ALL_MODE_UNPUBLISHED_IN_REFERENCE, ALL_MODE_LIVE_COLUMN_MOVES,
    ALL_MODE_POSTPROCESS_RUNS, ALL_MODE_PREFILL_WRITES_EVERY_BOUNDARY, ALL_MODE_CHUNKS_ANYWHERE,
    CALLER_PASSES_PRE_STEP_COUNT, GROUP_LAYERS_ARE_NUM_LAYERS, ONE_LAUNCH_PER_GROUP,
    GROUP_LAYER_OFFSETS_MATCH_PACKED_TABLES, GROUP_LAYERS_WITHIN_MAX_LAYERS_PER_GROUP,
    TRACKER_CAPACITIES_ARE_TRACKER_LENGTHS, PADDING_PROGRAMS_PAST_NUM_REQS,
]
"""Every built-in choice, by name."""
