"""The callers' launches: one step's batch rows as the migration and postprocess launch actions.

Every input concrete (a trace replays without the callers); each row laid out
by the spec's :func:`~replayssm.spec.ghost_row.encode_row`, after the callers
check it keeps every caller assumption read on a row
(:meth:`.callers.Callers.check_assumptions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replayssm.spec.assumptions import GhostRow, encode_row

from .actions import Migrate, Postprocess

if TYPE_CHECKING:
    from .callers import Callers


def migrate_action(callers: Callers, batch_rows: list, table: list) -> Migrate:
    """The migration launch of a step's ``batch_rows`` (None: padding) over ``table``:
    each request's previous live column as its source, its new one as its destination."""
    conv, maxr = callers.setup.conventions, callers.geo.max_num_reqs
    src_cols, dst_cols = [-1] * maxr, [-1] * maxr
    idx = []
    for b, row in enumerate(batch_rows):
        if row is None:
            idx.append(-1)
            continue
        r, plan = row
        req = callers.req_index(b, r)
        idx.append(r.rid)
        src_cols[req], dst_cols[req] = callers.source_col(r), plan.live_col
        if src_cols[req] != dst_cols[req]:
            fresh = src_cols[req] < 0 or r.cols[0][src_cols[req]] == callers.geo.pad_slot
            callers.saw("migration to a copied slot" if plan.copied else
                        "migration to a fresh slot" if fresh else "migration (trackers copied by the kernel)")
    return Migrate(len(batch_rows), idx if conv.has_idx_mapping else None, src_cols, dst_cols, table)


def postprocess_action(callers: Callers, batch_rows: list, table: list) -> Postprocess:
    """The postprocess launch of a step's ``batch_rows`` (None: padding) over ``table``:
    each row checked (:meth:`.callers.Callers.check_assumptions`) and encoded as the spec says."""
    conv, maxr, n = callers.setup.conventions, callers.geo.max_num_reqs, len(batch_rows)
    inputs: dict[str, list] = {
        "idx_mapping": [-1] * n, "query_metadata": [0] * (n + 1 if conv.cumulative else n),
        "num_computed_tokens": [0] * maxr, "num_accepted_tokens": [0] * maxr,
        "is_prefilling": [False] * n, "live_cols": [0] * maxr,
    }
    offset = 0
    caller = []
    for b, row in enumerate(batch_rows):
        if row is None:
            if conv.cumulative:
                inputs["query_metadata"][b + 1] = offset
            caller.append("padding")
            continue
        r, plan = row
        ghost = GhostRow(r.computed, plan.query_len, plan.accepted, plan.prefilling,
                         plan.live_col, callers.req_index(b, r), offset, plan.flag)
        if r.rid not in callers.tainted or plan.breaks:
            callers.check_assumptions(ghost, r, plan.breaks)
        for buf, (i,), value in encode_row(conv, b, ghost):
            inputs[buf][i] = bool(value) if buf == "is_prefilling" else int(value)
        offset += plan.query_len
        caller.append(f"req {r.rid} {'prefill' if plan.prefilling else 'decode'} N={r.computed} "
                      f"q={plan.query_len} accepted={plan.accepted} live_col={plan.live_col}"
                      + (f" (breaks {plan.breaks})" if plan.breaks else ""))
    return Postprocess(n, inputs["idx_mapping"] if conv.has_idx_mapping else None, inputs["query_metadata"],
                       inputs["num_computed_tokens"], inputs["num_accepted_tokens"], inputs["is_prefilling"],
                       None if conv.live_col_is_zero else inputs["live_cols"], table, caller)
