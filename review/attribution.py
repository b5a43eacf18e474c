"""Sound attribution: a probe's counterexample re-run with its assumption restored on the rows that broke it.

A probe (:mod:`.probes`) drops a caller assumption and finds a counterexample:
a review trace whose steps record, per batch row, the dropped assumptions that
row broke (``row_breaks``, :class:`~replayssm.review.lifecycle.StepRecord`).
Reliance is decided by running *the same schedule up to the same failing step*
with every such row restored (:func:`restore_rows`); a failure that survives
happens inside the contract and is a finding of the version, whatever step it
is at. Cutting the schedule before the first row that broke the assumption
(what the probes did before) throws the failing step away with it, so any later
failure looked like reliance.

How a row is restored, the first that applies (:func:`restoration`):

1. **The same effect, inside the contract**: a row that leaves its request
   where the broken row did (the same computed count after the step, the same
   live column) and keeps every caller assumption read on a row
   (``spec.assumptions.checked_on_rows``) that the broken row kept, the dropped
   ones included: the ``is_prefilling`` input agreeing with how the row ran, a
   decode row scheduling fewer tokens (as few as it accepts, no fewer), or, for
   a row that moves its request nowhere (a first prefill chunk of no token),
   no row at all: the request is not scheduled that step (its expected state
   stays what it was, and its next row starts from the live column it had).
   The rest of the schedule is then exactly the one the probe ran.
2. **The same state, recomputed inside the contract**: a prefill row from
   position 0 to where the broken row left the request, in the same live
   column and keeping the same caller assumptions (a request whose state is
   recomputed, as vLLM's scheduler does after preempting it) that publishes
   the prefix block the row did (the same boundary column, or none), where every
   dropped assumption is one read on a row (``checked_on_rows``), so the
   recomputed row is seen to keep it (a scheduler's or launch's assumption,
   e.g. ``fresh_slot_is_free`` or ``columns_in_table``, the same blocks and
   table would break again). Its rows after
   that step run as the probe ran them, from a state reached inside the
   contract, so a later row of the request that fails on its own is a
   finding, not reliance.
3. **Otherwise the request leaves the schedule** at that row: its rows from
   then on are dropped, it is no longer expected to run, the prefix blocks it
   published after that row are not expected, and every request that later
   names one of those blocks leaves with it (it would read a prefix the
   restored schedule never wrote). Every other row, the failing step's
   included, runs as the probe ran it.

Each restored step's launch inputs are laid out again from its rows by the
spec's :func:`~replayssm.spec.ghost_row.encode_row`, as the callers do.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

from replayssm.fuzz.launcher import Setup
from replayssm.spec import assumptions as env
from replayssm.spec.geometry import moves_live_column
from replayssm.spec.ghost_row import GhostRow, RowContext, encode_row, live_col_of
from replayssm.spec.row_assumptions import PREFILL_ACCEPTED

from .arguments import Row, boundary_work


def _ghost(row: Row, flag: bool | None = None, cum_base: int = 0) -> GhostRow:
    return GhostRow(row.computed_before, row.query_len, row.accepted, row.prefilling, row.live_col, row.req,
                    cum_base, None if flag is None or flag == row.prefilling else flag)


def _context(setup: Setup, row: Row) -> RowContext:
    """The row's world as far as a trace tells it (the prompt's length is not recorded: taken as ending
    where a prefill row ends, which only ``prefill_chunk_on_boundary`` reads, the same on both rows compared)."""
    prompt = row.computed_before + (row.query_len if row.prefilling else 0)
    return RowContext(setup.geometry, setup.conventions, str(setup.cache_mode), int(setup.max_model_len or 0),
                      setup.num_cols, prompt)


def _kept(setup: Setup, row: Row, flag: bool | None) -> set[str]:
    ctx = _context(setup, row)
    return {a.name for a in env.checked_on_rows() if bool(a.on_row(ctx, _ghost(row, flag)))}  # type: ignore[misc]


def restoration(setup: Setup, row: Row, flag: bool | None, dropped: frozenset[str]) -> tuple[str, Row | None]:
    """How to restore ``dropped`` on ``row`` (its ``is_prefilling`` input ``flag``) keeping its effect:
    ``("row", the restored row)``, ``("unscheduled", None)`` (a row that moves its request nowhere),
    ``("recompute", a prefill row from 0 to where the row left the request)`` or ``("remove", None)``
    (no row has its effect inside the contract: the request leaves)."""
    want = {a.name for a in env.checked_on_rows() if a.name in dropped} | _kept(setup, row, flag)
    candidates = [row] if flag is not None and flag != row.prefilling else []
    if not row.prefilling:
        mode, bs = str(setup.cache_mode), setup.geometry.block_size
        candidates += [replace(row, query_len=q) for q in range(row.query_len - 1, max(row.accepted, 1) - 1, -1)
                       if live_col_of(mode, bs, row.computed_before, q) == row.live_col]
    for cand in candidates:
        if want <= _kept(setup, cand, None) and cand.computed_after == row.computed_after:
            return "row", cand
    if row.computed_after == row.computed_before:
        return "unscheduled", None
    again = replace(row, computed_before=0, query_len=row.computed_after, accepted=PREFILL_ACCEPTED.start,
                    prefilling=True, source_col=-1)
    bs = setup.geometry.block_size
    if (dropped <= {a.name for a in env.checked_on_rows()}
            and live_col_of(str(setup.cache_mode), bs, 0, again.query_len) == row.live_col
            and boundary_work(again, bs, True)[1] == boundary_work(row, bs, True)[1]
            and want <= _kept(setup, again, None)):
        return "recompute", again
    return "remove", None


def restore_rows(trace: dict, dropped: frozenset[str]) -> dict:
    """``trace`` (a review trace whose steps carry ``row_breaks``) with ``dropped`` restored on every row
    that broke one of them, the schedule otherwise the same, up to its last (failing) step
    (see the module docstring). ``#meta.dropped`` and each step's ``breaks`` lose ``dropped``."""
    out = json.loads(json.dumps(trace))
    setup = Setup.from_json(out["params"])
    out["#meta"]["dropped"] = [d for d in out["#meta"].get("dropped", []) if d not in dropped]
    removed: dict[int, int] = {}          # rid -> the step it left the schedule at
    paused: dict[int, list | None] = {}   # rid -> its expected entry before its unscheduled row (None: none)
    previous: dict[int, list] = {}        # rid -> its expected entry after the step before, as restored
    steps = []
    for n, step in enumerate(out["steps"]):
        rows = [None if r is None else Row(**r) for r in step["rows"]]
        flags = step["postprocess"]["is_prefilling"]
        breaks = step.get("row_breaks", [[] for _ in rows])
        keep: list[tuple[int, Row | None, bool | None]] = []
        for b, row in enumerate(rows):
            if row is None:
                keep.append((b, None, None))
                continue
            if row.rid in removed or _names_dropped_prefix(out, n, b, removed):
                removed.setdefault(row.rid, n)
                continue
            if row.rid in paused:  # its first row after unscheduled ones starts where the request was
                row = replace(row, source_col=_source_col(setup, paused.pop(row.rid), row))
            if not set(breaks[b]) & dropped:
                keep.append((b, row, bool(flags[b])))
                continue
            how, new = restoration(setup, row, bool(flags[b]), dropped)
            if how in ("row", "recompute"):
                keep.append((b, new, None))
            elif how == "unscheduled":
                paused.setdefault(row.rid, previous.get(row.rid))
            else:
                removed[row.rid] = n
        running = []
        for entry in step["expect"]["running"]:
            rid = entry[0]
            if rid in removed:
                continue
            if rid in paused:
                was = paused[rid]
                entry = was if was is not None else [entry[0], entry[1], entry[2], -1, entry[4]]
            running.append(entry)
            previous[rid] = entry
        step["expect"]["running"] = running
        step["expect"]["published"] = [p for p in step["expect"]["published"]
                                       if not _published_by_removed(out, n, p, removed)]
        step["breaks"] = [x for x in step.get("breaks", []) if x not in dropped]
        if any(row is not None for _, row, _ in keep):
            lay_out(step, keep, setup)
            steps.append(step)
    out["steps"] = steps
    return out


