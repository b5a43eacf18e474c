"""A saved launch trace read back: checked, its actions as records, the spec's states after each.

:func:`replayable` takes a trace file as :func:`replayssm.base.traces.load_trace`
read it (the format version and sizes already checked) and returns the launch
trace to run: a launch trace as it is, a system trace turned into its
launches (:mod:`.system_traces`); a ``ValueError`` names what is malformed.
"""

from __future__ import annotations

from replayssm.base.traces import Loaded

from .actions import Action, action_from_json
from .launcher import Setup, SpecSide

REPLAYABLE = ("launch", "system")
"""The kinds of trace the fuzzer's replay runs (``replayssm.base.traces.KINDS``)."""


def trace_actions(trace: dict) -> list[Action]:
    """The launch actions of a fuzzer trace (its ``actions`` in JSON), as
    records; a ``ValueError`` names the first malformed field."""
    return [action_from_json(a, f"trace.actions[{n}]") for n, a in enumerate(trace["actions"])]


def spec_states(trace: dict) -> list[dict]:
    """The spec's state buffers after each action of a trace."""
    spec = SpecSide(Setup.from_json(trace["params"]))
    states = []
    for action in trace_actions(trace):
        spec.run(action)
        states.append({k: v.tolist() for k, v in spec.state().items()})
    return states


def replayable(loaded: Loaded) -> dict:
    """The trace with launch actions a loaded trace file stands for (a
    system trace is turned into its launches), or a ``ValueError`` saying why not."""
    kind, trace = loaded
    if kind not in REPLAYABLE:
        raise ValueError(f"a {kind} trace is not a trace of launches (the fuzzer replays {' and '.join(REPLAYABLE)} "
                         "traces)")
    if not isinstance(trace.get("params"), dict) or not isinstance(trace.get("actions"), list):
        raise ValueError("not a replayable trace: it needs a params object and an actions list")
    for n, action in enumerate(trace["actions"]):
        caller = action.get("caller", []) if isinstance(action, dict) else None
        if not isinstance(caller, list) or not all(isinstance(c, str) for c in caller):
            raise ValueError(f"trace.actions[{n}] must be an object whose caller is a list of strings, got {action!r}")
    if kind == "system":
        from .system_traces import launch_trace

        trace = launch_trace(trace)
    trace_actions(trace)
    return trace
