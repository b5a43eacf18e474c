"""The caller's actions of the system model, by name, and the names of the caller assumptions they rely on.

Each action reads top to bottom in its own module: ``admit`` and ``free`` in
:mod:`.admission`, ``step`` in :mod:`.step`.
"""

from __future__ import annotations

from .action import Action
from .admission import ADMIT, FREE
from .step import STEP
from .step_assumptions import SYSTEM_ASSUMPTIONS

ACTIONS: dict[str, Action] = {a.name: a for a in (ADMIT, STEP, FREE)}


def check_dropped(dropped: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the entries of ``dropped`` that name no system
    assumption (a misspelt name would otherwise drop nothing, silently)."""
    known = {x.name for x in SYSTEM_ASSUMPTIONS}
    unknown = sorted(set(dropped) - known)
    if unknown:
        raise ValueError(f"dropped names no system assumption: {unknown}; the assumptions are "
                         f"{', '.join(sorted(known))}")
