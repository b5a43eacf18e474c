"""What every system action is made of, and the caller assumptions they name.

An :class:`Action` declares its nondeterministic picks (:class:`PickSpec`),
a guard (what the model itself guarantees), the named caller assumptions it
relies on (droppable one by one in proofs) and its effect, which returns the
next state with the step's safety checks (:class:`Outcome`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..assumptions import (
    ACCEPTED_WITHIN_ROW,
    DECODE_ROW_FITS,
    DECODE_WITHIN_BLOCK,
    FRESH_DISTINCT_DESTINATIONS,
    FRESH_SLOT_IS_FREE,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    LIVE_COL_IS_LAST_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    ROW_NONEMPTY,
)
from .state import State, SystemParams

SYSTEM_ASSUMPTIONS = [
    LIVE_COL_IS_LAST_BLOCK,
    DECODE_ROW_FITS,
    ACCEPTED_WITHIN_ROW,
    ROW_NONEMPTY,
    DECODE_WITHIN_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    FRESH_DISTINCT_DESTINATIONS,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    FRESH_SLOT_IS_FREE,
]
"""Every caller assumption the system actions name."""


def check_dropped(dropped: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the entries of ``dropped`` that name no system
    assumption (a misspelt name would otherwise drop nothing, silently)."""
    known = {x.name for x in SYSTEM_ASSUMPTIONS}
    unknown = sorted(set(dropped) - known)
    if unknown:
        raise ValueError(f"dropped names no system assumption: {unknown}; the assumptions are "
                         f"{', '.join(sorted(known))}")


@dataclass(frozen=True)
class PickSpec:
    """One nondeterministic choice of an action, with its domain ``[lo, hi]``."""

    name: str
    lo: int
    hi: int


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
    picks: Callable[[SystemParams], list[PickSpec]]
    guard: Callable[[State, dict], Any]
    assumptions: Callable[[State, dict], list[tuple[str, Any]]]
    apply: Callable[[State, dict], Outcome]


def int_flag(x: Any) -> Any:
    """An int flag as a vocabulary boolean."""
    return x != 0
