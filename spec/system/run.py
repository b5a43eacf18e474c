"""Running one action on a concrete state, with its picks checked."""

from __future__ import annotations

from functools import lru_cache

from ..geometry import Conventions, require_int
from .action import Action, Outcome, PickSpec, check_dropped
from .actions import ACTIONS
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


def checked_picks(p: SystemParams, action: str, picks: dict) -> dict:
    """``picks`` over every pick of ``action`` (defaults filled in). A name the
    action does not declare (a misspelt pick would otherwise be ignored
    silently), a value that is not an int or lies outside the pick's domain
    ``[lo, hi]`` (the guard would refuse it without naming the pick) is a
    ``ValueError`` naming it; so is an unknown action."""
    specs = _pick_specs(p, action)
    unknown = [k for k in picks if k not in specs]
    if unknown:
        raise ValueError(f"{action}: unknown pick{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; the picks of {action} are {', '.join(specs)}")
    for name, value in picks.items():
        require_int(f"{action}: pick {name}", value, specs[name].lo, specs[name].hi)
    return {**{name: s.lo for name, s in specs.items()}, **picks}


def default_picks(p: SystemParams, action: str, **given: int) -> dict:
    """Every pick of ``action`` (defaults filled in), for hand-written runs."""
    return checked_picks(p, action, given)


def run_action(st: State, action: str, picks: dict, *, check_assumptions: bool = True,
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
