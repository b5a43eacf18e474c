"""The released vLLM 0.33.0's ReplaySSM tracker kernels ("generation P"), one program per batch row.

0.33.0 keeps three trackers per physical cache slot, shared by the layers of
one cache group (``ssu_dispatch.py``):

- ``ring_start``: the ring row where the live window starts;
- ``prev_num_accepted``: the rows of the window committed since the
  checkpoint (FlashInfer's ``prev_num_accepted_tokens``);
- ``prev_query_len``: the length of the speculative query whose accepted
  count is still pending (0: none; only speculative decoding reads it).

Three programs change them, each per lane ``offset`` of a launch over the
decode (or prefill) rows, the slot being ``state_batch_indices[offset]``:

- :func:`reset_program` (``_update_replayssm_ring_trackers_kernel`` with
  ``RESET``): the three trackers of a prefill row's slot become 0;
- :func:`advance_program` (the same kernel without ``RESET``): the
  single-token advance after FlashInfer's decode, mirroring its checkpoint;
- :func:`commit_program` (``_commit_replayssm_ring_trackers_kernel``): the
  delayed MTP commit: the previous query's accepted count, read **by batch
  row** from ``num_accepted_tokens``, commits the rows that survived, and the
  current query's length (from ``query_start_loc``) becomes the pending one.

A slot is touched only when the lane is inside the launch, the slot is not
the pad id and ``0 <= slot < num_states`` (the kernels' own mask). The ring
arithmetic is a full remainder by the ring length ``R``: vLLM's rings are not
powers of two (``R = W + T``).

Buffers: ``state_batch_indices[n]``, ``ring_start[S]``,
``prev_num_accepted[S]``, ``prev_query_len[S]``, ``num_accepted_tokens[n]``,
``query_start_loc[n + 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .geometry import MAX_WINDOW_LIMIT, NULL_BLOCK_ID
from .memory import Memory
from .vocab import Cond, Value, cmod, conj, ite

TRACKERS = ("ring_start", "prev_num_accepted", "prev_query_len")
"""The three per-slot trackers of 0.33.0, in the kernels' argument order."""


@dataclass(frozen=True)
class ReleaseGeometry:
    """The constexprs of one 0.33.0 FlashInfer ReplaySSM configuration.

    ``window`` is ``W`` (``replayssm_buffer_len``, the kernels'
    ``logical_window``), ``query_len`` is ``T = 1 + num_speculative_tokens``
    and ``ring_len`` is ``R`` (``x_cache.size(2)``: ``W + T`` for FlashInfer).
    The constructor refuses a geometry the released validator rejects
    (:mod:`.release_caller`: ``W <= 16``, ``T <= W`` with speculative
    decoding)."""

    window: int
    query_len: int
    ring_len: int
    pad: int = NULL_BLOCK_ID

    def __post_init__(self) -> None:
        if not 1 <= self.window <= MAX_WINDOW_LIMIT:
            raise ValueError(f"window must be in [1, {MAX_WINDOW_LIMIT}], got {self.window}")
        if not (self.query_len == 1 or 1 < self.query_len <= self.window):
            raise ValueError(f"query_len must be 1 or in [2, window], got {self.query_len}")
        if self.ring_len != self.window + self.query_len:
            raise ValueError(f"ring_len must be window + query_len = {self.window + self.query_len}, "
                             f"got {self.ring_len}")

    @property
    def speculative(self) -> bool:
        """A speculative (MTP) configuration: queries of more than one token."""
        return self.query_len > 1


@dataclass(frozen=True)
class TrackerTrace:
    """What one tracker program resolved: its slot, whether it touched it,
    the trackers it read (0 where it read none) and those it stored."""

    slot: Value
    valid: Cond
    start: Value
    prev: Value
    pending: Value
    next_start: Value
    next_prev: Value
    next_pending: Value
    accepted: Value = 0


def lane_slot(mem: Memory, offset: Value, n_slots: Value, num_states: Value, pad: int) -> tuple[Value, Cond, Cond]:
    """The lane's slot, whether the lane is inside the launch, and whether the slot is touched."""
    mask = offset < n_slots
    slot = mem.load("state_batch_indices", (offset,), mask, other=pad)
    valid = conj(mask, slot != pad, slot >= 0, slot < num_states)
    return slot, mask, valid


