"""Findings: caller shapes of vLLM under which the system model breaks an invariant.

A finding is a world and a run (or an inductive step shape) in it whose
counterexample is a fact about vLLM's kernels under that caller, not a gap
in the proofs: the obligations do not run its world (``prove`` proves the
model's own worlds), ``tests/verify/test_system_findings.py`` checks that
each one still fails with the invariant it names (and that the world beside
it, which differs only in what the host publishes, proves), and
``scripts/assumption_traces.py`` saves its trace under ``docs/traces/`` and
renders it in ``docs/assumption_traces.md``. ``docs/assumptions.md`` ("Cache
modes") says what each means for vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from .bmc import explicit_bmc
from .obligation import first_violation
from .system_proofs import preservation_claim, selecting
from .system_steps import StepCase, case_transition, prefill_row
from .system_world import UNPUBLISHED_ALL, world_params
from .terms import lift
from .traces import trace_from_transition


@dataclass(frozen=True)
class SystemFinding:
    """Where a finding shows: a world of :data:`~.system_world.UNPUBLISHED_ALL`,
    the invariant it breaks, and either an inductive step shape (``case``)
    or, with ``case`` None, the explicit bounded model check from the
    initial state to ``depth``."""

    name: str
    world: str
    invariant: str
    what: str
    case: StepCase | None = None
    depth: int = 3


FINDINGS: dict[str, SystemFinding] = {f.name: f for f in [
    SystemFinding("all_mode_unpublished.decode_fills_block", "v2-all-unpublished", "canonical",
            "all mode under the reference's host: a decode that fills its live block leaves it holding a replay "
            "ring (no publish with MATERIALIZE_PREFIXES off), and the prefix cache registers it as the boundary"),
    SystemFinding("all_mode_unpublished.prefill_covers_block", "v2-all-unpublished", "canonical",
            "all mode under the reference's host: a prefill chunk over two blocks writes the boundary state into "
            "the first, but the mode-none reset clears only the live slot's trackers, so the registered block "
            "keeps the trackers its previous owner left",
            StepCase((prefill_row(0, -1, 1),))),
]}
"""Every finding, by name."""


def finding_trace(f: SystemFinding) -> dict[str, Any] | None:
    """``f``'s counterexample as a system trace (None if its world proves there)."""
    if f.world not in UNPUBLISHED_ALL:
        raise ValueError(f"{f.name}: {f.world!r} is not a world of UNPUBLISHED_ALL ({', '.join(UNPUBLISHED_ALL)})")
    if f.case is None:
        from replayssm.base.system_traces import record_run

        p, r = explicit_bmc(f.world, depth=f.depth)
        if r["status"] != "failed":
            return None
        return record_run(p, r["run"], source=f"finding {f.name}", violated=r["violated"], checked=False)
    from replayssm.spec.system import INVARIANTS

    t = case_transition(world_params(f.world), f.case)
    inv = next(i for i in INVARIANTS if i.name == f.invariant)
    claim = preservation_claim(t, f.name, selecting(inv))
    m = first_violation(claim)
    if m is None:
        return None
    violated = [str(n) for n, g in claim.goal if not z3.is_true(m.eval(lift(g), model_completion=True))]
    return trace_from_transition(t, m, violated, ())
