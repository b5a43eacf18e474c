"""What the caller computes for one step, in every generation's argument names.

A :class:`CallerStep` is one model-runner step as the caller knows it: each batch
row's request (or padding), its true step (:class:`Row`), the block tables,
and the reference-API inputs the fuzz callers encoded
(``fuzz/callers.py``). :func:`caller_vectors` derives from it every per-step
vector any generation takes, in fixed-capacity buffers as vLLM's model runner
keeps them (``max_num_reqs`` entries; ``max_num_reqs + 1`` for cumulative
query offsets):

- ``idx_mapping``, ``query_metadata``, ``num_computed_tokens``,
  ``num_accepted_tokens``, ``is_prefilling``, ``live_cols``: the spec's
  ``encode_row`` under the step's conventions;
- ``num_computed_before``: the pre-step computed count per request (C's preprocess);
- ``live_cols_required``: ``live_cols``, or column 0 everywhere when the
  convention passes none (B, C, D take no ``LIVE_COL_IS_ZERO``);
- ``src_cols``/``dst_cols``: each request's previous and new live column;
- ``materialize_src_cols``/``materialize_dst_cols``/``materialize_token_counts``
  per row: in align mode, when the step crosses a block boundary
  (``mamba_state_copy_boundary`` of the running position and the new computed
  count, destination column >= 0), the live column, the boundary's column and
  the accepted tokens up to it (``bias + 1`` on a decode row, 0 on a prefill
  row, whose state is already exact); otherwise -1, -1, 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.postprocess import running_position


@dataclass(frozen=True)
class Row:
    """One scheduled request's step, as the scheduler and forward pass know it."""

    rid: int
    stream: int
    req: int
    computed_before: int
    query_len: int
    accepted: int
    prefilling: bool
    live_col: int
    source_col: int

    @property
    def computed_after(self) -> int:
        return self.computed_before + (self.query_len if self.prefilling else self.accepted)


@dataclass
class CallerStep:
    """One step's caller decisions: rows in batch order (None: padding), the block
    tables ``[group][batch][col]``, tracker block copies, and the reference-API
    inputs of its migration and postprocess launches."""

    rows: list[Row | None]
    table: list
    copies: list
    migrate: dict
    postprocess: dict

    def as_json(self) -> dict:
        return {"rows": [None if r is None else asdict(r) for r in self.rows], "table": self.table,
                "copies": self.copies, "migrate": self.migrate, "postprocess": self.postprocess}

    @classmethod
    def from_json(cls, d: dict) -> "CallerStep":
        return cls([None if r is None else Row(**r) for r in d["rows"]], d["table"], d["copies"],
                   d["migrate"], d["postprocess"])


CALLER_VECTORS = ("num_reqs", "idx_mapping", "query_metadata", "num_computed_tokens", "num_computed_before",
                  "num_accepted_tokens", "is_prefilling", "live_cols", "live_cols_required", "src_cols", "dst_cols",
                  "materialize_src_cols", "materialize_dst_cols", "materialize_token_counts")
"""The names :func:`caller_vectors` provides."""


def boundary_work(row: Row, block_size: int, align: bool) -> tuple[int, int, int]:
    """``(src_col, dst_col, token_count)`` of the prefix snapshot ``row`` asks for, or ``(-1, -1, 0)``."""
    after = row.computed_after
    b = mamba_state_copy_boundary(running_position(row.prefilling, after, row.accepted), after, block_size)
    if not (align and b.needs_copy and b.dst_col >= 0):
        return -1, -1, 0
    return row.live_col, b.dst_col, 0 if row.prefilling else b.bias + 1


def _padded(values: list | None, size: int, fill: Any) -> list | None:
    if values is None:
        return None
    return list(values) + [fill] * (size - len(values))


def caller_vectors(step: CallerStep, max_num_reqs: int, block_size: int, conv: Any) -> dict[str, Any]:
    """Every per-step vector a generation's caller passes (see the module docstring)."""
    pp, mg = step.postprocess, step.migrate
    n = len(step.rows)
    qm = pp["query_metadata"]
    if conv.cumulative:
        qm = _padded(qm, max_num_reqs + 1, qm[-1])
    else:
        qm = _padded(qm, max_num_reqs, 0)
    before = [0] * max_num_reqs
    m_src, m_dst, m_count = [-1] * max_num_reqs, [-1] * max_num_reqs, [0] * max_num_reqs
    for b, row in enumerate(step.rows):
        if row is not None:
            before[row.req] = row.computed_before
            m_src[b], m_dst[b], m_count[b] = boundary_work(row, block_size, conv.materialize_prefixes)
    live = pp["live_cols"]
    return {
        "num_reqs": n,
        "idx_mapping": _padded(pp["idx_mapping"], max_num_reqs, -1),
        "query_metadata": qm,
        "num_computed_tokens": pp["num_computed_tokens"],
        "num_computed_before": before,
        "num_accepted_tokens": pp["num_accepted_tokens"],
        "is_prefilling": _padded(pp["is_prefilling"], max_num_reqs, False),
        "live_cols": live,
        "live_cols_required": live if live is not None else [0] * max_num_reqs,
        "src_cols": mg["src_cols"],
        "dst_cols": mg["dst_cols"],
        "materialize_src_cols": m_src,
        "materialize_dst_cols": m_dst,
        "materialize_token_counts": m_count,
    }
