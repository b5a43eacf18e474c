"""Proof counterexamples as system traces, and every trace drawn step by step.

A model of a failed BMC run or inductive step becomes a system trace
(:mod:`replayssm.base.system_traces`: params, states, actions with their
picks); :func:`explain` re-runs one on the concrete model and prints it step
by step with a diagram of each slot's ring.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import z3

from replayssm.base.system_traces import make_trace, meta_of, params_of, replay_actions, states_of
from replayssm.base.traces import read_json
from replayssm.spec.system import (
    GARBAGE,
    AdmitPicks,
    Picks,
    RowPick,
    StepPicks,
    State,
    SystemParams,
    checked_picks,
    covered_nulls,
    failed_checks,
    flat_picks,
    invariants,
    picks_json,
)

from .terms import lift


def trace_from_model(u: Any, m: z3.ModelRef, violated: list[str] | None = None) -> dict:
    """The run a BMC model describes (``u`` is a ``verify.bmc.Unrolling``)."""
    ev = lambda x: int(m.eval(lift(x), model_completion=True).as_long()) if not isinstance(x, int) else x
    states = [{k: [ev(x) for x in vals] for k, vals in st.v.items()} for st in u.states]
    actions = []
    for d, sel in enumerate(u.selectors):
        ch = u.options[ev(sel)]
        actions.append({"name": ch.action, "picks": picks_json(u.picks[d][ch.label], ev)})
    return make_trace(u.p, states, actions, source="run_bmc", violated=violated or [],
                      dropped=list(u.dropped))


# ---------------------------------------------------------------- explain


def _tok(p: SystemParams, code: int) -> str:
    if code == GARBAGE or code < 0:
        return "  ."
    s, pos = divmod(code, p.K)
    return f"{'ab'[s] if s < 2 else s}{pos:<2d}"


def ring_row(ring_len: int, ring_start: int, num_committed: int,
             token: Callable[[int], str] | None = None) -> str:
    """The rows of one ring: ``>`` before ``ring_start``'s row, the
    ``num_committed`` rows from it in ``( )``, each row's ``token`` (for a
    system trace the token it holds; without ``token``, as in a launch trace
    whose rows hold no tokens, ``#`` for a committed row and ``.`` else)."""
    committed = {(ring_start + j) % ring_len for j in range(max(0, min(num_committed, ring_len)))}
    cells = []
    for i in range(ring_len):
        tok = token(i) if token is not None else "#" if i in committed else "."
        mark = ">" if i == ring_start else " "
        cells.append(f"{mark}({tok})" if i in committed else f"{mark} {tok} ")
    return "".join(cells)


