"""Launches: each kernel's programs composed over its whole grid.

A launch runs every program of the grid on one set of buffers. The oracle runs
programs one after another (row-major, as Triton's interpreter does); the
vectorized form runs them as numpy lanes in the same order. Both agree on every
launch whose programs do not race (see the ``determinism`` obligations).
Anything a launch does not store to stays as it was: the frame condition is
the buffers themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .compaction import CompactionTrace, compact_program
from .geometry import Conventions, Geometry, require_int
from .memory import ConcreteMemory, VectorMemory
from .migration import MigrationTrace, migrate_program
from .postprocess import PostprocessTrace, postprocess_program

Buffers = Mapping[str, np.ndarray]


def next_power_of_2(n: int) -> int:
    """Triton's ``next_power_of_2``: the compaction program's lane count
    (``n`` is ``MAX_NUM_REQS``, at least 1)."""
    n = _size("n", n, 1)
    return 1 << (n - 1).bit_length()


def _size(name: str, value: int, lo: int, hi: int | None = None) -> int:
    """``value`` as a Python int, or a ``ValueError`` naming ``name`` and the range ``[lo, hi]``."""
    if isinstance(value, np.integer):
        value = int(value)
    require_int(name, value, lo, hi)
    return value


def _check_num_reqs(num_reqs: int, geo: Geometry) -> None:
    """A launch's row count: 0 (an empty launch) up to ``MAX_NUM_REQS``."""
    _size("num_reqs", num_reqs, 0, geo.max_num_reqs)


def allocate(
    geo: Geometry, num_cols: int, num_slots: int, layers_per_group: Sequence[int]
) -> dict[str, np.ndarray]:
    """Fresh worker buffers as ``ReplaySSMModelContext.create`` leaves them."""
    geo.validated()
    _size("num_cols", num_cols, 1)
    _size("num_slots", num_slots, 1)
    groups = len(layers_per_group)
    if groups < 1:
        raise ValueError("layers_per_group must name at least one cache group")
    for g, n in enumerate(layers_per_group):
        _size(f"layers_per_group[{g}]", n, 1)
    rows = geo.max_num_reqs
    i32 = np.int32
    return {
        "block_table": np.full((groups, rows, num_cols), geo.pad_slot, dtype=i32),
        "ring_start": np.zeros((groups, num_slots), dtype=i32),
        "num_committed": np.zeros((groups, num_slots), dtype=i32),
        "plan_ring_start": np.zeros(rows, dtype=i32),
        "plan_flush_count": np.full(rows, -1, dtype=i32),
        "active_request_indices": np.full(rows, -1, dtype=i32),
        "packed_base": (np.cumsum([0, *layers_per_group[:-1]]) * rows).astype(np.int64),
        "num_layers": np.asarray(layers_per_group, dtype=i32),
        "src_slots": np.full(sum(layers_per_group) * rows, geo.pad_slot, dtype=i32),
        "dst_slots": np.full(sum(layers_per_group) * rows, geo.pad_slot, dtype=i32),
    }


def _grid(num_reqs: int, groups: int) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(num_reqs), groups), np.tile(np.arange(groups), num_reqs)


def postprocess_launch(
    buffers: Buffers, geo: Geometry, conv: Conventions, num_reqs: int, *, vectorized: bool = False
) -> list[PostprocessTrace] | PostprocessTrace:
    """The postprocess grid ``(num_reqs, groups)``; returns per-program traces
    (or one lane-wise trace when vectorized)."""
    _check_num_reqs(num_reqs, geo)
    groups = buffers["block_table"].shape[0]
    if vectorized:
        batch, group = _grid(num_reqs, groups)
        return postprocess_program(VectorMemory(buffers, len(batch)), geo, conv, batch, group)
    return [
        postprocess_program(ConcreteMemory(buffers), geo, conv, b, g)
        for b in range(num_reqs)
        for g in range(groups)
    ]


def compact_launch(buffers: Buffers, geo: Geometry, num_reqs: int) -> CompactionTrace:
    """The single-program compaction launch."""
    _check_num_reqs(num_reqs, geo)
    mem = ConcreteMemory(buffers)
    return compact_program(mem, geo.max_num_reqs, num_reqs, next_power_of_2(geo.max_num_reqs))


def migrate_launch(
    buffers: Buffers, geo: Geometry, has_idx_mapping: bool, num_reqs: int, *, vectorized: bool = False
) -> list[MigrationTrace] | MigrationTrace:
    """The migration grid ``(num_reqs, groups)``."""
    _check_num_reqs(num_reqs, geo)
    groups = buffers["block_table"].shape[0]
    if vectorized:
        batch, group = _grid(num_reqs, groups)
        return migrate_program(VectorMemory(buffers, len(batch)), geo.pad_slot, has_idx_mapping, batch, group)
    return [
        migrate_program(ConcreteMemory(buffers), geo.pad_slot, has_idx_mapping, b, g)
        for b in range(num_reqs)
        for g in range(groups)
    ]


def postprocess_step(
    buffers: Buffers, geo: Geometry, conv: Conventions, num_reqs: int, *, vectorized: bool = False
) -> list[PostprocessTrace] | PostprocessTrace:
    """``ReplaySSMModelContext.postprocess`` without the numeric materialize:
    commit and plan in all groups, then compact the work list in align mode."""
    _check_num_reqs(num_reqs, geo)
    traces = postprocess_launch(buffers, geo, conv, num_reqs, vectorized=vectorized)
    if conv.materialize_prefixes and num_reqs > 0:
        compact_launch(buffers, geo, num_reqs)
    return traces
