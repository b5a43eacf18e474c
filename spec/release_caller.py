"""The released vLLM 0.33.0 as the caller of its ReplaySSM trackers, every clause with provenance.

Two kinds of record, both cited into ``vllm-0.33.0/`` of the corpus
(``spec.provenance.RELEASE_*``; checked by ``tests/spec/test_provenance.py``):

- the config validator's rules (:data:`VALIDATOR_RULES`, read in
  ``vllm_config_validate_mamba_cached_kernel.py.txt``): a configuration one of
  them rejects never runs, so it is not a caller (:func:`rejection`,
  :func:`accepted_configs`);
- the caller behaviours the released lifecycle's proofs take as named
  hypotheses (:data:`ALL`, ``spec.assumptions.Assumption`` records): when
  reset, advance and commit run and for which rows (``mamba_mixer2.py``), the
  trackers shared by a cache group's layers, CUDA-graph padding
  (``mamba_attn.py``), how ``num_accepted_tokens`` is ordered against the
  batch rows (``gpu_input_batch.py``), and async scheduling, which the corpus
  does not show to keep that order (vLLM #53912, the pending fix #53919): a
  behaviour the evidence does not show is ``not guaranteed``, and ``review``
  probes whether the release relies on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import product

from .assumptions import Assumption
from .provenance import (
    RELEASE_ATTN, RELEASE_BATCH, RELEASE_CACHE, RELEASE_MAMBA_UTILS, RELEASE_MIXER, RELEASE_SSU, RELEASE_VALIDATOR,
    Citation, cite, guaranteed, not_guaranteed,
)
from .vocab import Cond, Value, conj, implies, within

BACKENDS = ("flashinfer", "triton", "other")
"""``--mamba-backend`` values as the validator tells them apart (``other``: any third backend)."""
CACHE_MODES = ("none", "align")
"""0.33.0's ``MambaCacheMode`` (``vllm/config/cache.py``)."""


@dataclass(frozen=True)
class ReleaseConfig:
    """The settings 0.33.0's validator reads for a Mamba2 model with ``--use-replayssm``."""

    backend: str
    num_speculative_tokens: int
    buffer_len: int
    cache_mode: str
    v2_runner: bool = False
    kv_connector: bool = False

    @property
    def query_len(self) -> int:
        """``T = 1 + num_speculative_tokens``."""
        return 1 + self.num_speculative_tokens

    @property
    def ring_len(self) -> int:
        """The physical ring rows: ``W + T`` for FlashInfer, ``W`` for Triton (``mamba_utils.py``)."""
        return self.buffer_len + (self.query_len if self.backend == "flashinfer" else 0)


@dataclass(frozen=True)
class ValidatorRule:
    """One ``raise`` of ``validate_mamba_cached_kernel``: ``rejects`` says when it fires."""

    name: str
    rejects: Callable[[ReleaseConfig], bool]
    evidence: Citation


def _spec(c: ReleaseConfig) -> bool:
    return c.num_speculative_tokens > 0


VALIDATOR_RULES = (
    ValidatorRule("flashinfer_window_at_most_16", lambda c: c.backend == "flashinfer" and c.buffer_len > 16,
                  cite(RELEASE_VALIDATOR, "FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16",
                       "FlashInfer ReplaySSM's window is at most 16 rows")),
    ValidatorRule("speculative_without_prefix_caching", lambda c: _spec(c) and c.cache_mode != "none",
                  cite(RELEASE_VALIDATOR, "FlashInfer ReplaySSM speculative decoding does not support",
                       "speculative decoding with ReplaySSM runs without prefix caching (mode none)")),
    ValidatorRule("speculative_window_covers_query", lambda c: _spec(c) and c.buffer_len < c.query_len,
                  cite(RELEASE_VALIDATOR, "--replayssm-buffer-len >= 1 + num_speculative_tokens",
                       "the window holds at least one whole query: T <= W")),
    ValidatorRule("speculative_needs_flashinfer", lambda c: _spec(c) and c.backend != "flashinfer",
                  cite(RELEASE_VALIDATOR, "Mamba2 ReplaySSM speculative decoding requires",
                       "speculative decoding with ReplaySSM runs on the FlashInfer backend only")),
    ValidatorRule("flashinfer_without_prefix_caching",
                  lambda c: not _spec(c) and c.backend == "flashinfer" and c.cache_mode == "align",
                  cite(RELEASE_VALIDATOR, "FlashInfer ReplaySSM does not support prefix caching yet",
                       "FlashInfer ReplaySSM without speculative decoding also runs without prefix caching")),
    ValidatorRule("backend_triton_or_flashinfer", lambda c: not _spec(c) and c.backend == "other",
                  cite(RELEASE_VALIDATOR, "--use-replayssm requires --mamba-backend triton or flashinfer",
                       "ReplaySSM runs on the Triton or FlashInfer backend")),
    ValidatorRule("triton_v1_runner_only", lambda c: not _spec(c) and c.backend == "triton" and c.v2_runner,
                  cite(RELEASE_VALIDATOR, "Triton ReplaySSM requires Model Runner V1",
                       "the Triton ReplaySSM decode runs under the V1 model runner only")),
    ValidatorRule("no_kv_connectors", lambda c: c.kv_connector,
                  cite(RELEASE_VALIDATOR, "--use-replayssm is incompatible with KV connectors",
                       "no KV connector moves a ReplaySSM request's state")),
)
"""The validator's rules, in its order (the KDA RecoverSSM branch is not Mamba2's and is left out)."""


