"""Compaction of active rows (`_compact_replayssm_requests_kernel`).

A row is active when it is below ``num_reqs`` and its plan's replay length is
non-negative. One program writes the active rows' batch indices, in increasing
order, to the front of ``active_request_indices`` and ``-1`` to every later
entry below ``MAX_NUM_REQS``: FlashInfer's work-list contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from .memory import Memory
from .vocab import Cond, Value, conj, ite


@dataclass(frozen=True)
class CompactionTrace:
    """Which rows were active and where each one landed."""

    active: list[Cond]
    position: list[Value]
    num_active: Value


def compact_program(mem: Memory, max_num_reqs: int, num_reqs: Value, block_size: int) -> CompactionTrace:
    """The single program of the compaction launch (``BLOCK_SIZE`` lanes)."""
    active: list[Cond] = []
    position: list[Value] = []
    count: Value = 0
    for lane in range(block_size):
        in_capacity = lane < max_num_reqs
        flush = mem.load("plan_flush_count", (lane,), in_capacity, other=-1)
        is_active = conj(in_capacity, lane < num_reqs, flush >= 0)
        count = count + ite(is_active, 1, 0)
        active.append(is_active)
        position.append(count - 1)
    for lane in range(block_size):
        mem.store("active_request_indices", (position[lane],), lane, active[lane])
    for lane in range(block_size):
        mem.store("active_request_indices", (lane,), -1, conj(lane < max_num_reqs, lane >= count))
    return CompactionTrace(active, position, count)
