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
from typing import Any, Generic, TypeVar

from ..vocab import Cond
from .picks import PickSpec
from .state import State, SystemParams

Named = tuple[str, Cond]
"""A condition with its name: a caller assumption an action relies on, or a
safety check of its step (on ints a bool, on Z3 terms a term)."""

P = TypeVar("P")
"""An action's picks record (``AdmitPicks``, ``StepPicks``, ``FreePicks``)."""


@dataclass
class Outcome:
    """An action's result: the next state, its safety checks, and what it did."""

    state: State
    checks: list[Named]
    info: dict[str, Any] = field(default_factory=dict)
    """Free-form facts of the run, by key (``computed``; a step's ``traces``
    and ``launches``), read by reports and traces."""


@dataclass(frozen=True)
class Action(Generic[P]):
    """A caller action: picks, model guard, named assumptions, effect."""

    name: str
    record: type[P]
    """The picks record (``spec.system.picks``) the other members take."""
    picks: Callable[[SystemParams], list[PickSpec]]
    guard: Callable[[State, P], Cond]
    assumptions: Callable[[State, P], list[Named]]
    apply: Callable[[State, P], Outcome]
