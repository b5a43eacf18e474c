"""Tracker migration (`_reset_new_replayssm_slots_kernel`), per (row, group).

When a request's live column moves from ``src_cols[r]`` to ``dst_cols[r]``
(columns of the row's block table; negative = none), the destination slot takes
the source slot's trackers: a continuation keeps its replay cursor. A
destination without a valid source is fresh and gets (0, 0). When both columns
name the same slot, or the destination is null, nothing is written.

Buffers: ``idx_mapping[b]``, ``src_cols[r]``, ``dst_cols[r]``,
``block_table[g, b, col]``, ``ring_start[g, slot]``, ``num_committed[g, slot]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .memory import Memory
from .vocab import Cond, Value, conj, disj, negate


@dataclass(frozen=True)
class MigrationTrace:
    """The slots one migration program resolved and whether it wrote."""

    req: Value
    src_slot: Value
    valid_src: Cond
    dst_slot: Value
    valid_dst: Cond
    changed: Cond
    start: Value
    committed: Value


def _slot_at(mem: Memory, cols_buffer: str, req: Value, valid_req: Cond, batch: Value, group: Value, pad: Value) -> tuple[Value, Cond]:
    col = mem.load(cols_buffer, (req,), valid_req, other=-1)
    valid_col = conj(valid_req, col >= 0)
    slot = mem.load("block_table", (group, batch, col), valid_col, other=pad)
    return slot, conj(valid_col, slot != pad)


def migrate_program(mem: Memory, pad: Value, has_idx_mapping: bool, batch: Value, group: Value) -> MigrationTrace:
    """One program of the migration launch."""
    req = mem.load("idx_mapping", (batch,)) if has_idx_mapping else batch
    valid_req = req >= 0
    dst_slot, valid_dst = _slot_at(mem, "dst_cols", req, valid_req, batch, group, pad)
    src_slot, valid_src = _slot_at(mem, "src_cols", req, valid_req, batch, group, pad)
    changed = conj(valid_dst, disj(negate(valid_src), src_slot != dst_slot))
    start = mem.load("ring_start", (group, src_slot), valid_src, other=0)
    committed = mem.load("num_committed", (group, src_slot), valid_src, other=0)
    mem.store("ring_start", (group, dst_slot), start, changed)
    mem.store("num_committed", (group, dst_slot), committed, changed)
    return MigrationTrace(req, src_slot, valid_src, dst_slot, valid_dst, changed, start, committed)