def _source_col(setup: Setup, was: list | None, row: Row) -> int:
    """The column a request's state is in when its last rows were not scheduled (``Callers.source_col``)."""
    if was is not None and was[3] >= 0:
        return int(was[3])
    if row.computed_before > 0 and moves_live_column(str(setup.cache_mode)):
        return (row.computed_before - 1) // setup.geometry.block_size
    return -1


def _slots_of(step: dict, b: int) -> set[tuple[int, int]]:
    return {(g, s) for g, table in enumerate(step["table"]) for s in table[b]}


def _published_by_removed(trace: dict, n: int, entry: list, removed: dict[int, int]) -> bool:
    """``entry`` (stream, column, slot per group) is a prefix block expected published at step ``n``
    that a removed request published after it left the schedule."""
    stream, col, slots = entry
    for rid, since in removed.items():
        if since > 0 and [stream, col, slots] in trace["steps"][since - 1]["expect"]["published"]:
            continue  # published before it left: the restored schedule wrote it too
        for step in trace["steps"][since:n + 1]:
            for b, r in enumerate(step["rows"]):
                if r is not None and r["rid"] == rid and col < len(step["table"][0][b]) and all(
                        step["table"][g][b][col] == s for g, s in enumerate(slots)):
                    return True
    return False


def _names_dropped_prefix(trace: dict, n: int, b: int, removed: dict[int, int]) -> bool:
    """Row ``b`` of step ``n`` names a prefix block a removed request published after it left
    (it would read a prefix the restored schedule never wrote)."""
    if not removed:
        return False
    step = trace["steps"][n]
    mine = _slots_of(step, b)
    published = step["expect"]["published"] + (trace["steps"][n - 1]["expect"]["published"] if n else [])
    return any(any((g, s) in mine for g, s in enumerate(p[2])) and _published_by_removed(trace, n, p, removed)
               for p in published)


