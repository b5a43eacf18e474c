"""Guarded memory: red zones, poison columns and untouched inputs around every launch.

Every buffer the harness hands an implementation lives in an :class:`Arena`:
one flat int32 allocation in which each buffer's payload sits between two red
zones of :data:`RED_ZONE` words. The kernels see ordinary buffers: the same
sizes, dtypes and slot ids as without guards; only what lies around them is
watched.

* Red zones hold :data:`POISON` (``0x5A5A5A5A`` in every word, so int64 and
  bool buffers see ``0x5A`` bytes too).
* A block table gets :data:`GUARD_COLUMNS` poison columns after every row (its
  row stride grows by that much, as a table with room for longer requests
  would), and its red zones hold the same value: the *poison slot id*
  ``num_slots``, one past the real slots. Every tracker array is followed by
  its red zone, so the trackers of the poison slot are the first words of that
  red zone: a kernel that reads past a block-table row and stores to the
  trackers of what it found writes there.
* After every launch :meth:`Arena.check` compares the arena with what it must
  hold: poison in every red zone and guard column, and every input payload
  (query metadata, counts, ``is_prefilling``, live columns, block tables,
  ``idx_mapping``, src/dst columns, pointer and stride tables, layer counts)
  bit-identical to what was passed. Only the payloads of state buffers (the
  kernels' outputs) may change; they must not come to hold the poison or, for
  the slot-valued ones, the poison slot id.

A violation raises :class:`GuardViolation` (finding kind ``memory``) whose
first line is one of ``out-of-bounds write <buffer>[index] by <kernel>``,
``read past block_table row by <kernel>: ...`` (a store to the poison slot's
trackers, or the poison slot id in a slot-valued state buffer), ``read past a
buffer by <kernel>: ...`` (the red-zone poison in a state buffer) or ``input
<buffer> modified by <kernel>: ...``.

``REPLAYSSM_FUZZ_GUARDS=0`` in the environment switches the guards off; it
exists for ``benchmarks/guard_cost.py`` only, which measures what they cost.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

POISON = 0x5A5A5A5A
"""The value of every red-zone word outside block tables."""

RED_ZONE = 16
"""Red-zone words before and after every buffer's payload."""

GUARD_COLUMNS = 2
"""Poison columns after each block-table row."""

SLOT_VALUED = ("src_slots", "dst_slots")
"""State buffers that hold slot ids (so must never hold the poison slot id)."""

TRACKERS = ("ring_start", "num_committed")
"""Per-slot state buffers: the poison slot's trackers follow their payload."""


def buffer_of(region: str) -> str:
    """The buffer a region holds (``ring_start.g1`` is group 1's ``ring_start``)."""
    return region.split(".g")[0]


def guards_enabled() -> bool:
    """False only when ``REPLAYSSM_FUZZ_GUARDS=0`` (the cost benchmark's switch)."""
    return os.environ.get("REPLAYSSM_FUZZ_GUARDS", "1") != "0"


class GuardViolation(AssertionError):
    """A launch wrote outside its buffers, read past a block-table row into a
    store, or modified an input; ``kernel`` is the entry point that did it."""

    kind = "memory"

    def __init__(self, message: str, kernel: str) -> None:
        super().__init__(message)
        self.kernel = kernel


@dataclass(frozen=True)
class Region:
    """One buffer of an arena: its payload and the red zones around it.

    ``start`` is the payload's first word; the payload spans ``words`` words
    (``rows`` rows of ``row_words`` words for a block table, whose last
    :data:`GUARD_COLUMNS` words per row are guard columns). ``fill`` is the
    value of its red zones and guard columns; ``state`` says that the kernels
    may write its payload.
    """

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    start: int
    words: int
    state: bool
    fill: int
    cols: int | None = None

    @property
    def element_words(self) -> float:
        return {torch.int32: 1, torch.int64: 2, torch.bool: 0.25}[self.dtype]

    def view_of(self, flat: torch.Tensor) -> torch.Tensor:
        """The buffer as the kernels see it, in ``flat`` (the arena or its expected image)."""
        words = flat[self.start:self.start + self.words]
        if self.cols is not None:
            rows = self.shape[0]
            return words.view(rows, self.cols + GUARD_COLUMNS)[:, :self.cols]
        n = int(np.prod(self.shape, dtype=np.int64))
        return words.view(self.dtype)[:n].view(self.shape)

    def describe(self, word: int) -> tuple[str, bool]:
        """Where ``word`` of the arena lies, as ``name[index]``, and whether it
        is inside the payload (an input cell) rather than a red zone or guard column."""
        if self.cols is not None:
            stride = self.cols + GUARD_COLUMNS
            off = word - self.start
            row, col = divmod(off, stride)
            inside = 0 <= off < self.words and col < self.cols
            return (f"{self.name}[{row}, {col}]" if 0 <= off < self.words else
                    f"{self.name}[flat {off}]"), inside
        off = word - self.start
        return f"{self.name}[{math.floor(off / self.element_words)}]", 0 <= off < self.words


