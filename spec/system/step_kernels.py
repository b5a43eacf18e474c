"""The worker's side of an engine step: where each scheduled request sits in
the batch (:func:`batch_layout`), the kernel inputs laid out from the state
with ``spec.assumptions.encode_row`` (:func:`kernel_buffers`), and the
launches over the grid on a ``TableMemory`` (:func:`launch_grid`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from ..assumptions import encode_row
from ..table_memory import Buffers, TableMemory
from ..vocab import Cond, Value, conj, disj, ite
from .picks import StepPicks
from .state import WORKER_BUFFERS, State, SystemParams
from .step_plan import RowPlan

T = TypeVar("T")


@dataclass(frozen=True)
class BatchLayout:
    """Where a step's scheduled requests sit in the batch (:func:`batch_layout`)."""

    row: dict[int, Value]
    """The batch row of each request (meaningful where it is scheduled)."""
    cum_base: dict[int, Value]
    """Each request's first token in the batch: the query lengths of the scheduled rows before it."""
    n: Value
    """The rows scheduled."""
    tokens: Value
    """The tokens scheduled, over every row."""
    launch: Value
    """The launch size: ``n`` in v1, ``MAX_NUM_REQS`` in v2."""


def ahead_in_order(order: tuple[Value, ...], s: int, r: int) -> Cond:
    """Request ``s`` comes before request ``r`` in the batch ``order`` (a permutation of the requests)."""
    if all(type(x) is int for x in order):
        return order.index(s) < order.index(r)
    return disj(*[conj(order[i] == s, order[j] == r) for i in range(len(order)) for j in range(i + 1, len(order))])


def batch_layout(p: SystemParams, k: StepPicks, rows: list[RowPlan]) -> BatchLayout:
    """Where each scheduled request sits in the batch: the scheduled requests
    take rows ``0..n-1`` in the step's batch order ``k.order``, a permutation
    of the requests picked per step (model choice
    ``batch_order_picked_per_step``): a request's row is the number of
    scheduled requests before it in that order, its first token the tokens
    they schedule. v1 launches ``n`` programs per group; v2 launches
    ``MAX_NUM_REQS`` rows, the ones past ``n`` being padding rows (CUDA-graph
    padding, ``idx_mapping = -1``)."""
    row: dict[int, Value] = {}
    cum_base: dict[int, Value] = {}
    if all(type(x) is int for x in k.order) and all(type(x.sched) is bool for x in rows):  # on ints
        n = tokens = 0
        for r in k.order:
            if rows[r].sched:
                row[r], cum_base[r] = n, tokens
                n, tokens = n + 1, tokens + rows[r].q
        for x in rows:
            row.setdefault(x.r, n)
            cum_base.setdefault(x.r, tokens)
        return BatchLayout(row, cum_base, n, tokens, p.num_reqs if p.conv.has_idx_mapping else n)
    for mine in rows:
        before = [(conj(other.sched, ahead_in_order(k.order, other.r, mine.r)), other.q)
                  for other in rows if other.r != mine.r]
        row[mine.r] = sum(ite(ahead, 1, 0) for ahead, _ in before)
        cum_base[mine.r] = sum(ite(ahead, q, 0) for ahead, q in before)
    n = sum(ite(x.sched, 1, 0) for x in rows)
    tokens = sum(ite(x.sched, x.q, 0) for x in rows)
    return BatchLayout(row, cum_base, n, tokens, p.num_reqs if p.conv.has_idx_mapping else n)


def kernel_buffers(st: State, rows: list[RowPlan], layout: BatchLayout, live_cols: list[Value],
                   src_cols: list[Value]) -> Buffers:
    """The worker's inputs in the kernels' layout, laid out by ``encode_row``
    at each scheduled request's batch row (:func:`batch_layout`)."""
    p = st.p
    NR, G, C, S = p.num_reqs, p.groups, p.num_cols, p.num_slots
    conv = p.conv
    shapes = p.shapes()
    bufs: Buffers = {
        "idx_mapping": ((NR,), [-1] * NR),
        "query_metadata": ((NR + 1,) if conv.cumulative else (NR,), [0] * (NR + 1 if conv.cumulative else NR)),
        "num_computed_tokens": ((NR,), [0] * NR),
        "num_accepted_tokens": ((NR,), [0] * NR),
        "is_prefilling": ((NR,), [0] * NR),
        "live_cols": ((NR,), [0] * NR),
        "src_cols": ((NR,), [-1] * NR),
        "dst_cols": ((NR,), [-1] * NR),
        "block_table": ((G, NR, C), [p.geo.pad_slot] * (G * NR * C)),
        "ring_start": ((G, S), list(st.v["rs"])),
        "num_committed": ((G, S), list(st.v["nc"])),
        "packed_base": ((G,), [sum(p.layers[:g]) * NR for g in range(G)]),
        "num_layers": ((G,), list(p.layers)),
    }
    for name in WORKER_BUFFERS:
        bufs[name] = (shapes[name], list(st.v[name]))
    mem = TableMemory(bufs, max(C, max(p.layers)))
    for row in rows:
        b = layout.row[row.r]
        kreq = row.r if conv.has_idx_mapping else b
        ghost = replace(row.ghost, req=kreq, cum_base=layout.cum_base[row.r])
        with mem.masked(row.sched):
            for buf, idx, value in encode_row(conv, b, ghost):
                mem.store(buf, idx, value)
            mem.store("live_cols", (kreq,), live_cols[row.r])
            mem.store("src_cols", (kreq,), src_cols[row.r])
            mem.store("dst_cols", (kreq,), live_cols[row.r])
            for g in range(G):
                for c in range(C):
                    mem.store("block_table", (g, b, c), st.get("table", g, row.r, c))
    if conv.cumulative:
        # padding rows past the scheduled ones have empty queries
        for b in range(NR + 1):
            mem.store("query_metadata", (b,), layout.tokens, b > layout.n)
    return bufs


def snapshot(bufs: Buffers) -> Buffers:
    """The kernel inputs and state buffers as a launch found them."""
    return {name: (shape, list(values)) for name, (shape, values) in bufs.items()}


def launch_grid(p: SystemParams, mem: TableMemory, launch: Value, program: Callable[[int, int], T]) -> list[T]:
    """Run ``program(batch, group)`` over the grid ``(launch, groups)``."""
    out: list[T] = []
    for b in range(p.num_reqs):
        with mem.masked(b < launch):
            for g in range(p.groups):
                out.append(program(b, g))
    return out


def sync_trackers(out: State, bufs: Buffers) -> None:
    """The trackers of ``out`` take the values the kernels left in ``bufs``."""
    out.v["rs"] = list(bufs["ring_start"][1])
    out.v["nc"] = list(bufs["num_committed"][1])