def rejection(config: ReleaseConfig) -> ValidatorRule | None:
    """The first rule that rejects ``config`` (None: 0.33.0 accepts it and runs it)."""
    return next((r for r in VALIDATOR_RULES if r.rejects(config)), None)


def accepted_configs(max_speculative: int = 4, buffer_lens: tuple[int, ...] = (3, 4, 16, 17)) -> Iterator[ReleaseConfig]:
    """Every configuration of a small grid that the validator accepts: the callers the model ranges over."""
    for backend, spec, buffer_len, mode, v2, kv in product(BACKENDS, range(max_speculative + 1), buffer_lens,
                                                          CACHE_MODES, (False, True), (False, True)):
        config = ReleaseConfig(backend, spec, buffer_len, mode, v2, kv)
        if rejection(config) is None:
            yield config


def _record(name: str, statement: str, holds: Callable[..., Cond], provenance) -> Assumption:  # type: ignore[no-untyped-def]
    return Assumption(name, statement, holds, provenance)


def _always(*_: Value) -> Cond:
    return True


RESET_ON_PREFILL = _record(
    "p_reset_on_prefill",
    "after a prefill wrote a row's whole state, the slot's three trackers are reset, once per cache group, for "
    "every prefill row's slot",
    _always,
    guaranteed(
        cite(RELEASE_MIXER, "reset_replayssm_ring_trackers(", "the mixer resets the trackers in its prefill branch"),
        cite(RELEASE_MIXER, "ssm_state[state_indices_tensor_p] = final_states",
             "the prefill stores the final state of each prefill row's slot before the reset"),
        cite(RELEASE_MIXER, "replayssm_mixers[last_layer_name]._updates_replayssm_trackers = True",
             "only the group's last layer resets (and advances), so every layer ran on the old trackers"),
    ))

COMMIT_BEFORE_LAYERS = _record(
    "p_commit_once_before_layers",
    "with speculative decoding, the delayed commit runs once per cache group, by its first layer, before any "
    "layer of the group runs the current query",
    _always,
    guaranteed(
        cite(RELEASE_MIXER, "replayssm_mixers[first_layer_name]._commits_replayssm_trackers = True",
             "the group's first layer alone commits"),
        cite(RELEASE_MIXER, "Commit it once, before this cache group's layers evaluate the",
             "the commit precedes the group's layers in the forward pass"),
    ))

ADVANCE_AFTER_LAYERS = _record(
    "p_advance_once_after_layers",
    "without speculative decoding, the single-token advance runs once per cache group, after its last layer's "
    "FlashInfer decode, so every layer read the same trackers",
    _always,
    guaranteed(
        cite(RELEASE_MIXER, "self._updates_replayssm_trackers and not use_spec_decode",
             "the advance runs after the decode of the layer that updates, and only without speculation"),
        cite(RELEASE_MIXER, "for standard decode, the final local layer advances after all layers consume",
             "the advance waits for every layer of the group"),
    ))

TRACKERS_PER_GROUP = _record(
    "p_trackers_per_cache_group",
    "one set of trackers per cache group, shared by its layers and sized to its slot count; groups never share "
    "one (their slot ids differ)",
    _always,
    guaranteed(
        cite(RELEASE_MIXER, "namespace = layer_to_group.get(layer_name, layer_name)",
             "layers are grouped by their KV-cache group"),
        cite(RELEASE_MIXER, "ring_start = torch.zeros(num_blocks, dtype=torch.int32, device=device)",
             "each group gets its own tracker tensors, one entry per block"),
        cite(RELEASE_MIXER, "ReplaySSM layers in one cache group must share cache capacity",
             "the layers sharing trackers have one slot count"),
    ))

