"""System traces: runs of the system model as ITF-like JSON, read, written and re-run.

A system trace is ``{"#meta": {...}, "params": {...}, "states": [...],
"actions": [...]}``: ``states[0]`` is the initial state and ``states[i + 1]``
the state after ``actions[i]``; each action records its ``name`` and every
nondeterministic ``picks`` value, so :func:`replay_actions` re-runs it on the
concrete model. Proofs write them (``verify.traces``), ``explain`` draws them,
and the fuzzer turns them into launches (``fuzz.system_traces``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.system import (
    Outcome,
    Picks,
    State,
    SystemParams,
    checked_picks,
    flat_picks,
    initial_state,
    picks_json,
    run_action,
)

from .traces import TRACE_ID, check_format, check_sizes

FORMAT = TRACE_ID
"""``#meta.format`` of the system traces written here (picks as nested records
since major 2; a trace of another major is rejected, naming it)."""


def params_json(p: SystemParams) -> dict:
    """``p`` as a trace's ``params`` (``cache_mode`` only where it is not the
    one the conventions serve by default: a trace of mode none or align reads
    as before)."""
    g, c = p.geo, p.conv
    out = {"geometry": {"max_num_reqs": g.max_num_reqs, "block_size": g.block_size, "window": g.window,
                         "ring_len": g.ring_len, "pad_slot": g.pad_slot},
            "conventions": {"cumulative": c.cumulative, "post_step": c.post_step,
                            "has_idx_mapping": c.has_idx_mapping, "materialize_prefixes": c.materialize_prefixes,
                            "live_col_is_zero": c.live_col_is_zero},
            "layers": list(p.layers), "num_cols": p.num_cols, "num_slots": p.num_slots,
            "num_streams": p.num_streams, "max_model_len": p.max_model_len}
    if p.mode != c.mode:
        out["cache_mode"] = p.mode
    return out


_GEOMETRY_FIELDS = ("max_num_reqs", "block_size", "window", "ring_len")
_CONVENTION_FIELDS = ("cumulative", "post_step", "has_idx_mapping", "materialize_prefixes", "live_col_is_zero")
_PARAM_FIELDS = ("geometry", "conventions", "layers", "num_cols", "num_slots", "num_streams")

RETIRED_PARAMS = {
    "swap_rows": "the batch order is no longer a world parameter: each step picks its own "
                 "(picks.order, a permutation of the requests); record the trace again with this version",
}
"""Params earlier versions wrote whose meaning moved elsewhere: a trace naming one is refused, saying where."""


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
    """The :class:`SystemParams` a trace's ``params`` describe; malformed or
    too large params are a ``ValueError`` naming the field
    (``params.geometry.window must be in [1, 16], got 0``; a retired field,
    :data:`RETIRED_PARAMS`, says where its meaning went)."""
    for name, why in RETIRED_PARAMS.items():
        if isinstance(d, dict) and name in d:
            raise ValueError(f"params.{name} is no longer a field: {why}")
    d = _fields(d, "params", _PARAM_FIELDS, ("max_model_len", "cache_mode"))
    geo = _fields(d["geometry"], "params.geometry", _GEOMETRY_FIELDS, ("pad_slot",))
    conv = _fields(d["conventions"], "params.conventions", _CONVENTION_FIELDS)
    for name in _CONVENTION_FIELDS:
        if not isinstance(conv[name], bool):
            raise ValueError(f"params.conventions.{name} must be true or false, got {conv[name]!r}")
    if not isinstance(d["layers"], list):
        raise ValueError(f"params.layers must be a list of layer counts >= 1, got {d['layers']!r}")
    try:
        p = SystemParams(Geometry(**geo), Conventions(**conv), tuple(d["layers"]), d["num_cols"], d["num_slots"],
                         d["num_streams"], d.get("max_model_len"), d.get("cache_mode"))
    except ValueError as e:
        msg = str(e)
        raise ValueError("params." + ("geometry." + msg[4:] if msg.startswith("geo.") else msg)) from None
    check_sizes(d)  # the model's own bounds first (they name the tighter range), then what a machine can hold
    return p


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


def params_of(trace: Any) -> SystemParams:
    if not isinstance(trace, dict) or "params" not in trace:
        raise ValueError("a trace is an object with params, states and actions; this one has no params")
    return params_from_json(trace["params"])


def states_of(trace: dict, p: SystemParams) -> list[State]:
    """The recorded states, each checked variable by variable (the first is
    the initial state, the others are compared after each action)."""
    states = trace.get("states")
    if not isinstance(states, list) or not states:
        raise ValueError("trace.states must be a non-empty list of states")
    return [state_from_json(p, s, f"trace.states[{i}]") for i, s in enumerate(states)]


def meta_of(trace: dict) -> dict:
    meta = trace.get("#meta", {})
    if not isinstance(meta, dict):
        raise ValueError(f"trace.#meta must be an object, got {meta!r}")
    check_format(meta, "system")
    return meta


def actions_of(trace: dict) -> list[dict]:
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


def record_run(p: SystemParams, steps: Sequence[tuple[str, Picks | dict]], *, checked: bool = True, **meta: Any) -> dict:
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


def replay_actions(trace: dict, *, check_assumptions: bool = False) -> Iterator[tuple[dict, Outcome, list[str]]]:
    """Re-run a trace's actions on the concrete model from its initial state;
    yields (action, outcome, mismatching variables against the recorded state).
    Assumptions are not re-checked by default: a counterexample found with an
    assumption dropped must replay."""
    p = params_of(trace)
    states = states_of(trace, p)
    st = states[0]
    dropped = tuple(meta_of(trace).get("dropped", ()))
    for i, act in enumerate(actions_of(trace)):
        out = run_action(st, act["name"], act["picks"], check_assumptions=check_assumptions, dropped=dropped)
        recorded = states[i + 1].as_json() if i + 1 < len(states) else None
        diff = [] if recorded is None else [k for k, v in out.state.as_json().items() if recorded[k] != v]
        yield act, out, diff
        st = out.state