def ring_advance(start: Value, rows: Value, ring_len: int) -> Value:
    """The ring row ``rows`` after ``start``: a full remainder by ``R``."""
    return cmod(start + rows, ring_len)


def reset_program(mem: Memory, geo: ReleaseGeometry, offset: Value, n_slots: Value, num_states: Value) -> TrackerTrace:
    """One lane of the reset launch: the slot's three trackers become 0."""
    slot, _, valid = lane_slot(mem, offset, n_slots, num_states, geo.pad)
    for buffer in TRACKERS:
        mem.store(buffer, (slot,), 0, valid)
    return TrackerTrace(slot, valid, 0, 0, 0, 0, 0, 0)


def advance_program(mem: Memory, geo: ReleaseGeometry, offset: Value, n_slots: Value, num_states: Value) -> TrackerTrace:
    """One lane of the single-token advance, after FlashInfer's decode of one
    token: when the committed rows plus the new one exceed the window the
    kernel checkpointed (the window restarts past the committed rows, one row
    committed), else one more row is committed. ``prev_query_len`` is left
    as it is."""
    slot, _, valid = lane_slot(mem, offset, n_slots, num_states, geo.pad)
    prev = mem.load("prev_num_accepted", (slot,), valid, other=0)
    start = mem.load("ring_start", (slot,), valid, other=0)
    must_checkpoint = prev + 1 > geo.window
    next_start = ite(must_checkpoint, ring_advance(start, prev, geo.ring_len), start)
    next_prev = ite(must_checkpoint, 1, prev + 1)
    mem.store("ring_start", (slot,), next_start, valid)
    mem.store("prev_num_accepted", (slot,), next_prev, valid)
    return TrackerTrace(slot, valid, start, prev, 0, next_start, next_prev, 0)


def commit_program(mem: Memory, geo: ReleaseGeometry, offset: Value, n_slots: Value, num_states: Value) -> TrackerTrace:
    """One lane of the delayed MTP commit, before the current query's layers:
    the previous query (``prev_query_len`` rows, 0 after a reset) had
    ``num_accepted_tokens[offset]`` tokens accepted (read by batch row);
    FlashInfer checkpointed that query when the committed rows plus its
    length exceeded the window, so the window restarts past the committed
    rows and holds the accepted ones, else the accepted rows are added. The
    current query's length becomes the pending one."""
    slot, mask, valid = lane_slot(mem, offset, n_slots, num_states, geo.pad)
    accepted_since_checkpoint = mem.load("prev_num_accepted", (slot,), valid, other=0)
    current_ring_start = mem.load("ring_start", (slot,), valid, other=0)
    previous_query_len = mem.load("prev_query_len", (slot,), valid, other=0)
    accepted = mem.load("num_accepted_tokens", (offset,), mask, other=0)
    must_checkpoint = conj(previous_query_len > 0, accepted_since_checkpoint + previous_query_len > geo.window)
    next_start = ite(must_checkpoint, ring_advance(current_ring_start, accepted_since_checkpoint, geo.ring_len),
                     current_ring_start)
    next_prev = ite(previous_query_len == 0, 0,
                    ite(must_checkpoint, accepted, accepted_since_checkpoint + accepted))
    current_query_len = (mem.load("query_start_loc", (offset + 1,), mask, other=0)
                         - mem.load("query_start_loc", (offset,), mask, other=0))
    mem.store("ring_start", (slot,), next_start, valid)
    mem.store("prev_num_accepted", (slot,), next_prev, valid)
    mem.store("prev_query_len", (slot,), current_query_len, valid)
    return TrackerTrace(slot, valid, current_ring_start, accepted_since_checkpoint, previous_query_len,
                        next_start, next_prev, current_query_len, accepted)


PROGRAMS = {"reset": reset_program, "advance": advance_program, "commit": commit_program}
"""The tracker programs by transition name (what the proofs and the oracle launch)."""