STP_ONE_TOKEN = _record(
    "p_stp_rows_one_token",
    "without speculative decoding, a FlashInfer decode row is one token",
    lambda query_len: query_len == 1,
    guaranteed(
        cite(RELEASE_ATTN, "self.reorder_batch_threshold if num_accepted_tokens is not None else 1",
             "without accepted counts (no speculation) the decode threshold is one token"),
    ))

QUERY_IN_WINDOW = _record(
    "p_query_within_t",
    "a speculative decode row's query is 1 to T = 1 + num_speculative_tokens tokens long, its length the "
    "difference of query_start_loc at the row",
    lambda query_len, geo_query_len: within(query_len, 1, geo_query_len),
    guaranteed(
        cite(RELEASE_MIXER, "1 + self.num_spec", "the decode call processes the target plus draft window of T tokens"),
        cite(RELEASE_ATTN, "query_start_loc_d = common_attn_metadata.query_start_loc[: num_decodes + 1]",
             "the commit's query_start_loc holds the decode rows' offsets"),
    ))

ACCEPTED_IN_QUERY = _record(
    "p_accepted_within_query",
    "the accepted count of a speculative query is at least 1 (the target token) and at most the query's length",
    lambda accepted, pending: implies(pending > 0, conj(accepted >= 1, accepted <= pending)),
    not_guaranteed(
        "the counts come from the rejection sampler of gpu_model_runner.py, not in the corpus; the corpus shows "
        "only the default of 1 and the all-accepted fallback",
        cite(RELEASE_BATCH, "# Speculative decoding: by default 1 token is generated.",
             "a newly added request's count starts at one accepted token"),
        cite(RELEASE_ATTN, "num_accepted_tokens = torch.diff(query_start_loc_d)",
             "rows without counts treat every token as accepted"),
    ))

ACCEPTED_BY_ROW = _record(
    "p_accepted_by_current_row",
    "num_accepted_tokens[b] is the count accepted for the request now in batch row b (its previous query): the "
    "counts move with the rows when the persistent batch swaps and condenses them",
    lambda reported, accepted: reported == accepted,
    guaranteed(
        cite(RELEASE_BATCH, "self.num_accepted_tokens_cpu[i1], self.num_accepted_tokens_cpu[i2] = (",
             "swap_states swaps the counts with the rows"),
        cite(RELEASE_BATCH, "self.num_accepted_tokens_cpu[empty_index] = self.num_accepted_tokens_cpu[",
             "condense moves the count with the request it belongs to"),
        cite(RELEASE_SSU, "num_accepted_tokens + offsets, mask=mask, other=0",
             "the commit kernel reads the count by batch row"),
    ))

ASYNC_ACCEPTED_ORDERED = _record(
    "p_async_accepted_reach_next_step_by_row",
    "with async scheduling, the accepted counts of step n reach step n+1's metadata in step n+1's row order, "
    "after any swap or condense between the steps",
    lambda reported, accepted: reported == accepted,
    not_guaranteed(
        "with async scheduling step n's counts are copied back while step n+1's batch is already being "
        "reordered; vLLM #53912 reports corrupted MTP output only with async scheduling and the pending fix "
        "#53919 waits for the copy before reordering. The corpus remaps sampled tokens from the previous row "
        "order, but shows no such remap for the accepted counts",
        cite(RELEASE_BATCH, "prev_index = self.prev_req_id_to_index.get(req_id)",
             "async outputs of step n are indexed by step n's rows and must be remapped"),
        cite(RELEASE_BATCH, "self.async_copy_ready_event.synchronize()",
             "sampled tokens wait for their copy; num_accepted_tokens_cpu has no such wait here"),
    ))

PADDING_ROWS_NULL = _record(
    "p_cuda_graph_padding_null_slots",
    "CUDA-graph padding rows carry the null block as slot (the kernels skip them), write_pos 0, no flush and an "
    "accepted count of 1",
    lambda slot, pad: slot == pad,
    guaranteed(
        cite(RELEASE_ATTN, "state_indices_tensor_d[metadata.num_decodes :] = NULL_BLOCK_ID",
             "padding rows get the null block"),
        cite(RELEASE_ATTN, "write_pos_d[metadata.num_decodes :] = 0", "padding rows' Triton cursor is row 0"),
        cite(RELEASE_ATTN, "is_flush_d[metadata.num_decodes :] = 0", "padding rows never flush"),
    ))

