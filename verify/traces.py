"""Counterexamples and runs as ITF-like JSON traces, replayable and explainable.

A trace is ``{"#meta": {...}, "params": {...}, "states": [...], "actions":
[...]}``: ``states[0]`` is the initial state and ``states[i + 1]`` the state
after ``actions[i]``; each action records its ``name`` and every
nondeterministic ``picks`` value, so :func:`replay_actions` re-runs it on the
concrete model (or, later, on an implementation) and :func:`explain` prints
it step by step with a diagram of each slot's ring.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import z3

from replayssm.fuzz.trace_checks import TRACE_FORMAT, TRACE_MAJOR, check_format
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.system import (
    GARBAGE,
    AdmitPicks,
    Outcome,
    Picks,
    StepPicks,
    State,
    SystemParams,
    checked_picks,
    failed_checks,
    flat_picks,
    initial_state,
    invariants,
    picks_json,
    run_action,
)

from .terms import lift

FORMAT = f"{TRACE_FORMAT}/{TRACE_MAJOR}"
"""``#meta.format`` of the system traces written here (picks as nested records
since major 2; a trace of another major is rejected, naming it)."""


def params_json(p: SystemParams) -> dict:
    g, c = p.geo, p.conv
    return {"geometry": {"max_num_reqs": g.max_num_reqs, "block_size": g.block_size, "window": g.window,
                         "ring_len": g.ring_len, "pad_slot": g.pad_slot},
            "conventions": {"cumulative": c.cumulative, "post_step": c.post_step,
                            "has_idx_mapping": c.has_idx_mapping, "materialize_prefixes": c.materialize_prefixes,
                            "live_col_is_zero": c.live_col_is_zero},
            "layers": list(p.layers), "num_cols": p.num_cols, "num_slots": p.num_slots,
            "num_streams": p.num_streams, "swap_rows": p.swap_rows, "max_model_len": p.max_model_len}


_GEOMETRY_FIELDS = ("max_num_reqs", "block_size", "window", "ring_len")
_CONVENTION_FIELDS = ("cumulative", "post_step", "has_idx_mapping", "materialize_prefixes", "live_col_is_zero")
_PARAM_FIELDS = ("geometry", "conventions", "layers", "num_cols", "num_slots", "num_streams", "swap_rows")


def _fields(d: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """``d`` as an object with exactly these fields, or a ``ValueError`` naming the bad one."""
    if not isinstance(d, dict):
        raise ValueError(f"{where} must be an object with fields {', '.join(required + optional)}, "
                         f"got {type(d).__name__}")
    missing = [k for k in required if k not in d]
    if missing:
        raise ValueError(f"{where}.{missing[0]} is missing (required: {', '.join(required)})")
    unknown = [k for k in d if k not in required + optional]
    if unknown:
        raise ValueError(f"{where}.{unknown[0]} is not a field (allowed: {', '.join(required + optional)})")
    return d


def params_from_json(d: dict) -> SystemParams:
    """The :class:`SystemParams` a trace's ``params`` describe; malformed
    params are a ``ValueError`` naming the field (``params.geometry.window
    must be in [1, 16], got 0``)."""
    d = _fields(d, "params", _PARAM_FIELDS, ("max_model_len",))
    geo = _fields(d["geometry"], "params.geometry", _GEOMETRY_FIELDS, ("pad_slot",))
    conv = _fields(d["conventions"], "params.conventions", _CONVENTION_FIELDS)
    for name in _CONVENTION_FIELDS:
        if not isinstance(conv[name], bool):
            raise ValueError(f"params.conventions.{name} must be true or false, got {conv[name]!r}")
    if not isinstance(d["layers"], list):
        raise ValueError(f"params.layers must be a list of layer counts >= 1, got {d['layers']!r}")
    try:
        return SystemParams(Geometry(**geo), Conventions(**conv), tuple(d["layers"]), d["num_cols"], d["num_slots"],
                            d["num_streams"], d["swap_rows"], d.get("max_model_len"))
    except ValueError as e:
        msg = str(e)
        raise ValueError("params." + ("geometry." + msg[4:] if msg.startswith("geo.") else msg)) from None


def state_from_json(p: SystemParams, d: Any, where: str) -> State:
    """A recorded state; one missing, unknown or misshapen variable is a ``ValueError`` naming it."""
    shapes = p.shapes()
    d = _fields(d, where, tuple(shapes))
    for name, shape in shapes.items():
        vals, n = d[name], 1
        for dim in shape:
            n *= dim
        if not isinstance(vals, list) or len(vals) != n or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in vals):
            raise ValueError(f"{where}.{name} must be a list of {n} ints (shape {shape}), got {vals!r}")
    return State(p, {k: list(v) for k, v in d.items()})


def _trace_params(trace: Any) -> SystemParams:
    if not isinstance(trace, dict) or "params" not in trace:
        raise ValueError("a trace is an object with params, states and actions; this one has no params")
    return params_from_json(trace["params"])


def _states(trace: dict, p: SystemParams) -> list[State]:
    """The recorded states, each checked variable by variable (the first is
    the initial state, the others are compared after each action)."""
    states = trace.get("states")
    if not isinstance(states, list) or not states:
        raise ValueError("trace.states must be a non-empty list of states")
    return [state_from_json(p, s, f"trace.states[{i}]") for i, s in enumerate(states)]


def _meta(trace: dict) -> dict:
    meta = trace.get("#meta", {})
    if not isinstance(meta, dict):
        raise ValueError(f"trace.#meta must be an object, got {meta!r}")
    check_format(meta, "system")
    return meta


def _actions(trace: dict) -> list[dict]:
    """The trace's actions, each ``{"name": str, "picks": {...}}`` (the picks
    record's JSON form, ``spec.system.picks``: every leaf an int), or a
    ``ValueError`` naming the malformed entry."""
    actions = trace.get("actions")
    if not isinstance(actions, list):
        raise ValueError("trace.actions must be a list of actions")
    for i, act in enumerate(actions):
        if not isinstance(act, dict) or not isinstance(act.get("name"), str) or not isinstance(act.get("picks"), dict):
            raise ValueError(f"trace.actions[{i}] must be an object with a name string and a picks object, got {act!r}")
        for k, v in flat_picks(act["picks"]).items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"trace.actions[{i}].picks.{k} must be an int, got {v!r}")
    return actions


def make_trace(p: SystemParams, states: list[dict], actions: list[dict], **meta: Any) -> dict:
    return {"#meta": {"format": FORMAT, **meta}, "params": params_json(p), "states": states, "actions": actions}


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


def record_run(p: SystemParams, steps: list[tuple[str, Picks | dict]], *, checked: bool = True, **meta: Any) -> dict:
    """Run ``steps`` on the concrete model and record them as a trace
    (``checked=False`` records runs whose picks break a caller assumption)."""
    st = initial_state(p)
    states, actions = [st.as_json()], []
    for name, picks in steps:
        picks = checked_picks(p, name, picks)
        out = run_action(st, name, picks, check_assumptions=checked)
        st = out.state
        states.append(st.as_json())
        actions.append({"name": name, "picks": picks_json(picks)})
    meta.setdefault("source", "record_run")
    return make_trace(p, states, actions, **meta)


def load(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def save(trace: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace, indent=1))
    return path


def replay_actions(trace: dict, *, check_assumptions: bool = False) -> Iterator[tuple[dict, Outcome, list[str]]]:
    """Re-run a trace's actions on the concrete model from its initial state;
    yields (action, outcome, mismatching variables against the recorded state).
    Assumptions are not re-checked by default: a counterexample found with an
    assumption dropped must replay."""
    p = _trace_params(trace)
    states = _states(trace, p)
    st = states[0]
    dropped = tuple(_meta(trace).get("dropped", ()))
    for i, act in enumerate(_actions(trace)):
        out = run_action(st, act["name"], act["picks"], check_assumptions=check_assumptions, dropped=dropped)
        recorded = states[i + 1].as_json() if i + 1 < len(states) else None
        diff = [] if recorded is None else [k for k, v in out.state.as_json().items() if recorded[k] != v]
        yield act, out, diff
        st = out.state


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
    trace = path if isinstance(path, dict) else load(path)
    p = _trace_params(trace)
    meta = _meta(trace)
    out = [f"trace {meta.get('source', '')}  {p.conv.label()}  bs={p.geo.block_size} W={p.geo.window} "
           f"R={p.geo.ring_len} layers={list(p.layers)}"]
    if meta.get("dropped"):
        out.append(f"dropped assumptions: {', '.join(meta['dropped'])}")
    if meta.get("violated"):
        out.append(f"violated: {', '.join(meta['violated'])}")
    out.append("ring rows: '>' ring_start, '( )' committed, tokens as <stream><position>, '.' garbage")
    st0 = _states(trace, p)[0]
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
        trace = load(scenario["trace_file"])
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
