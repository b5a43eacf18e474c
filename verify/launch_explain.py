"""``explain`` for launch traces: the fuzzer's failures and the kernel
launches of a system trace (``fuzz/launcher.py``'s format), step by step,
with the trackers of every slot a step touched drawn as ring diagrams.

A launch trace's ``params`` name ``layers_per_group``; its ``states[i]`` are
the spec's state buffers after ``actions[i]`` (``ring_start`` and
``num_committed`` per group and slot, the per-row plan). Only this data is
read: no kernel runs.
"""

from __future__ import annotations

from typing import Any

from .traces import ring_row

TRACKERS = ("ring_start", "num_committed")


def _field(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}.{key} is missing")
    return d[key]


def _slot_rows(state: dict, where: str) -> list[list[tuple[int, int]]]:
    """Per group, per slot: ``(ring_start, num_committed)``."""
    rs, nc = _field(state, "ring_start", where), _field(state, "num_committed", where)
    if not isinstance(rs, list) or not isinstance(nc, list) or len(rs) != len(nc):
        raise ValueError(f"{where}.ring_start and .num_committed must be lists of one row per cache group")
    return [list(zip(a, b)) for a, b in zip(rs, nc)]


def _picks_line(action: dict) -> str:
    if action.get("name") == "set_state":  # its values show as the slots it changed
        return "(" + ", ".join(action.get("picks", {})) + ")"
    shown = []
    for k, v in action.get("picks", {}).items():
        if k == "block_table" or v is None:
            continue
        shown.append(f"{k}={v}")
    return " ".join(shown)


def explain_launches(trace: dict) -> str:
    """A launch trace as text: its setup and failure, then per action its
    inputs, the slots whose trackers it changed (as ring rows) and the plan
    rows it left."""
    params = trace["params"]
    geo = _field(params, "geometry", "params")
    ring_len = int(_field(geo, "ring_len", "params.geometry"))
    meta = trace.get("#meta", {})
    conv = _field(params, "conventions", "params")
    out = [f"launch trace ({meta.get('source', 'unknown source')}"
           + "".join(f", {k} {meta[k]}" for k in ("seed", "impl", "level", "device") if k in meta) + ")",
           f"  bs={geo.get('block_size')} W={geo.get('window')} R={ring_len} rows={geo.get('max_num_reqs')} "
           f"layers per group={params.get('layers_per_group')} cols={params.get('num_cols')} "
           f"slots={params.get('num_slots')}  "
           + " ".join(f"{k}={int(v)}" for k, v in conv.items())]
    if meta.get("failure") or meta.get("error"):
        out.append(f"  failure: {meta.get('failure', '')}: {meta.get('error', '')}".rstrip(": "))
    actions, states = trace.get("actions"), trace.get("states")
    if not isinstance(actions, list):
        raise ValueError("trace.actions must be a list of launch actions")
    if not isinstance(states, list) or len(states) != len(actions):
        raise ValueError(f"trace.states must hold one state per action ({len(actions)}); "
                         "replay the trace to recompute them")
    out.append("ring rows: '>' ring_start, '(#)' the num_committed rows from it, '.' other rows")
    before = [[(0, 0)] * int(params.get("num_slots", 0)) for _ in params["layers_per_group"]]
    for n, (action, state) in enumerate(zip(actions, states)):
        where = f"trace.states[{n}]"
        caller = "; ".join(action.get("caller", []))
        out.append(f"step {n}: {action.get('name')} {_picks_line(action)}".rstrip()
                   + (f"   [{caller}]" if caller else ""))
        after = _slot_rows(state, where)
        for g, slots in enumerate(after):
            for s, (rs, nc) in enumerate(slots):
                if s < len(before[g]) and before[g][s] == (rs, nc):
                    continue
                out.append(f"    g{g} slot {s}: [{ring_row(ring_len, rs, nc)}] rs={rs} nc={nc}")
        if action.get("name") == "postprocess":
            plan = zip(state.get("plan_ring_start", []), state.get("plan_flush_count", []))
            rows = [f"row {r}: ring_start {p} flush {f}" for r, (p, f) in enumerate(plan) if f >= 0]
            if rows:
                out.append("    plan: " + "; ".join(rows))
        before = after
    return "\n".join(out)
