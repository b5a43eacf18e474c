"""Running one action on a concrete state, with its picks checked."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, overload

from ..geometry import Conventions, require_int
from .action import Action, Outcome
from .picks import AdmitPicks, FreePicks, Picks, PickSpec, StepPicks, flat_picks, leaf_values, picks_from_flat
from .actions import ACTIONS, check_dropped
from .state import State, SystemParams


class StepRefused(ValueError):
    """An action whose guard or assumptions do not hold in this state."""


def _action(name: str) -> Action:
    """The action called ``name``; an unknown name is a ``ValueError`` naming the known ones."""
    if name not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {name!r}")
    return ACTIONS[name]


@lru_cache(maxsize=None)
def _pick_specs(p: SystemParams, action: str) -> dict[str, PickSpec]:
    return {s.name: s for s in _action(action).picks(p)}


def checked_picks(p: SystemParams, action: str, picks: Picks | dict) -> Picks:
    """``picks`` as ``action``'s record, its leaves checked and the missing
    ones filled in with their fallback (``PickSpec.fallback``: the domain's
    low end; a step's batch order lists the requests by index). ``picks`` is a record or its
    JSON form (``spec.system.picks.picks_json``, possibly partial). A path
    the action does not declare (a misspelt pick would otherwise be ignored
    silently), a value that is not an int or lies outside the pick's domain
    ``[lo, hi]`` (the guard would refuse it without naming the pick) is a
    ``ValueError`` naming it; so is a step's batch order that is not a
    permutation of the requests, and an unknown action."""
    a = _action(action)
    specs = _pick_specs(p, action)
    if isinstance(picks, a.record):
        leaves = leaf_values(picks)
        if len(leaves) == len(specs) and all(type(v) is int and s.lo <= v <= s.hi
                                             for v, s in zip(leaves, specs.values())):
            return picks  # the generators' records: checked without rebuilding them
    if not isinstance(picks, (dict, a.record)):
        raise ValueError(f"{action}: picks must be a {a.record.__name__} or its JSON form, got {type(picks).__name__}")
    given = flat_picks(picks)
    unknown = [k for k in given if k not in specs]
    if unknown:
        raise ValueError(f"{action}: unknown pick{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; the picks of {action} are {', '.join(specs)}")
    for name, value in given.items():
        require_int(f"{action}: pick {name}", value, specs[name].lo, specs[name].hi)
    record = picks_from_flat(a.record, {**{name: s.fallback for name, s in specs.items()}, **given})
    if isinstance(record, StepPicks) and sorted(record.order) != list(range(p.num_reqs)):
        raise ValueError(f"{action}: pick order must be a permutation of the requests 0..{p.num_reqs - 1} "
                         f"(the batch order), got {list(record.order)}")
    return record


@overload
def default_picks(p: SystemParams, action: Literal["admit"], **given: int) -> AdmitPicks: ...
@overload
def default_picks(p: SystemParams, action: Literal["step"], **given: int) -> StepPicks: ...
@overload
def default_picks(p: SystemParams, action: Literal["free"], **given: int) -> FreePicks: ...
@overload
def default_picks(p: SystemParams, action: str, **given: int) -> Picks: ...


def default_picks(p: SystemParams, action: str, **given: int) -> Picks:
    """Every pick of ``action`` (its record: ``AdmitPicks`` for ``"admit"``, ...) (defaults filled in; ``given`` by top-level
    field), for hand-written runs."""
    return checked_picks(p, action, given)


def run_action(st: State, action: str, picks: Picks | dict, *, check_assumptions: bool = True,
               dropped: tuple[str, ...] = ()) -> Outcome:
    """Run one action on a concrete state; refuses it (``StepRefused``) when its
    guard or a (non-dropped) assumption fails. An unknown action, pick name or
    dropped assumption is a ``ValueError`` (see :func:`checked_picks`). Failed safety checks come
    back in ``Outcome.checks`` (see :func:`failed_checks`); only a concrete
    out-of-bounds access raises (``MemoryFault``)."""
    a = _action(action)
    picks = checked_picks(st.p, action, picks)
    check_dropped(dropped)
    if not a.guard(st, picks):
        raise StepRefused(f"{action}: guard does not hold for {picks}")
    if check_assumptions:
        bad = sorted({n for n, t in a.assumptions(st, picks) if n not in dropped and not t})
        if bad:
            raise StepRefused(f"{action}: caller assumptions violated: {', '.join(bad)}")
    return a.apply(st, picks)


def failed_checks(outcome: Outcome) -> list[str]:
    return sorted({n for n, t in outcome.checks if not t})


def system_conventions() -> list[Conventions]:
    """The conventions a caller can combine: align mode always passes live columns."""
    return [c for c in Conventions.all() if not (c.materialize_prefixes and c.live_col_is_zero)]
