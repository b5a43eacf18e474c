"""The caller assumptions about one request's row: each predicate, its provenance, and the rows that break it.

Each record here (``spec/assumption_record.py``) is read on one scheduled
:class:`~.ghost_row.GhostRow` in its :class:`~.ghost_row.RowContext`
(``on_row``: the fuzz callers check every row they generate) and, where a
row can break it while keeping every other, carries its breaker and where a
caller can use it (``reach``). A breaker changes the row's query length,
accepted count, live column or ``is_prefilling`` input; a row whose query
length changes ends in the live column of its last token.
"""

from __future__ import annotations

from dataclasses import replace

from .assumption_record import PER_REQUEST, Assumption, CallerBreak, Chooser, Reach
from .geometry import Conventions, Geometry, chunks_on_boundary, moves_live_column
from .ghost_row import GhostRow, RowContext, last_scheduled_block
from .provenance import A1, A4, HOST_README, PAGE, RELEASE_ATTN, RELEASE_BATCH, T1, T2, T3, T5, cite, cite_flashinfer, contradicted, guaranteed, not_guaranteed
from .vocab import Cond, Value, cdiv, conj, disj, implies, ite, negate

MAX_MODEL_LEN_LIMIT = 2**30
"""The largest ``max_model_len`` the int32 obligations cover (stated by the model choice
``int32_sizes``, ``verify/scenarios.py`` ``memory_facts``, not by ``positions_in_model``)."""


def _decode_row_of_length(ctx: RowContext, row: GhostRow, choose: Chooser, lo: int, hi: int) -> GhostRow | None:
    """``row`` as a decode row of ``lo .. hi`` tokens accepting ``1 .. query_len``
    of them (None for a prefill row or an empty range)."""
    if row.prefilling or lo > hi:
        return None
    q = choose.integer(lo, hi)
    return replace(row, query_len=q, accepted=choose.integer(1, q), live_col=ctx.live_col(row.computed_before, q))


def _decode_row_fits(geo: Geometry, row: GhostRow) -> Cond:
    return implies(
        negate(row.prefilling),
        conj(row.query_len >= 1, row.query_len <= geo.window, row.query_len <= geo.max_step),
    )


def _break_decode_row_fits(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """A decode row longer than ``min(W, R - W)`` that still fits a block."""
    geo = ctx.geo
    return _decode_row_of_length(ctx, row, choose, min(geo.window, geo.max_step) + 1,
                                 min(geo.block_size, ctx.max_model_len - row.computed_before))


def _blocks_longer_than_steps(g: Geometry) -> bool:
    return g.block_size > min(g.window, g.max_step)


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
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _decode_row_fits(ctx.geo, row),
    breaker=_break_decode_row_fits,
    reach=Reach(geometry=_blocks_longer_than_steps),
    behavioural=True,
)


PREFILL_ACCEPTED = range(1, 2)
"""The accepted count vLLM passes for a prefill row in ``num_accepted_tokens``: 1, a request's count
before speculation has accepted anything; a kernel that runs a one-token prompt tail as a decode commits it."""


def _accepted_within_row(geo: Geometry, row: GhostRow) -> Cond:
    return ite(
        row.prefilling,
        conj(row.accepted >= PREFILL_ACCEPTED.start, row.accepted < PREFILL_ACCEPTED.stop),
        conj(row.accepted >= 1, row.accepted <= row.query_len),
    )


