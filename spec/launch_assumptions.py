"""The caller assumptions about one launch's inputs as a whole: geometry, block tables, trackers, packed tables, grid.

No request's row breaks one of these alone (scope ``launch``,
``spec/assumption_record.py``): the proofs take them as hypotheses about
every launch, and the fuzz callers build launches that keep them.
:func:`block_table_width` is how vLLM sizes the table they speak of.
"""

from __future__ import annotations

from .assumption_record import Assumption, AssumptionSet, CallerBreak, Reach
from .geometry import MAX_WINDOW_LIMIT, Conventions, Geometry, has_prefix_cache
from .provenance import (
    A4, D1, HOST_README, PAGE, RELEASE_BATCH, T1, T2, T3, VERSIONS_README, cite, cite_flashinfer, guaranteed,
    not_guaranteed,
)
from .vocab import Cond, Value, conj, disj


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
    )


PACKED_TABLES_MATCH_LAYERS = Assumption(
    "packed_tables_match_layers",
    "each group's packed-table entries [base, base + layers * MAX_NUM_REQS) lie inside the [layer, batch] "
    "allocation (that the allocation's size fits int32 is the model choice int32_sizes)",
    _packed_tables_match_layers,
    guaranteed(
        cite(PAGE, "(len(mixers), max_num_reqs),",
             "the host allocates the tables itself, one row of max_num_reqs entries per layer of every group ..."),
        cite(PAGE, "layer_offsets.append(layer_offsets[-1] + len(group))",
             "... numbers each group's layers from the running sum of the layer counts before it ..."),
        cite(PAGE, "[src_slots[offset] for offset in layer_offsets[:-1]]",
             "... and points each group at its first layer's row: its layers' rows lie inside the allocation."),
        cite(D1, "group_offsets.append(group_offsets[-1] + len(group_mixers))",
             "generation D's host numbers each group's layers the same way."),
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
    guaranteed(
        cite(PAGE, "_postprocess_replayssm_kernel[(num_reqs, len(self.block_tables))](",
             "the host launches a grid of (num_reqs, number of groups): program ids are in range by construction."),
        cite(A4, "_postprocess_replayssm_kernel[(num_reqs,)](",
             "generation A's host launches one program per scheduled row too."),
        cite(RELEASE_BATCH, "assert new_req_index < self.max_num_reqs",
             "vLLM's model runner gives every request of its batch an index below max_num_reqs ..."),
        cite(RELEASE_BATCH, "return len(self.req_id_to_index)",
             "... and its num_reqs counts those requests: num_reqs <= max_num_reqs."),
    ),
)


def _publishing_host_with_live_columns(c: Conventions) -> bool:
    return c.materialize_prefixes and not c.live_col_is_zero


TABLE_SHORT_BY_ONE = AssumptionSet(
    (COLUMNS_IN_TABLE, MODEL_FITS_TABLE),
    CallerBreak("the kernels see a block table one column narrower than the callers' rows, so a request grows into "
                "a live column past the table", lambda s: s.past_table, dropped=(("table_short_by", 1),)),
    Reach(_publishing_host_with_live_columns, model_blocks=3),
)
"""Needed only jointly: each of the pair implies the table is wide enough
for the live column (``verify/assumption_sets.py`` measures it); requests of
3 blocks outgrow the short table."""

