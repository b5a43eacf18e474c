"""A failed claim's counterexample: the scenario a Z3 model shows, as text and as files.

:func:`scenario` turns a model of ``assumptions and not goal`` into a plain
record (the violated parts, the shown values, the accesses, the run);
:func:`render_scenario` prints it for a kernel engineer and
:func:`save_counterexample` writes it (``replayssm-counterexample/1``) with
its system trace beside it, for ``explain`` and ``replay``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import z3

from replayssm.base.traces import COUNTEREXAMPLE_ID

from .terms import Symbolic, lift

if TYPE_CHECKING:
    from .obligation import Claim, Result


def _value(model: z3.ModelRef, term: Symbolic) -> int | bool | str:
    """``term``'s value in ``model``: an int, a bool, or its text."""
    v = model.eval(lift(term), model_completion=True)
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    return str(v)


def scenario(claim: Claim, model: z3.ModelRef) -> dict:
    """What a counterexample model of ``claim`` shows: its case, the goal
    parts it violates, the shown values, each spec access its guard lets
    run (with its buffer's extent), and the run as a system trace when the
    claim knows one or can build it."""
    values = {k: _value(model, t) for k, t in claim.show.items()}
    violated = [n() if callable(n) else n for n, t in claim.goal if _value(model, t) is not True]
    accesses = []
    for mem in claim.memories:
        for a in mem.accesses:
            if a.loop_vars:
                continue
            if _value(model, a.guard) is not True:
                continue
            accesses.append(
                {
                    "program": a.program,
                    "kind": a.kind,
                    "buffer": a.buffer,
                    "index": [_value(model, i) for i in a.index],
                    "value": _value(model, a.value),
                    "shape": [_value(model, n) for n in mem.shapes[a.buffer]],
                }
            )
    out = {"case": claim.case, "violated": violated, "values": values, "accesses": accesses}
    if claim.trace is not None:
        out["trace"] = claim.trace
    elif claim.trace_of is not None:
        out["trace"] = claim.trace_of(model, violated)
    return out


def _outside(index: list, shape: list) -> bool:
    return any(isinstance(i, int) and isinstance(n, int) and not 0 <= i < n for i, n in zip(index, shape))


def render_scenario(scenario: dict) -> str:
    """A counterexample as text a kernel engineer can read: the violated
    parts, the values (left out when the scenario has a system trace, which
    ``explain`` draws instead), and each access with its buffer's extent."""
    lines = [f"  case: {scenario['case']}"] if scenario.get("case") else []
    lines += [f"  violated: {v}" for v in scenario.get("violated", [])]
    if "trace" in scenario or "trace_file" in scenario:
        lines.append(f"  ({len(scenario['values'])} state values left out: the run is drawn by explain)")
    else:
        for k, v in scenario["values"].items():
            lines.append(f"  {k} = {v}")
    for a in scenario["accesses"]:
        idx = ", ".join(str(i) for i in a["index"])
        arrow = {"read": "->", "write": "<-"}.get(a["kind"], "@")
        value = "" if a.get("value") is None else f" {arrow} {a['value']}"
        line = f"  [{a['program']}] {a['buffer']}[{idx}]{value if arrow != '@' else ''}"
        if "shape" in a:
            extent = " x ".join(str(n) for n in a["shape"])
            line += f"   ({a['buffer']} is {extent}{': OUT OF BOUNDS' if _outside(a['index'], a['shape']) else ''})"
        lines.append(line)
    return "\n".join(lines)


def save_counterexample(result: Result, folder: Path) -> list[Path]:
    """Write a failed result's scenario as JSON, and its system trace (if it
    has one) beside it as ``<name>.trace.json`` for ``explain``/``replay``;
    returns the files written, the scenario's first."""
    folder.mkdir(parents=True, exist_ok=True)
    scenario = dict(result.counterexample or {})
    trace = scenario.pop("trace", None)
    written = [folder / f"{result.name}.json"]
    if trace is not None:
        written.append(folder / f"{result.name}.trace.json")
        written[1].write_text(json.dumps(trace, indent=1))
        scenario["trace_file"] = str(written[1])
    written[0].write_text(json.dumps({"schema": COUNTEREXAMPLE_ID, "obligation": result.name,
                                      "assumptions": result.assumptions, **scenario}, indent=2))
    return written
