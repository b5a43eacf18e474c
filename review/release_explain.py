"""``explain`` for a released-lifecycle trace (``review --vllm``'s ``*.release-trace.json``): the run pass by pass.

The trace holds the launches 0.33.0's host made and the ghost events between
them (admissions, finishes, row swaps, each decode's query lengths and
accepted counts), not the trackers: they are recomputed here with the spec
(``spec/release_trackers.py``), and each request's slot is drawn with the
ring rows its trackers commit (``ring_start`` .. ``+ prev_num_accepted``) and
the pending query. For each commit, every batch row's accepted count is shown
beside the count its request had (the async-scheduling race of vLLM #53912 is
a row whose count is another request's). Nothing of the version runs:
``replay`` runs it again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from replayssm.base.escape import one_line
from replayssm.spec.memory import VectorMemory
from replayssm.spec.release_trackers import PROGRAMS, TRACKERS, ReleaseGeometry

ORDER_WORDS = {
    "current_rows": "the accepted counts move with the batch rows (0.33.0 without async scheduling)",
    "previous_rows": "the accepted counts of each pass arrive in that pass's row order, after the next pass's "
                     "batch was reordered (async scheduling, vLLM #53912)",
}


def _ring(start: int, committed: int, pending: int, ring_len: int) -> str:
    cells = ["."] * ring_len
    for k in range(committed):
        cells[(start + k) % ring_len] = "#"
    cells[start] = "[" if committed else "|"
    return "".join(cells) + f"  start {start}, {committed} committed, pending query {pending}"


def explain_release(trace: dict[str, Any]) -> str:
    """The run of ``trace`` drawn pass by pass, ending at its finding."""
    g = trace["geometry"]
    geo = ReleaseGeometry(g["window"], g["query_len"], g["ring_len"])
    finding = trace.get("finding")
    lines = [f"vLLM {trace['version']}: released ReplaySSM ring trackers (generation P), W = {geo.window}, "
             f"T = {geo.query_len}, R = {geo.ring_len}, {trace['num_slots']} slots (slot 0 is the null block)",
             f"host: {ORDER_WORDS.get(trace['order'], trace['order'])}"]
    if finding:
        lines.append(f"finding ({finding['kind']}) at pass {finding['pass']}: {finding['message']}")
    state = [np.zeros(trace["num_slots"] + 1, dtype=np.int32) for _ in TRACKERS]
    slots: dict[str, int] = {}
    own: dict[str, int] = {}
    last = finding["pass"] if finding else trace["passes"] - 1
    for p in range(last + 1):
        lines.append(f"pass {p}:")
        for e in (e for e in trace["events"] if e["pass"] == p):
            if e["event"] == "admit":
                slots[e["request"]] = e["slot"]
                own[e["request"]] = 1
                lines.append(f"  admit {e['request']} ({e['prompt']} prompt tokens) into slot {e['slot']}")
            elif e["event"] == "finish":
                slots.pop(e["request"], None)
                lines.append(f"  {e['request']} finishes; the last batch row moves into its row (condense)")
            elif e["event"] == "swap":
                lines.append(f"  the persistent batch swaps rows {e['rows'][0]} and {e['rows'][1]}")
        decode = next((e for e in trace["events"] if e["pass"] == p and e["event"] == "decode"), None)
        for launch in (x for x in trace["launches"] if x["pass"] == p):
            n = len(launch["slots"])
            lanes = 128 * -(-n // 128)
            buffers = {"state_batch_indices": np.array(launch["slots"], dtype=np.int32),
                       "num_accepted_tokens": np.array(launch.get("accepted") or [0] * n, dtype=np.int32),
                       "query_start_loc": np.array(launch.get("query_start_loc") or [0] * (n + 1), dtype=np.int32),
                       **dict(zip(TRACKERS, state))}
            PROGRAMS[launch["kernel"]](VectorMemory(buffers, lanes), geo, np.arange(lanes), n, len(state[0]))
            lines.append(f"  {launch['kernel']} launch over rows {list(range(n))}:")
            for row, name in enumerate(launch["requests"]):
                s = launch["slots"][row]
                count = ""
                if launch["kernel"] == "commit":
                    got = launch["accepted"][row]
                    count = (f" count {got}" + ("" if got == own[name] else f" (but {name} had {own[name]} accepted:"
                                                                            " another row's count)"))
                ring = _ring(int(state[0][s]), int(state[1][s]), int(state[2][s]), geo.ring_len)
                lines.append(f"    row {row}: {name}, slot {s}{count}: {ring}")
            for row in range(len(launch["requests"]), n):
                lines.append(f"    row {row}: CUDA-graph padding (null slot)")
        if decode is not None:
            for name, q, a in zip(decode["requests"], decode["query_lens"], decode["accepted"]):
                own[name] = a
            lines.append("  FlashInfer decodes " + ", ".join(
                f"{n}: {q} token{'s' if q != 1 else ''}, {a} accepted" for n, q, a in
                zip(decode["requests"], decode["query_lens"], decode["accepted"])))
    lines.append("replay it on a version: replayssm-verify replay FILE --impl VERSION_FILE (or --recorded: the one it "
                 f"names, {one_line(str(trace.get('file', 'not named')))})")
    return "\n".join(lines)
