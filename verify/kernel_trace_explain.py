"""``explain`` for a kernel-proof trace of a generation's launch (``review``'s and ``prove --kernels
--impl``'s ``*.kernel-trace.json`` whose launch is one named kernel of a vLLM version): the
obligation that failed, the memory before the launch (every slot's trackers as a ring row) and the
step the caller gave each batch row, in vLLM's terms. Only the trace is read: no kernel runs, so
what the kernel then does is ``replay``'s to show (the text ends with that command)."""

from __future__ import annotations

import shlex
from typing import Any

from .traces import ring_row

NAMED_LAUNCH = "launch"
"""The action name of a generation's kernel launch in a kernel-proof trace."""


def is_named_launch_trace(trace: dict) -> bool:
    """Whether ``trace``'s launch is a generation's named kernel (rather than a reference API action)."""
    return any(isinstance(a, dict) and a.get("name") == NAMED_LAUNCH for a in trace.get("actions", []))


def _list(picks: dict, key: str) -> list:
    value = picks.get(key)
    return value if isinstance(value, list) else []


def _query_lens(picks: dict, cumulative: bool, rows: int) -> list[Any]:
    """Each scheduled row's query length: ``query_start_loc`` differences or per-row lengths."""
    qm = _list(picks, "query_metadata")
    if cumulative:
        return [qm[r + 1] - qm[r] if r + 1 < len(qm) else "?" for r in range(rows)]
    return [qm[r] if r < len(qm) else "?" for r in range(rows)]


def _at(values: list, i: int) -> Any:
    return values[i] if 0 <= i < len(values) else "?"


def _row_lines(picks: dict, conv: dict, rows: int) -> list[str]:
    """One line per scheduled batch row: its request, tokens and block-table row."""
    lens = _query_lens(picks, bool(conv.get("cumulative")), rows)
    idx = _list(picks, "idx_mapping")
    prefill, tables = _list(picks, "is_prefilling"), _list(picks, "block_table")
    out = []
    for r in range(rows):
        req = _at(idx, r) if conv.get("has_idx_mapping") else r
        live = 0 if conv.get("live_col_is_zero") else _at(_list(picks, "live_cols"), req if isinstance(req, int) else r)
        kind = "prefill" if _at(prefill, r) in (True, 1) else "decode"
        line = (f"  row {r}: request {req}, {kind} of {_at(lens, r)} token(s), "
                f"{_at(_list(picks, 'num_computed_tokens'), req if isinstance(req, int) else r)} computed, "
                f"{_at(_list(picks, 'num_accepted_tokens'), req if isinstance(req, int) else r)} accepted, "
                f"live block-table column {live}")
        for g, table in enumerate(tables):
            if isinstance(table, list) and isinstance(req, int) and 0 <= req < len(table):
                line += f"; group {g} blocks {table[req]}"
        out.append(line)
    return out


def _tracker_lines(state: dict, ring_len: int) -> list[str]:
    """Every slot's trackers before the launch, as ring rows (slots whose trackers are zero left out)."""
    rs, nc = _list(state, "ring_start"), _list(state, "num_committed")
    out = []
    for g, (starts, counts) in enumerate(zip(rs, nc)):
        for s, (start, count) in enumerate(zip(starts, counts)):
            if (start, count) != (0, 0):
                out.append(f"  group {g} block {s}: [{ring_row(ring_len, start, count)}] ring_start={start} "
                           f"committed={count}")
    return out or ["  every block's trackers are 0"]


def explain_kernel_trace(trace: dict, path: str) -> str:
    """The kernel-proof trace at ``path`` as text: what failed, the trackers before the launch, each
    scheduled row's step, the launch's other inputs, and the command that runs the kernel on it."""
    meta, params = trace.get("#meta", {}), trace.get("params", {})
    geo, conv = params.get("geometry", {}), params.get("conventions", {})
    ring_len = int(geo.get("ring_len", 0))
    actions = [a for a in trace.get("actions", []) if isinstance(a, dict)]
    state: dict = next((a.get("picks", {}) for a in actions if a.get("name") == "set_state"), {})
    launch: dict = next((a.get("picks", {}) for a in actions if a.get("name") == NAMED_LAUNCH), {})
    rows = int(launch.get("num_reqs", 0) or 0)
    out = [f"kernel-proof counterexample: {meta.get('property', '?')} of {meta.get('kernel', '?')} "
           f"(role {meta.get('role', '?')}, obligation {meta.get('obligation', '?')}, case {meta.get('case', '?')})",
           f"  version {meta.get('impl', '?')}",
           f"  block size {geo.get('block_size')}, window {geo.get('window')}, ring of {ring_len} rows, "
           f"{geo.get('max_num_reqs')} batch rows at most, {params.get('num_slots')} blocks, "
           f"{params.get('num_cols')} block-table columns, layers per cache group {params.get('layers_per_group')}",
           "  caller conventions: " + ", ".join(f"{k}={int(bool(v))}" for k, v in conv.items()),
           "trackers before the launch (ring rows: '>' ring_start, '(#)' the committed rows from it, '.' others):",
           *_tracker_lines(state, ring_len),
           f"the launch schedules {rows} batch row(s):",
           *_row_lines(launch, conv, rows)]
    shown = {"num_reqs", "query_metadata", "idx_mapping", "is_prefilling", "block_table", "live_cols",
             "num_computed_tokens", "num_accepted_tokens"}
    others = [f"{k}={v}" for k, v in launch.items() if k not in shown and v is not None]
    if others:
        out.append("other launch inputs: " + " ".join(others))
    impl = meta.get("impl")
    command = ["replayssm-verify", "replay", path] + (["--impl", str(impl)] if impl else [])
    out.append("what the kernel does with this input (runs the version's kernel): " + shlex.join(command))
    return "\n".join(out)
