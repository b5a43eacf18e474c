"""The worker side of a step: kernel inputs laid out from the state, launches, materialize.

The kernels are never re-implemented here: the phases of a step
(``spec.system.phases``) run ``spec.migration.migrate_program``,
``spec.postprocess.postprocess_program`` and ``spec.compaction.compact_program``
on the buffers :func:`kernel_buffers` lays out with ``spec.assumptions.encode_row``,
in a :class:`~replayssm.spec.table_memory.TableMemory`. FlashInfer's
``materialize`` runs on the ghost (:func:`materialize`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..arrays import select
from ..assumptions import encode_row
from ..table_memory import TableMemory
from ..vocab import conj, implies, ite, negate
from .ghost import replay
from .state import State, SystemParams
from .step import RowPlan

def batch_layout(p: SystemParams, rows: list[RowPlan]) -> tuple[dict[int, Any], Any, Any]:
    """Where each scheduled request sits in the batch: scheduled requests are
    packed into rows ``0..n-1`` in request order (reversed with
    ``swap_rows``). v1 launches ``n`` programs per group; v2 launches
    ``MAX_NUM_REQS`` rows, the ones past ``n`` being padding rows (CUDA-graph
    padding, ``idx_mapping = -1``). Returns (row of each request, rows
    scheduled, launch size)."""
    order = sorted(rows, key=lambda rw: p.batch_of(rw.r))
    where: dict[int, Any] = {}
    n: Any = 0
    for row in order:
        where[row.r] = n
        n = ite(row.sched, n + 1, n)
    launch = p.num_reqs if p.conv.has_idx_mapping else n
    return where, n, launch


def kernel_buffers(st: State, rows: list[RowPlan], live_cols: list, src_cols: list) -> dict:
    """The worker's inputs in the kernels' layout, laid out by ``encode_row``."""
    p = st.p
    NR, G, C, S = p.num_reqs, p.groups, p.num_cols, p.num_slots
    conv = p.conv
    shapes = p.shapes()
    bufs: dict[str, tuple[tuple[int, ...], list]] = {
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
    for name in ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots"):
        bufs[name] = (shapes[name], list(st.v[name]))
    mem = TableMemory(bufs, max(C, max(p.layers)))
    where, n, _ = batch_layout(p, rows)
    cum: Any = 0
    for row in sorted(rows, key=lambda rw: p.batch_of(rw.r)):
        b = where[row.r]
        kreq = row.r if conv.has_idx_mapping else b
        ghost = replace(row.ghost, req=kreq, cum_base=cum)
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
            cum = ite(row.sched, cum + row.q, cum)
    if conv.cumulative:
        # padding rows past the scheduled ones have empty queries
        for b in range(NR + 1):
            mem.store("query_metadata", (b,), cum, b > n)
    return bufs


def snapshot(bufs: dict) -> dict[str, tuple[tuple[int, ...], list]]:
    """The kernel inputs and state buffers as a launch found them."""
    return {name: (shape, list(values)) for name, (shape, values) in bufs.items()}


def launch_grid(p: SystemParams, mem: TableMemory, launch: Any, program: Callable[[int, int], Any]) -> list:
    """Run ``program(batch, group)`` over the grid ``(launch, groups)``."""
    out = []
    for b in range(p.num_reqs):
        with mem.masked(b < launch):
            for g in range(p.groups):
                out.append(program(b, g))
    return out


def sync_trackers(out: State, bufs: dict) -> None:
    out.v["rs"] = list(bufs["ring_start"][1])
    out.v["nc"] = list(bufs["num_committed"][1])


def materialize(out: State, bufs: dict, launch: Any) -> list[tuple[str, Any]]:
    """FlashInfer's ``replayssm_materialize`` on the ghost. The work list is
    the compaction's output; the check ``work list is the active rows`` ties
    it to the rows whose plan is active (``plan_flush_count >= 0``, row below
    the launch size), in increasing order, so the pairs below are taken row by
    row. For each such row and each layer the destination's state becomes the
    source's checkpoint advanced by the plan's rows. Every layer of a group
    holds the same slots, so the group's ghost takes layer 0's pair and the
    check demands the other layers agree. All sources are read before any
    destination is written (one launch); a destination another pair reads,
    or writes with a different result, is a race."""
    p = out.p
    geo, NR, pad = p.geo, p.num_reqs, p.geo.pad_slot
    R, W = int(geo.ring_len), int(geo.window)
    before = out.copy()
    checks: list[tuple[str, Any]] = []
    work = bufs["active_request_indices"][1]
    src_t, dst_t = bufs["src_slots"][1], bufs["dst_slots"][1]
    starts, flushes = bufs["plan_ring_start"][1], bufs["plan_flush_count"][1]
    rows_active = [conj(b < launch, flushes[b] >= 0) for b in range(NR)]
    position: Any = 0
    for b in range(NR):
        checks.append(("work list is the active rows", implies(rows_active[b], select(work, position, -2) == b)))
        position = ite(rows_active[b], position + 1, position)
    for v in range(NR):
        checks.append(("work list is the active rows", implies(v >= position, work[v] == -1)))
    pairs = []
    for b in range(NR):
        start, flush = starts[b], flushes[b]
        for g in range(p.groups):
            base = sum(p.layers[:g]) * NR
            src, dst = src_t[base + b], dst_t[base + b]
            run = conj(rows_active[b], src != pad, dst != pad)
            for layer in range(1, p.layers[g]):
                e = base + layer * NR + b
                checks.append(("layers of a group publish the same pair", implies(rows_active[b], conj(
                    src_t[e] == src, dst_t[e] == dst))))
            checks.append(("materialize contract", implies(run, conj(
                start >= 0, start < R, flush >= 0, flush <= W, start + flush <= 2 * R))))
            value = replay(before, g, src, start, flush, W)
            pairs.append((g, run, src, dst, value))
            out.set("ck", (g, dst), value, run)
    for i, (g, run, src, dst, value) in enumerate(pairs):
        for j, (g2, run2, src2, dst2, value2) in enumerate(pairs):
            if i < j and g == g2:
                checks.append(("materialize pairs do not race", implies(conj(run, run2, dst == dst2), value == value2)))
            if i != j and g == g2:
                checks.append(("materialize pairs do not race", negate(conj(run, run2, dst == src2, src != dst))))
    return checks