class Arena:
    """Guarded buffers in one flat int32 allocation (see the module docstring).

    Reserve every region first (:meth:`reserve`, :meth:`reserve_table`), then
    :meth:`allocate`; then :meth:`view` gives each buffer, :meth:`put` sets an
    input (or a state buffer's initial contents), :meth:`check` judges a launch.
    """

    def __init__(self, device: torch.device, poison_slot: int, guarded: bool = True) -> None:
        self.device, self.poison_slot, self.guarded = device, poison_slot, guarded
        self.regions: dict[str, Region] = {}
        self.words = 0
        self.flat: torch.Tensor | None = None
        self.plain: dict[str, torch.Tensor] = {}

    def _add(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, words: int, state: bool,
             fill: int, cols: int | None = None) -> Region:
        start = self.words + RED_ZONE
        start += start % 2  # int64 payloads stay 8-byte aligned
        region = Region(name, shape, dtype, start, words, state, fill, cols)
        self.regions[name] = region
        self.words = start + words + RED_ZONE
        return region

    def reserve(self, name: str, shape: tuple[int, ...], dtype: torch.dtype = torch.int32, *,
                state: bool = False) -> Region:
        """A buffer of ``shape``; ``state``: the kernels write it."""
        n = int(np.prod(shape, dtype=np.int64))
        words = {torch.int32: n, torch.int64: 2 * n, torch.bool: -(-n // 4)}[dtype]
        return self._add(name, tuple(shape), dtype, words, state, POISON)

    def reserve_table(self, name: str, rows: int, cols: int) -> Region:
        """A block table of ``rows`` x ``cols`` slot ids with guard columns; its
        red zones and guard columns hold the poison slot id."""
        return self._add(name, (rows, cols), torch.int32, rows * (cols + GUARD_COLUMNS), False,
                         self.poison_slot, cols)

    def allocate(self) -> None:
        """Create the arena: every word its region's fill value, payloads included.
        Unguarded, each buffer is a plain tensor of its own, and :meth:`check` does nothing."""
        if not self.guarded:
            self.plain = {n: torch.zeros(r.shape, dtype=r.dtype, device=self.device) for n, r in self.regions.items()}
            return
        flat = np.full(self.words, POISON, dtype=np.int32)
        writable = np.zeros(self.words, dtype=bool)
        slot_valued = np.zeros(self.words, dtype=bool)
        for r in self.regions.values():
            lo, hi = r.start - RED_ZONE, r.start + r.words + RED_ZONE
            flat[max(lo, 0):hi] = np.int32(r.fill)
            if r.state:
                flat[r.start:r.start + r.words] = 0
                writable[r.start:r.start + r.words] = True
                slot_valued[r.start:r.start + r.words] = buffer_of(r.name) in SLOT_VALUED
        self.flat = torch.from_numpy(flat).to(self.device)
        self.expected = self.flat.clone()
        self.writable = torch.from_numpy(writable).to(self.device)
        self.slot_valued = torch.from_numpy(slot_valued).to(self.device)

    def view(self, name: str) -> torch.Tensor:
        """Buffer ``name`` as the kernels see it."""
        if not self.guarded:
            return self.plain[name]
        assert self.flat is not None, "allocate() first"
        return self.regions[name].view_of(self.flat)

    def put(self, name: str, values: Any) -> torch.Tensor:
        """Set buffer ``name`` to ``values`` (and, for an input, what it must keep); returns its view."""
        view = self.view(name)
        data = torch.as_tensor(np.asarray(values)).to(view.dtype).reshape(view.shape)
        view.copy_(data)
        if self.guarded:
            self.regions[name].view_of(self.expected).copy_(data)
        return view

    def check(self, kernel: str) -> None:
        """Raise :class:`GuardViolation` for the first thing ``kernel`` did wrong
        to this arena since the last check (states are only read here)."""
        if not self.guarded:
            return
        assert self.flat is not None
        changed = (self.flat != self.expected) & ~self.writable
        poisoned = self.writable & ((self.flat == POISON) | (self.slot_valued & (self.flat == self.poison_slot)))
        if not bool((changed | poisoned).any()):
            return
        for word in torch.nonzero(changed).flatten().tolist():
            raise self._violation(word, kernel)
        word = int(torch.nonzero(poisoned).flatten()[0])
        region = self._region_of(word)
        where, _ = region.describe(word)
        if int(self.flat[word]) == self.poison_slot:
            raise GuardViolation(f"read past block_table row by {kernel}: {where} holds the poison slot id "
                                 f"{self.poison_slot} of the guard columns after every block-table row", kernel)
        raise GuardViolation(f"read past a buffer by {kernel}: {where} holds the red-zone poison {POISON:#x} "
                             f"(read from the poison slot's trackers or another red zone)", kernel)

    def _region_of(self, word: int) -> Region:
        best = None
        for r in self.regions.values():
            if r.start - RED_ZONE <= word < r.start + r.words + RED_ZONE:
                best = r if best is None or abs(word - r.start) < abs(word - best.start) else best
        assert best is not None, f"word {word} lies outside every region"
        return best

    def _violation(self, word: int, kernel: str) -> GuardViolation:
        region = self._region_of(word)
        where, inside = region.describe(word)
        was, now = int(self.expected[word]), int(self.flat[word])
        off = word - region.start
        if buffer_of(region.name) in TRACKERS and off == region.shape[0] == self.poison_slot:
            return GuardViolation(
                f"read past block_table row by {kernel}: it stored {now} to {region.name}[{self.poison_slot}], "
                f"the trackers of the poison slot id {self.poison_slot} that fills the guard columns after "
                f"every block-table row", kernel)
        if inside:
            return GuardViolation(f"input {region.name} modified by {kernel}: {where} was {was}, now {now}", kernel)
        return GuardViolation(f"out-of-bounds write {where} by {kernel} (wrote {now} over the red zone's {was})",
                              kernel)


def guarded_inputs(inputs: dict[str, Any], device: torch.device, poison_slot: int,
                   guarded: bool) -> tuple[Arena, dict[str, torch.Tensor]]:
    """One launch's inputs (name -> values), each in its own guarded buffer of
    a fresh arena (``is_prefilling`` bool, the others int32)."""
    arena = Arena(device, poison_slot, guarded)
    for name, values in inputs.items():
        arena.reserve(name, (len(values),), torch.bool if name == "is_prefilling" else torch.int32)
    arena.allocate()
    return arena, {name: arena.put(name, values) for name, values in inputs.items()}


CONTEXT_STATE = ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots")
"""The context's own buffers that its launches write (the reference's field names)."""

CONTEXT_TABLES = ("num_layers", "block_table_ptrs", "block_table_strides", "ring_start_ptrs", "num_committed_ptrs",
                  "src_slots_ptrs", "dst_slots_ptrs")
"""The context's own tables its launches only read (the reference's field names)."""


def guard_context(ctx: Any, device: torch.device, poison_slot: int) -> Arena:
    """Move a context's own buffers (those of :data:`CONTEXT_STATE` and
    :data:`CONTEXT_TABLES` it has as tensors) into a guarded arena, contents,
    shapes and dtypes unchanged, and re-point its pointer tables at the moved
    buffers; returns the arena to check after each call."""
    present = {n: getattr(ctx, n) for n in CONTEXT_STATE + CONTEXT_TABLES
               if isinstance(getattr(ctx, n, None), torch.Tensor)}
    arena = Arena(device, poison_slot)
    for name, t in present.items():
        arena.reserve(name, tuple(t.shape), t.dtype, state=name in CONTEXT_STATE)
    arena.allocate()
    moved = []
    for name in CONTEXT_STATE:
        if name in present:
            old = present[name]
            arena.put(name, old.cpu().numpy())
            moved.append((old.data_ptr(), old.data_ptr() + old.numel() * old.element_size(),
                          arena.view(name).data_ptr()))
    for name in CONTEXT_TABLES:
        if name in present:
            values = present[name].cpu().numpy().astype(np.int64)
            for lo, hi, new in moved:
                inside = (values >= lo) & (values < hi)
                values = np.where(inside, values - lo + new, values)
            arena.put(name, values)
    for name in present:
        setattr(ctx, name, arena.view(name))
    return arena
