"""What every system action is made of.

An :class:`Action` declares its nondeterministic picks (a record type and
the domain of each leaf, ``spec.system.picks``),
a guard (what the model itself guarantees), the named caller assumptions it
relies on (droppable one by one in proofs) and its effect, which returns the
next state with the step's safety checks (:class:`Outcome`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .picks import PickSpec
from .state import State, SystemParams


@dataclass
class Outcome:
    """An action's result: the next state, its safety checks, and what it did."""

    state: State
    checks: list[tuple[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    """A caller action: picks, model guard, named assumptions, effect."""

    name: str
    record: type
    """The picks record (``spec.system.picks``) the other members take."""
    picks: Callable[[SystemParams], list[PickSpec]]
    guard: Callable[[State, Any], Any]
    assumptions: Callable[[State, Any], list[tuple[str, Any]]]
    apply: Callable[[State, Any], Outcome]