ROWS_COVERED = _record(
    "p_row_buffers_cover_launch",
    "num_accepted_tokens has an entry and query_start_loc two for every lane the commit launch masks in "
    "(n_slots = the rows of state_batch_indices)",
    lambda n_slots, accepted_len, qsl_len: conj(accepted_len >= n_slots, qsl_len >= n_slots + 1),
    not_guaranteed(
        "under CUDA-graph padding the counts are padded to padded_bs, but query_start_loc_d is a view of "
        "num_decodes + 1 entries sliced to padded_bs + 1: the lanes past it read the persistent buffer behind "
        "the view, in bounds only as far as that buffer's length, which the corpus does not show",
        cite(RELEASE_ATTN, "query_start_loc_d = query_start_loc_d[: padded_bs + 1]",
             "the slice cannot extend the view past num_decodes + 1 entries"),
        cite(RELEASE_ATTN, "num_accepted_tokens = self.decode_num_accepted_tokens[:padded_bs]",
             "the counts are padded to the padded batch"),
    ))

DISTINCT_SLOTS = _record(
    "p_distinct_row_slots",
    "two rows of one launch name distinct slots unless one is padding (mode none: one block per request)",
    lambda slot_p, slot_q, pad: implies(conj(slot_p != pad, slot_q != pad), slot_p != slot_q),
    guaranteed(
        cite(RELEASE_VALIDATOR, "does not support prefix caching yet",
             "FlashInfer ReplaySSM runs in mode none, where no two running requests share a block"),
        cite(RELEASE_ATTN, "state_indices_tensor_d = state_indices_tensor_d[:, : 1 + self.num_spec_tokens]",
             "each decode row's slot is its own block-table column 0"),
    ))

DECODE_BASE_AT_ADMISSION = _record(
    "p_decode_base_at_admission",
    "a request's Triton decode anchor is its token count when it was (re)admitted, whose prefill ends there; it "
    "moves with its row through swaps and condensation",
    _always,
    guaranteed(
        cite(RELEASE_BATCH, "self.replayssm_decode_base[req_index] = request.num_tokens",
             "the anchor is the full context at (re)admission"),
        cite(RELEASE_BATCH, "self.replayssm_decode_base[i1], self.replayssm_decode_base[i2] = (",
             "swap_states swaps the anchors with the rows"),
        cite(RELEASE_BATCH, "self.replayssm_decode_base[empty_index] = self.replayssm_decode_base[",
             "condense moves the anchor with its request"),
    ))

TRITON_EXACT_LENGTHS = _record(
    "p_triton_exact_cpu_lengths",
    "the Triton cursor is computed from exact CPU sequence lengths: async scheduling with speculative decoding "
    "is refused, and Triton never runs speculative decoding",
    lambda query_len: query_len == 1,
    guaranteed(
        cite(RELEASE_ATTN, "if decode_base_cpu is None or seq_lens_cpu is None or async_spec_decode:",
             "the builder refuses inexact lengths"),
        cite(RELEASE_VALIDATOR, "Mamba2 ReplaySSM speculative decoding requires",
             "speculation is FlashInfer's only, so Triton rows are one token"),
    ))

RING_LENGTHS = _record(
    "p_ring_lengths",
    "FlashInfer's ring has R = W + T rows, Triton's buffer W rows (W = replayssm_buffer_len)",
    _always,
    guaranteed(
        cite(RELEASE_MAMBA_UTILS, "ring_buffer_len += 1 + num_speculative_tokens",
             "FlashInfer keeps the window and the current query together"),
        cite(RELEASE_CACHE, "Triton uses B physical", "Triton's buffer is the window itself"),
        cite(RELEASE_SSU, "ring_buffer_len=x_cache.size(2)", "the kernels take R from the ring's shape"),
    ))

ALL = [RESET_ON_PREFILL, COMMIT_BEFORE_LAYERS, ADVANCE_AFTER_LAYERS, TRACKERS_PER_GROUP, STP_ONE_TOKEN,
       QUERY_IN_WINDOW, ACCEPTED_IN_QUERY, ACCEPTED_BY_ROW, ASYNC_ACCEPTED_ORDERED, PADDING_ROWS_NULL, ROWS_COVERED,
       DISTINCT_SLOTS, DECODE_BASE_AT_ADMISSION, TRITON_EXACT_LENGTHS, RING_LENGTHS]
"""The released caller's behaviours, by name (``spec.contract.RECORDS`` holds them with the others)."""