def lay_out(step: dict, keep: list[tuple[int, Row | None, bool | None]], setup: Setup) -> None:
    """``step`` with its batch rows ``keep`` (``(original batch row, row or None for padding,
    is_prefilling input or None: as the row ran)``, in order): its table, copies and both launches'
    inputs laid out again as the callers do (``fuzz/caller_launches.py``)."""
    conv, maxr = setup.conventions, setup.geometry.max_num_reqs
    order = [b for b, _, _ in keep]
    gone = {gs for b in range(len(step["rows"])) if b not in order for gs in _slots_of(step, b)}
    still = {gs for b in order for gs in _slots_of(step, b)}
    rest = [b for b in range(len(step["table"][0])) if b not in order]  # past the launch, stale as it may be
    table = [[group[b] for b in order + rest] for group in step["table"]]
    n = len(keep)
    pp: dict[str, Any] = {"idx_mapping": [-1] * n, "query_metadata": [0] * (n + 1 if conv.cumulative else n),
                          "num_computed_tokens": [0] * maxr, "num_accepted_tokens": [0] * maxr,
                          "is_prefilling": [False] * n, "live_cols": [0] * maxr}
    src_cols, dst_cols, idx = [-1] * maxr, [-1] * maxr, []
    rows_out: list[dict | None] = []
    offset = 0
    for b, (_, row, flag) in enumerate(keep):
        if row is None:
            idx.append(-1)
            if conv.cumulative:
                pp["query_metadata"][b + 1] = offset
            rows_out.append(None)
            continue
        row = replace(row, req=row.rid if conv.has_idx_mapping else b)
        rows_out.append(asdict(row))
        idx.append(row.rid)
        src_cols[row.req], dst_cols[row.req] = row.source_col, row.live_col
        for buf, (i,), value in encode_row(conv, b, _ghost(row, flag, offset)):
            pp[buf][i] = bool(value) if buf == "is_prefilling" else int(value)
        offset += row.query_len
    step["rows"], step["table"] = rows_out, table
    step["row_breaks"] = [[] for _ in rows_out]
    step["copies"] = [c for c in step["copies"] if (c[0], c[2]) not in gone - still]
    step["postprocess"].update(num_reqs=n, idx_mapping=pp["idx_mapping"] if conv.has_idx_mapping else None,
                               query_metadata=pp["query_metadata"], num_computed_tokens=pp["num_computed_tokens"],
                               num_accepted_tokens=pp["num_accepted_tokens"], is_prefilling=pp["is_prefilling"],
                               live_cols=None if conv.live_col_is_zero else pp["live_cols"], block_table=table)
    step["migrate"].update(num_reqs=n, idx_mapping=idx if conv.has_idx_mapping else None, src_cols=src_cols,
                           dst_cols=dst_cols, block_table=table)
