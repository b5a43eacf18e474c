"""The engine step, top to bottom: its picks, guard, caller assumptions and effect, phase by phase.

One step schedules a row for some running requests. Per request it picks
whether it runs, its query length, accepted count, live column and
``is_prefilling`` flag, whether a prompt tail runs as a decode, per cache
group the fresh slot the pool hands out and whether the scheduler keeps a
column null, and what the pool gives each null column the row covers
before its live one; per step the batch order, a permutation of the
scheduled rows (the record ``spec.system.picks.StepPicks``, one ``RowPick``
per request and the order).

:data:`STEP` is the :class:`~.action.Action` made of, in this order, one
module each:

1. the picks' domains (``step_specs``) and each request's plan for the
   step (``RowPlan``): ``step_plan.py``;
2. the guard (``step_guard``), what the scheduler guarantees: ``step_guard.py``;
3. the caller assumptions (``step_assumptions``, every one in
   ``SYSTEM_ASSUMPTIONS``): ``step_assumptions.py``, with the blocks a step
   allocates (``covers``, ``needs_fresh_slot``, ...) in ``step_blocks.py``;
4. the effect (:func:`step_apply`, below), one function per phase in vLLM's
   order (allocation, the live-column move and the migration kernel, the
   forward pass, the postprocess kernel and compaction, FlashInfer's
   materialize, the scheduler's bookkeeping): ``step_phases.py``;
5. the worker's side of phases 2 and 4: the kernel inputs laid out from the
   state (``batch_layout``, ``kernel_buffers``) and the launches
   (``launch_grid``): ``step_kernels.py``.

Between phases the state is *checkpointed* (``State.checkpoint``: proofs
name every symbolic entry afresh, keeping Z3 terms small).
"""

from __future__ import annotations

from ..vocab import ite, negate
from .action import Action, Outcome
from .picks import StepPicks
from .state import State
from .step_assumptions import step_assumptions
from .step_guard import step_guard
from .step_kernels import batch_layout
from .step_phases import allocate, bookkeeping, forward_pass, materialize, move_live_columns, postprocess_and_compact
from .step_plan import row_plans, step_specs


def step_apply(st: State, k: StepPicks) -> Outcome:
    """One engine step: the phases of ``step_phases``, in order, each on the state the
    previous one left. ``Outcome.info`` holds the postprocess traces and the
    kernel launches (name, input snapshot, launch size)."""
    rows = row_plans(st, k)
    out = st.copy()
    allocate(st, out, k, rows)
    out = out.checkpoint("alloc")
    src_cols = [ite(row.sched, st.get("live", row.r), -1) for row in rows]
    live_cols = [ite(row.sched, row.live_col, -1) for row in rows]
    layout = batch_layout(st.p, k, rows)
    migration = move_live_columns(out, rows, layout, src_cols, live_cols)
    out = out.checkpoint("move")
    out, checks = forward_pass(out, rows)
    out = out.checkpoint("forward")
    post = postprocess_and_compact(out, rows, layout, src_cols, live_cols)
    checks += post.checks
    checks += [(name, negate(fault)) for name, fault in migration.faults + post.faults]
    out = out.checkpoint("postprocess")
    if st.p.conv.materialize_prefixes:
        checks += materialize(out, post.bufs, layout.launch)
    out = out.checkpoint("materialize")
    after = bookkeeping(out, rows)
    return Outcome(after, checks, {"traces": post.traces, "launches": [migration.launch, post.launch]})


STEP = Action("step", StepPicks, step_specs, step_guard, step_assumptions, step_apply)
