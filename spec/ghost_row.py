"""One row's true step, how a caller lays it into the kernel inputs, and what a caller knows around it.

:class:`GhostRow` is a row as the scheduler and the forward pass know it;
:func:`encode_row` is the other half of the caller contract: how a caller
lays that row into the kernel inputs under each convention (proofs constrain
memory to it; generators write it). :class:`RowContext` is what a caller
knows of the world a row is scheduled in, which the per-request caller
assumptions read (``spec/assumption_record.py``: a record's ``on_row`` and
``breaker``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .geometry import Conventions, Geometry, moves_live_column
from .vocab import Cond, Value, cdiv, ite


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
    is_prefilling: Cond | None = None
    """The ``is_prefilling`` input the caller passes when it differs from how
    the forward pass ran the row (``prefilling``); None: it agrees."""

    @property
    def flag(self) -> Cond:
        """The ``is_prefilling`` input the caller passes for this row."""
        return self.prefilling if self.is_prefilling is None else self.is_prefilling


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
    entries.append(("is_prefilling", (batch,), ite(row.flag, 1, 0)))
    if not conv.live_col_is_zero:
        entries.append(("live_cols", (row.req,), row.live_col))
    return entries


def last_scheduled_block(row: GhostRow, block_size: Value) -> Value:
    """The block of the row's last scheduled token: ``ceil((N + q) / bs) - 1``."""
    return cdiv(row.computed_before + row.query_len + block_size - 1, block_size) - 1


def live_col_of(mode: str, block_size: int, computed: Value, q: Value) -> Value:
    """The live column a row of ``q`` tokens after ``computed`` ends in: the
    block of its last token in align and all mode, 0 in mode none (on ints or
    numpy arrays alike)."""
    if not moves_live_column(mode):
        return 0 * computed
    return last_scheduled_block(GhostRow(computed, q, 0, False, 0, 0), block_size)


@dataclass(frozen=True)
class RowContext:
    """What a caller knows of the world one request's row is scheduled in:
    geometry, conventions, cache mode, the model length its rows stay within,
    the block table's width, the request's prompt length, and the column its
    state is in before the row (-1: none yet)."""

    geo: Geometry
    conv: Conventions
    mode: str
    max_model_len: int
    num_cols: int
    prompt_len: int
    state_col: int = -1

    def final_chunk(self, row: GhostRow) -> Cond:
        """``row`` ends at the prompt's end."""
        return row.computed_before + row.query_len == self.prompt_len

    def live_col(self, computed: Value, q: Value) -> Value:
        """The live column a row of ``q`` tokens after ``computed`` ends in (:func:`live_col_of`)."""
        return live_col_of(self.mode, int(self.geo.block_size), computed, q)
