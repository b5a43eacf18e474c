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
    StepPicks,
    State,
    SystemParams,
    checked_picks,
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


def ring_diagram(p: SystemParams, st: State, g: int, s: int) -> str:
    """One slot: ``[ ... ]`` rows with ``>`` at ring_start, committed rows in
    ``( )``, other rows plain; then the checkpoint position and trackers."""
    rs, nc = st.get("rs", g, s), st.get("nc", g, s)
    cells = ring_row(int(p.geo.ring_len), rs, nc, lambda i: _tok(p, st.get("ring", g, s, i)))
    ck = st.get("ck", g, s)
    ckpt = "garbage" if ck < 0 else f"stream {ck // p.K} @ {ck % p.K}"
    reg = st.get("reg", g, s)
    pub = "" if reg < 0 else f"  published {_tok(p, reg).strip()}"
    return f"g{g} slot {s}: [{cells}] ckpt {ckpt}, rs={rs} nc={nc} ref={st.get('ref', g, s)}{pub}"


def describe_state(p: SystemParams, st: State) -> list[str]:
    lines = []
    for r in range(p.num_reqs):
        if st.get("active", r) != 1:
            lines.append(f"  req {r}: -")
            continue
        row = [" ".join(str(st.get("table", g, r, c)) for c in range(p.num_cols)) for g in range(p.groups)]
        lines.append(f"  req {r}: stream {st.get('stream', r)} N={st.get('N', r)} prompt={st.get('prompt', r)} "
                     f"live col={st.get('live', r)}  tables " + " | ".join(f"g{g}[{t}]" for g, t in enumerate(row)))
    used = sorted({(g, s) for g in range(p.groups) for s in range(1, p.num_slots)
                   if st.get("ref", g, s) > 0 or st.get("reg", g, s) >= 0})
    for g, s in used:
        lines.append("    " + ring_diagram(p, st, g, s))
    return lines


def explain(path: str | Path | dict) -> str:
    """A trace, step by step: each action with its picks, the state after it
    with a ring diagram per used slot, the checks that failed and the
    invariants that broke."""
    trace = path if isinstance(path, dict) else read_json(path)
    p = params_of(trace)
    meta = meta_of(trace)
    out = [f"trace {meta.get('source', '')}  {p.conv.label()}  bs={p.geo.block_size} W={p.geo.window} "
           f"R={p.geo.ring_len} layers={list(p.layers)}"]
    if meta.get("dropped"):
        out.append(f"dropped assumptions: {', '.join(meta['dropped'])}")
    if meta.get("violated"):
        out.append(f"violated: {', '.join(meta['violated'])}")
    out.append("ring rows: '>' ring_start, '( )' committed, tokens as <stream><position>, '.' garbage")
    st0 = states_of(trace, p)[0]
    out.append("state 0:")
    out += describe_state(p, st0)
    prev = st0
    for i, (act, outcome, diff) in enumerate(replay_actions(trace)):
        shown = _shown_picks(act["name"], checked_picks(p, act["name"], act["picks"]), prev)
        prev = outcome.state
        out.append(f"step {i + 1}: {act['name']} {shown}")
        bad = failed_checks(outcome)
        if bad:
            out.append(f"  FAILED checks: {', '.join(bad)}")
        broken = sorted({n for n, x in invariants(outcome.state) if not x})
        if broken:
            out.append(f"  BROKEN invariants: {', '.join(broken)}")
        if diff:
            out.append(f"  (replay differs from the recorded state in: {', '.join(diff)})")
        out += describe_state(p, outcome.state)
    return "\n".join(out)


def explain_counterexample(scenario: dict) -> str:
    """A ``prove`` counterexample file (``save_counterexample``'s scenario):
    the obligation, its violated parts and accesses, then the run it
    describes, drawn by :func:`explain` (from ``trace_file``, or the trace
    the scenario holds)."""
    from .obligation import render_scenario

    out = [f"counterexample of {scenario.get('obligation')}", render_scenario(scenario)]
    trace = scenario.get("trace")
    if trace is None and scenario.get("trace_file"):
        trace = read_json(scenario["trace_file"])
    if trace is not None:
        out += ["", explain(trace)]
    return "\n".join(out)


def _shown_picks(action: str, picks: Picks, st: State) -> str:
    """An action's picks as one line, leaving out the rows of requests a step
    did not run and the hit slots of columns an admission does not hit."""
    if isinstance(picks, StepPicks):
        rows = [f"r{r}: q={row.q} acc={row.acc} live_col={row.live_col} is_prefilling={row.is_prefilling} "
                f"slot={list(row.slot)} null={list(row.null)}"
                for r, row in enumerate(picks.rows) if row.sched == 1 and st.get("active", r) == 1]
        return "; ".join(rows)
    if isinstance(picks, AdmitPicks):
        hit_slots = [list(slots[:picks.hit]) for slots in picks.hit_slots]
        return (f"req={picks.req} stream={picks.stream} prompt={picks.prompt} hit={picks.hit}"
                + (f" hit_slots={hit_slots}" if picks.hit else ""))
    return " ".join(f"{k}={v}" for k, v in flat_picks(picks).items())


def trace_from_transition(t: Any, m: z3.ModelRef, violated: list[str], dropped: tuple[str, ...]) -> dict:
    """The one-step run a model of an inductive-step counterexample describes
    (``t`` is a ``verify.system_proofs.Transition``): the pre-state the model
    picks, the action with its picks, and the state after it."""
    ev = lambda x: int(m.eval(lift(x), model_completion=True).as_long()) if not isinstance(x, int) else x
    states = [{k: [ev(x) for x in vals] for k, vals in st.v.items()} for st in (t.pre, t.post)]
    actions = [{"name": t.action, "picks": picks_json(t.picks, ev)}]
    return make_trace(t.p, states, actions, source="system inductive step", violated=violated,
                      dropped=list(dropped))
