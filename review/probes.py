"""Probes: does a version rely on a caller assumption?

A probe runs a campaign whose callers violate one droppable assumption
(:data:`replayssm.review.lifecycle.DROPPABLE`). A finding there counts as
reliance only if the same schedule with the assumption restored passes: the
probe's trace is rewritten to keep the assumption (:func:`restored`; for a
schedule whose steps cannot be kept, the part before the first violating
step) and replayed. When the restored trace still fails, the finding does not depend on
the assumption: it is a finding of the version, found by the probe.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replayssm.spec import assumptions as env

from .campaign import Version, replay


def _tracker_copies(step: dict, pad: int) -> list:
    copies = []
    for b, row in enumerate(step["rows"]):
        if row is None or row["source_col"] < 0 or row["source_col"] == row["live_col"]:
            continue
        for g, table in enumerate(step["table"]):
            s, d = table[b][row["source_col"]], table[b][row["live_col"]]
            if pad not in (s, d) and s != d:
                copies.append([g, s, d])
    return copies


def _one_token_continuation(step: dict) -> bool:
    return any(r is not None and r["prefilling"] and r["computed_before"] > 0 and r["query_len"] == 1
               for r in step["rows"])


def restored(trace: dict, name: str) -> dict | None:
    """``trace`` rewritten so that its callers keep assumption ``name``: block copies
    that carry the trackers, state copies on live moves, or the schedule cut before its
    first one-token continuation chunk (None when that is its first step: reliance)."""
    out = json.loads(json.dumps(trace))
    out["#meta"]["dropped"] = [d for d in out["#meta"].get("dropped", []) if d != name]
    pad = out["params"]["geometry"]["pad_slot"]
    if name == env.BLOCK_COPY_MOVES_TRACKERS.name:
        for step in out["steps"]:
            step["copies"] = _tracker_copies(step, pad)
    elif name == env.PREFILL_CONTINUATION_LONGER_THAN_ONE.name:
        first = next((i for i, s in enumerate(out["steps"]) if _one_token_continuation(s)), None)
        if first == 0:
            return None
        out["steps"] = out["steps"][:first]  # the schedule up to its first violating step
    elif name != env.LIVE_MOVE_COPIES_STATE.name:
        raise ValueError(f"no restoration for assumption {name!r}")
    return out


def confirm(trace_path: str, name: str, version: Version, device: str) -> tuple[bool, str | None]:
    """``(relied_on, independent_trace)``: whether the probe's finding goes away with
    the assumption restored; if it does not, the restored trace's path (a finding of its own)."""
    trace = json.loads(Path(trace_path).read_text())
    kept = restored(trace, name)
    if kept is None:
        return True, None
    path = Path(trace_path).with_name(Path(trace_path).stem + "-restored.json")
    path.write_text(json.dumps(kept))
    ok, _ = replay(str(path), [version], device)
    return ok, None if ok else str(path)


def probe_summary(relied: bool, prop: Any, trace: str | None, independent: str | None) -> dict:
    return {"relied_on": relied, "property": prop if relied else None, "trace": trace if relied else None,
            "independent_finding": independent}
