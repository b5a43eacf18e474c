"""Many concrete transitions at once: the actions run on numpy lanes, one lane per transition.

The spec's actions are written in the vocabulary (``spec.vocab``), so the
same code that runs on Python ints (one state) and on Z3 terms (the proofs)
runs on numpy arrays: a state whose every entry is an array with one element
per transition, and picks whose every leaf is one. :func:`run_lanes` runs a
batch of (state, action, picks) that way, grouped by action (and, for a
step, by batch order, which the step reads as a Python tuple) and gives each
transition's verdict as the scalar run (``run.run_action``) would, or says
that it cannot vouch for it:

- ``REFUSED``: the guard or a (non-dropped) caller assumption does not hold
  (``run_action`` raises ``StepRefused``);
- a :class:`State` (its entries Python ints): the next state, every safety
  check passed;
- ``None``: run it on ints. That is every transition whose lane recorded a
  memory fault (``TableMemory``: on ints an out-of-bounds access raises
  ``MemoryFault``; on lanes it is recorded, and the effect may then differ
  from the scalar run's), whose checks do not all pass (the scalar run names
  them), and every transition of a group whose lane run raised (some Python
  control flow the lanes cannot take).

So a caller that runs every ``None`` on ints sees exactly the scalar runs'
outcomes, faults and failed checks included; the lanes only answer the
common case (refused, or every check passed) faster. The explicit explorer
(``exploration.explore``) steps a whole breadth-first depth this way.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Final

import numpy as np

from ..table_memory import collecting_faults
from .actions import ACTIONS
from .invariant import invariants
from .picks import Picks, StepPicks
from .run import checked_picks
from .state import State, SystemParams

REFUSED: Final = "refused"
""":func:`run_lanes`'s verdict for a transition whose guard or caller assumptions fail."""

Verdict = State | str | None
"""A transition's verdict: the next state, :data:`REFUSED`, or None (run it on ints)."""


def stack_states(p: SystemParams, states: list[State]) -> State:
    """One state whose every entry is an int64 array, element ``i`` that entry of ``states[i]``."""
    out: dict[str, list[Any]] = {}
    for name in p.shapes():
        matrix = np.array([s.v[name] for s in states], dtype=np.int64)
        out[name] = list(matrix.T)
    return State(p, out)


def stack_picks(records: list[Any]) -> Any:
    """One picks record whose every leaf is an int64 array, element ``i`` that leaf of ``records[i]``."""
    first = records[0]
    if is_dataclass(first) and not isinstance(first, type):
        return replace(first, **{f.name: stack_picks([getattr(r, f.name) for r in records]) for f in fields(first)})
    if isinstance(first, tuple):
        return tuple(stack_picks([r[i] for r in records]) for i in range(len(first)))
    return np.array(records, dtype=np.int64)


def _lanes(x: Any, n: int) -> np.ndarray:
    """``x`` (an array, or a constant shared by every lane) as one int per lane."""
    return np.broadcast_to(np.asarray(x, dtype=np.int64), (n,))


def _truth(x: Any, n: int) -> np.ndarray:
    """``x`` (a condition on lanes, or a constant) as one truth value per lane, as Python's ``bool`` reads an int."""
    return np.broadcast_to(np.asarray(x, dtype=bool), (n,))


def unstack_states(p: SystemParams, lanes: State, n: int, keep: np.ndarray) -> dict[int, State]:
    """The states of lanes ``keep`` (indices), their entries Python ints."""
    rows: dict[str, list[list[int]]] = {}
    for name, entries in lanes.v.items():
        matrix = np.stack([_lanes(x, n) for x in entries], axis=1) if entries else np.zeros((n, 0), np.int64)
        rows[name] = matrix[keep].astype(np.int64).tolist()
    return {int(i): State(p, {name: rows[name][j] for name in rows}) for j, i in enumerate(keep)}


def _group_key(action: str, picks: Picks) -> tuple:
    return (action, picks.order) if isinstance(picks, StepPicks) else (action,)


def run_lanes(p: SystemParams, moves: list[tuple[State, str, Picks]], dropped: tuple[str, ...] = ()) -> list[Verdict]:
    """Each move's verdict (module docstring), in order. The picks must be
    records (``run.checked_picks``'s output); ``dropped`` names assumptions
    not required, as for ``run_action``."""
    verdicts: list[Verdict] = [None] * len(moves)
    groups: dict[tuple, list[int]] = {}
    taken: dict[tuple[str, Any], bool] = {}  # a generator hands out one record to many states
    for i, (_, action, picks) in enumerate(moves):
        ok = taken.get((action, picks))
        if ok is None:
            try:  # only records the scalar run takes as they are (no JSON form, every leaf an int in its domain)
                ok = checked_picks(p, action, picks) is picks
            except ValueError:
                ok = False
            taken[(action, picks)] = ok
        if ok:
            groups.setdefault(_group_key(action, picks), []).append(i)
    for key, members in groups.items():
        try:
            found = _run_group(p, key[0], [moves[i][0] for i in members], [moves[i][2] for i in members], dropped)
        except Exception:  # noqa: BLE001 - a construct the lanes cannot run: every member runs on ints
            continue
        for i, v in zip(members, found):
            verdicts[i] = v
    return verdicts


def _run_group(p: SystemParams, action: str, states: list[State], picks: list[Picks],
               dropped: tuple[str, ...]) -> list[Verdict]:
    """The verdicts of one action's moves (one batch order, for a step)."""
    n = len(states)
    a = ACTIONS[action]
    st, pk = stack_states(p, states), stack_picks(picks)
    if isinstance(pk, StepPicks) and isinstance(picks[0], StepPicks):
        pk = StepPicks(pk.rows, picks[0].order)  # the order is one tuple of the group, not lanes
    with collecting_faults() as memories:
        allowed = _truth(a.guard(st, pk), n).copy()
        for name, holds in a.assumptions(st, pk):
            if name not in dropped:
                allowed &= _truth(holds, n)
        out = a.apply(st, pk)
    passed: np.ndarray = np.ones(n, dtype=bool)
    for _, holds in out.checks:
        passed &= _truth(holds, n)
    faulty: np.ndarray = np.zeros(n, dtype=bool)
    for mem in memories:
        for _, fault in mem.faults:
            faulty |= _truth(fault, n)
    trusted = ~faulty
    verdicts: list[Verdict] = [None] * n
    for lane in np.flatnonzero(trusted & ~allowed).tolist():
        verdicts[lane] = REFUSED
    for lane, state in unstack_states(p, out.state, n, np.flatnonzero(trusted & allowed & passed)).items():
        verdicts[lane] = state
    return verdicts


def failed_invariants(p: SystemParams, states: list[State]) -> list[list[str] | None]:
    """For each of ``states``, the names of the invariants (``invariant.invariants``)
    it violates, sorted and each once, as on ints; None for every state when the
    lanes cannot evaluate them (run them on ints)."""
    if not states:
        return []
    n = len(states)
    try:
        with collecting_faults() as memories:
            parts = invariants(stack_states(p, states))
        if any(mem.faults for mem in memories):
            return [None] * n
        failing = [(name, ~_truth(holds, n)) for name, holds in parts]
    except Exception:  # noqa: BLE001 - a construct the lanes cannot run: every state on ints
        return [None] * n
    names = sorted({name for name, bad in failing if bad.any()})
    by_name: dict[str, np.ndarray] = {name: np.zeros(n, dtype=bool) for name in names}
    for name, bad in failing:
        if name in by_name:
            by_name[name] |= bad
    return [[name for name in names if by_name[name][i]] for i in range(n)]