def _break_accepted_within_row(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """A decode row accepting none or one more than it scheduled (when the
    table holds it); a prefill row with a stale count (none, or one above 1 up to ``W + 1``)."""
    if row.prefilling:
        stale = choose.integer(PREFILL_ACCEPTED.stop, max(PREFILL_ACCEPTED.stop, int(ctx.geo.window) + 1))
        return replace(row, accepted=0 if choose.boolean() else stale)
    if row.computed_before + row.query_len + 1 <= ctx.max_model_len and choose.boolean():
        return replace(row, accepted=row.query_len + 1)
    return replace(row, accepted=0)


ACCEPTED_WITHIN_ROW = Assumption(
    "accepted_within_row",
    "a decode row accepts between 1 and query_len tokens; a prefill row carries the count 1 (no speculative "
    "token accepted yet), which a kernel that runs a one-token prompt tail as a decode commits",
    _accepted_within_row,
    guaranteed(
        cite(T1, "row 1 rejects all drafts and stops at 15",
             "a decode row that rejects every draft still accepts one token (num_accepted_tokens 1)."),
        cite(T2, "(256, 4, False, 3, 5),  # Ordinary speculative decode commits acceptance.",
             "a decode row accepts at most the tokens it scheduled (3 of 4 here)."),
        cite(PAGE, "computed if NUM_COMPUTED_IS_POST_STEP else computed_before + accepted,",
             "on a prefill row the kernel advances by query_len: the accepted count is not used there."),
        cite(RELEASE_BATCH, "self.num_accepted_tokens_cpu[req_index] = 1",
             "a request's count starts at one accepted token: a prefill row, run before speculation accepts "
             "anything, carries 1."),
        cite(T1, "(256, 4, True, 1, 0),  # Multi-token prefill also clears trackers.",
             "vLLM's tests stage a prefill continuation with num_accepted_tokens 1."),
        cite(RELEASE_ATTN, "# token as accepted so recurrent state and ReplaySSM trackers follow",
             "a one-token prefill chunk run as a decode counts its one token as accepted."),
    ),
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _accepted_within_row(ctx.geo, row),
    breaker=_break_accepted_within_row,
    behavioural=True,
)


def _decode_within_block(geo: Geometry, row: GhostRow) -> Cond:
    return implies(negate(row.prefilling), row.query_len <= geo.block_size)


def _break_decode_within_block(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """A decode row longer than a block that the ring still holds."""
    geo = ctx.geo
    return _decode_row_of_length(ctx, row, choose, geo.block_size + 1,
                                 min(geo.window, geo.max_step, ctx.max_model_len - row.computed_before))


def _steps_longer_than_blocks(g: Geometry) -> bool:
    return g.block_size < min(g.window, g.max_step)


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
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _decode_within_block(ctx.geo, row),
    breaker=_break_decode_within_block,
    reach=Reach(geometry=_steps_longer_than_blocks),
    behavioural=True,
)


def _positions_in_model(geo: Geometry, row: GhostRow, max_model_len: Value) -> Cond:
    after = row.computed_before + ite(row.prefilling, row.query_len, row.accepted)
    return conj(
        row.computed_before >= 0,
        row.query_len >= 0,
        row.computed_before + row.query_len <= max_model_len,
        after <= max_model_len,
    )


POSITIONS_IN_MODEL = Assumption(
    "positions_in_model",
    "0 <= computed_before and computed_before + query_len <= max_model_len: every scheduled token's position is "
    "inside the model (the int32 obligations' bound max_model_len <= 2^30 is the model choice int32_sizes)",
    _positions_in_model,
    guaranteed(
        cite(RELEASE_BATCH, "(max_num_reqs, max_model_len),",
             "vLLM's model runner keeps every request's tokens in a row of max_model_len entries ..."),
        cite(RELEASE_BATCH, "self.token_ids_cpu[req_index, :num_prompt_tokens] = request.prompt_token_ids",
             "... its prompt at positions 0 .. prompt length (a longer prompt does not fit the row) ..."),
        cite(RELEASE_BATCH, "self.token_ids_cpu[req_index, start_index:end_token_index] = spec_token_ids",
             "... and a step's scheduled draft tokens after its tokens: a token scheduled past max_model_len "
             "has no entry (the assignment raises), so computed_before + query_len <= max_model_len."),
        cite(T2, "(0, 50_000, True, 1, 0),  # Long prefill still has only one live column.",
             "vLLM's tests run positions of 50,000 tokens."),
    ),
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _positions_in_model(ctx.geo, row, ctx.max_model_len),
)


def _live_col_is_last_block(geo: Geometry, mode: str, row: GhostRow) -> Cond:
    if not moves_live_column(mode):
        return row.live_col == 0
    return row.live_col == last_scheduled_block(row, geo.block_size)


def _break_live_col_is_last_block(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """A live column next to the right one (align and all mode) or past
    column 0 (mode none), inside the table."""
    if ctx.conv.live_col_is_zero:
        return None
    right = row.live_col if moves_live_column(ctx.mode) else 0
    wrong = [col for col in (right - 1, right + 1) if 0 <= col < ctx.num_cols]
    if not wrong:
        return None
    return replace(row, live_col=choose.element(wrong))


def _explicit_live_columns(c: Conventions) -> bool:
    return not c.live_col_is_zero


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
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _live_col_is_last_block(ctx.geo, ctx.mode, row),
    breaker=_break_live_col_is_last_block,
    reach=Reach(_explicit_live_columns),
    behavioural=True,
)


def _row_nonempty(geo: Geometry, row: GhostRow) -> Cond:
    return row.query_len >= 1


def _break_row_nonempty(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """A row scheduling no token: a request's first prefill row, or a decode
    row, which runs nothing, accepts nothing and leaves the request where it
    was, its live column the one its state is in (it breaks
    :data:`DECODE_ROW_FITS`, :data:`ACCEPTED_WITHIN_ROW` and
    :data:`LIVE_COL_IS_LAST_BLOCK` with it, which speak of rows that run a
    token). A later prefill chunk cannot: it would also continue with fewer
    than 2 tokens."""
    if row.prefilling:
        return None if row.computed_before else replace(row, query_len=0, live_col=ctx.live_col(0, 0))
    return replace(row, query_len=0, accepted=0, live_col=ctx.state_col)


ROW_NONEMPTY = Assumption(
    "row_nonempty",
    "every real row schedules at least one token (prefill chunks included)",
    _row_nonempty,
    not_guaranteed(
        "vLLM's scheduler would have to promise that every real batch row schedules at least one token; the "
        "corpus holds no scheduler code, vLLM's own zero-token decode rows are CUDA-graph padding (the null "
        "block, an accepted count of 1), A4 and A5 skip a row that runs no token, and FlashInfer's "
        "variable-length decode skips an empty row instead of refusing it",
        cite_flashinfer("flashinfer/data/include/flashinfer/mamba/kernel_checkpointing_ssu_main.cuh",
                        "return meta.seq_len > 0;", "FlashInfer's varlen decode treats a zero-length row as no work."),
        cite(A4, "valid_query = query_len > 0",
             "A4 (and A5) commit nothing for a decode row that runs no token: their authors met such rows."),
        cite(RELEASE_ATTN, "query_start_loc_d = query_start_loc_d[: padded_bs + 1]",
             "vLLM pads a decode batch to a CUDA-graph size (padded_bs rows, no request's tokens in those past "
             "num_decodes) ..."),
        cite(RELEASE_ATTN, "state_indices_tensor_d[metadata.num_decodes :] = NULL_BLOCK_ID",
             "... whose slot is the null block: a zero-token row of a request with a real live block is not shown."),
    ),
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _row_nonempty(ctx.geo, row),
    breaker=_break_row_nonempty,
    co_broken=(DECODE_ROW_FITS, ACCEPTED_WITHIN_ROW, LIVE_COL_IS_LAST_BLOCK),
    behavioural=True,
)


def _prefill_chunk_on_boundary(geo: Geometry, mode: str, row: GhostRow, final_chunk: Cond) -> Cond:
    if not chunks_on_boundary(mode):
        return True
    ends_on_boundary = cdiv(row.computed_before + row.query_len, geo.block_size) * geo.block_size == (
        row.computed_before + row.query_len
    )
    starts_on_boundary = cdiv(row.computed_before, geo.block_size) * geo.block_size == row.computed_before
    return implies(row.prefilling, conj(disj(final_chunk, ends_on_boundary), starts_on_boundary))


def _break_prefill_chunk_on_boundary(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """An align-mode prefill chunk that ends off a block boundary before the
    prompt's end."""
    bs, computed = ctx.geo.block_size, row.computed_before
    shortest = 2 if computed else 1  # a continuation keeps at least 2 tokens
    ends = [q for q in range(shortest, ctx.prompt_len - computed) if (computed + q) % bs]
    if not (chunks_on_boundary(ctx.mode) and row.prefilling and ends):
        return None
    q = choose.element(ends)
    return replace(row, query_len=q, live_col=ctx.live_col(computed, q))


def _publishing_host(c: Conventions) -> bool:
    return c.materialize_prefixes


def _blocks_of_two_or_more(g: Geometry) -> bool:
    return g.block_size >= 2


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
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _prefill_chunk_on_boundary(ctx.geo, ctx.mode, row, ctx.final_chunk(row)),
    breaker=_break_prefill_chunk_on_boundary,
    reach=Reach(_publishing_host, _blocks_of_two_or_more),
    behavioural=True,
)


def _is_prefilling_agrees(flag: Cond, forward_prefill: Cond) -> Cond:
    return flag == forward_prefill


def _break_is_prefilling_agrees(ctx: RowContext, row: GhostRow, choose: Chooser) -> GhostRow | None:
    """An ``is_prefilling`` input the opposite of how the forward pass ran the row."""
    return replace(row, is_prefilling=not row.prefilling)


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
    scope=PER_REQUEST,
    on_row=lambda ctx, row: _is_prefilling_agrees(row.flag, row.prefilling),
    breaker=_break_is_prefilling_agrees,
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
    scope=PER_REQUEST,
    caller_breaks=CallerBreak(
        "half the prefill continuation chunks that may be one token long are scheduled with one token",
        lambda s: bool(s.row.prefilling and s.row.computed_before > 0 and s.row.query_len == 1),
        kept=(("one_token_continuations", "never"),), dropped=(("one_token_continuations", "often"),)),
)