def slot_view(p: SystemParams, st: State, g: int, s: int) -> dict:
    """What group ``g``'s slot ``s`` holds in ``st``, as data (the text
    diagram's and the HTML report's): its ring (length, ``ring_start``,
    ``num_committed``, each row's token as ``<stream><position>`` or None for
    garbage), its checkpoint, reference count and published token."""
    ck, reg = st.get("ck", g, s), st.get("reg", g, s)
    return {"group": g, "slot": s, "ring_len": int(p.geo.ring_len), "ring_start": st.get("rs", g, s),
            "committed": st.get("nc", g, s), "ref": st.get("ref", g, s),
            "rows": [None if (code := st.get("ring", g, s, i)) == GARBAGE or code < 0 else _tok(p, code).strip()
                     for i in range(int(p.geo.ring_len))],
            "checkpoint": None if ck < 0 else [ck // p.K, ck % p.K],
            "published": None if reg < 0 else _tok(p, reg).strip()}


def ring_diagram(v: dict) -> str:
    """One slot's :func:`slot_view` as text: ``[ ... ]`` rows with ``>`` at
    ring_start, committed rows in ``( )``, other rows plain; then the
    checkpoint position and trackers."""
    cells = ring_row(v["ring_len"], v["ring_start"], v["committed"],
                     lambda i: f"{v['rows'][i]:<3}" if v["rows"][i] is not None else "  .")
    ckpt = "garbage" if v["checkpoint"] is None else f"stream {v['checkpoint'][0]} @ {v['checkpoint'][1]}"
    pub = "" if v["published"] is None else f"  published {v['published']}"
    return (f"g{v['group']} slot {v['slot']}: [{cells}] ckpt {ckpt}, rs={v['ring_start']} nc={v['committed']} "
            f"ref={v['ref']}{pub}")


def used_slots(p: SystemParams, st: State) -> list[tuple[int, int]]:
    """The (group, slot) pairs in use: referenced or published (the null slot 0 aside)."""
    return sorted({(g, s) for g in range(p.groups) for s in range(1, p.num_slots)
                   if st.get("ref", g, s) > 0 or st.get("reg", g, s) >= 0})


def describe_state(view: dict) -> list[str]:
    """A state's requests and used slots (:func:`timeline`'s per-state view) as text."""
    lines = []
    for r in view["requests"]:
        if not r["active"]:
            lines.append(f"  req {r['req']}: -")
            continue
        tables = " | ".join(f"g{g}[{' '.join(str(x) for x in row)}]" for g, row in enumerate(r["tables"]))
        lines.append(f"  req {r['req']}: stream {r['stream']} N={r['N']} prompt={r['prompt']} "
                     f"live col={r['live_col']}  tables {tables}")
    return lines + ["    " + ring_diagram(v) for v in view["slots"]]


def requests_view(p: SystemParams, st: State) -> list[dict]:
    """Each request row: whether it is active and, if so, its stream, computed
    count ``N``, prompt, live column and block-table rows per group."""
    return [{"req": r, "active": False} if st.get("active", r) != 1 else
            {"req": r, "active": True, "stream": st.get("stream", r), "N": st.get("N", r),
             "prompt": st.get("prompt", r), "live_col": st.get("live", r),
             "tables": [[st.get("table", g, r, c) for c in range(p.num_cols)] for g in range(p.groups)]}
            for r in range(p.num_reqs)]


def timeline(trace: dict) -> dict:
    """A system trace as data, step by step (what :func:`explain` prints and
    the HTML report draws): its system, then per state (the initial one, then
    after each action) the action and its picks, the checks that failed, the
    invariants that broke, the variables where the replay differs from the
    recording, the requests and every used slot (:func:`slot_view`)."""
    p = params_of(trace)
    meta = meta_of(trace)
    st0 = states_of(trace, p)[0]
    system = {"source": meta.get("source", ""), "conventions": p.conv.label(), "block_size": p.geo.block_size,
              "window": p.geo.window, "ring_len": p.geo.ring_len, "layers": list(p.layers),
              "dropped": list(meta.get("dropped", [])), "violated": list(meta.get("violated", []))}

    def view(st: State) -> dict:
        return {"requests": requests_view(p, st), "slots": [slot_view(p, st, g, s) for g, s in used_slots(p, st)]}

    steps = [{"step": 0, "action": None, "picks": "", "failed": [], "broken": [], "differs": [], **view(st0)}]
    prev = st0
    for i, (act, outcome, diff) in enumerate(replay_actions(trace)):
        shown = _shown_picks(act["name"], checked_picks(p, act["name"], act["picks"]), prev)
        prev = outcome.state
        steps.append({"step": i + 1, "action": act["name"], "picks": shown, "failed": failed_checks(outcome),
                      "broken": sorted({n for n, x in invariants(outcome.state) if not x}), "differs": diff,
                      **view(outcome.state)})
    return {"system": system, "steps": steps}


def explain(path: str | Path | dict) -> str:
    """A trace, step by step: each action with its picks, the state after it
    with a ring diagram per used slot, the checks that failed and the
    invariants that broke (:func:`timeline`, as text)."""
    data = timeline(path if isinstance(path, dict) else read_json(path))
    s = data["system"]
    out = [f"trace {s['source']}  {s['conventions']}  bs={s['block_size']} W={s['window']} "
           f"R={s['ring_len']} layers={s['layers']}"]
    if s["dropped"]:
        out.append(f"dropped assumptions: {', '.join(s['dropped'])}")
    if s["violated"]:
        out.append(f"violated: {', '.join(s['violated'])}")
    out.append("ring rows: '>' ring_start, '( )' committed, tokens as <stream><position>, '.' garbage")
    for step in data["steps"]:
        if step["action"] is None:
            out.append("state 0:")
        else:
            out.append(f"step {step['step']}: {step['action']} {step['picks']}")
        if step["failed"]:
            out.append(f"  FAILED checks: {', '.join(step['failed'])}")
        if step["broken"]:
            out.append(f"  BROKEN invariants: {', '.join(step['broken'])}")
        if step["differs"]:
            out.append(f"  (replay differs from the recorded state in: {', '.join(step['differs'])})")
        out += describe_state(step)
    return "\n".join(out)


def explain_counterexample(scenario: dict) -> str:
    """A ``prove`` counterexample file (``save_counterexample``'s scenario):
    the obligation, its violated parts and accesses, then the run it
    describes, drawn by :func:`explain` (from ``trace_file``, or the trace
    the scenario holds)."""
    from .counterexamples import render_scenario

    out = [f"counterexample of {scenario.get('obligation')}", render_scenario(scenario)]
    trace = scenario.get("trace")
    if trace is None and scenario.get("trace_file"):
        trace = read_json(scenario["trace_file"])
    if trace is not None:
        out += ["", explain(trace)]
    return "\n".join(out)


def _shown_picks(action: str, picks: Picks, st: State) -> str:
    """An action's picks as one line, leaving out the rows of requests a step
    did not run, the hit slots of columns an admission does not hit and a
    ``tail_as_decode`` of 0."""
    if isinstance(picks, StepPicks):
        shown = [r for r in picks.order if picks.rows[r].sched == 1 and st.get("active", r) == 1]
        rows = [f"r{r}: q={row.q} acc={row.acc} live_col={row.live_col} is_prefilling={row.is_prefilling} "
                f"slot={list(row.slot)} null={list(row.null)}{_shown_covers(st, r, row)}"
                + (" tail_as_decode=1" if row.tail_as_decode == 1 else "")
                for r, row in enumerate(picks.rows) if r in shown]
        return "; ".join(rows) + (f"; batch rows {', '.join(f'r{r}' for r in shown)}" if len(shown) > 1 else "")
    if isinstance(picks, AdmitPicks):
        hit_slots = [list(slots[:picks.hit]) for slots in picks.hit_slots]
        return (f"req={picks.req} stream={picks.stream} prompt={picks.prompt} hit={picks.hit}"
                + (f" hit_slots={hit_slots}" if picks.hit else ""))
    return " ".join(f"{k}={v}" for k, v in flat_picks(picks).items())


def _shown_covers(st: State, r: int, row: RowPick) -> str:
    """What the pool gives each null column the row covers before its live
    one (``spec.system.step.covers``): `` cover[c]=null`` or its slots."""
    return "".join(f" cover[{c}]={'null' if row.cover_null[c] else list(row.cover_slot[c])}"
                   for c in covered_nulls(st, r, row.live_col))


def trace_from_transition(t: Any, m: z3.ModelRef, violated: list[str], dropped: tuple[str, ...]) -> dict:
    """The one-step run a model of an inductive-step counterexample describes
    (``t`` is a ``verify.system_proofs.Transition``): the pre-state the model
    picks, the action with its picks, and the state after it."""
    ev = lambda x: int(m.eval(lift(x), model_completion=True).as_long()) if not isinstance(x, int) else x
    states = [{k: [ev(x) for x in vals] for k, vals in st.v.items()} for st in (t.pre, t.post)]
    actions = [{"name": t.action, "picks": picks_json(t.picks, ev)}]
    return make_trace(t.p, states, actions, source="system inductive step", violated=violated,
                      dropped=list(dropped))
