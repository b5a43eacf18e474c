"""The caller's actions of the system model, by name."""

from __future__ import annotations

from .action import Action
from .admission import ADMIT, FREE
from .phases import step_apply
from .picks import StepPicks, step_specs
from .step import step_assumptions, step_guard

STEP = Action("step", StepPicks, step_specs, step_guard, step_assumptions, step_apply)
ACTIONS: dict[str, Action] = {a.name: a for a in (ADMIT, STEP, FREE)}
