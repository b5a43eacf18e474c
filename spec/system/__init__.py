"""The whole-system model: scheduler, forward pass and worker kernels together.

One :class:`SystemParams` fixes a bounded world (requests, cache groups with
their layer counts, block-table columns, physical slots per group, token
streams, the kernel geometry and the caller's conventions). A state is a flat
record of integer variables (:class:`State`); every value is a vocabulary
value, so the same actions run on Python ints (the concrete simulation the
fuzzer drives) and on Z3 ``Sym`` terms (the proofs and the bounded model check).

Concrete state (what vLLM holds):

* per request ``r``: ``active``, ``stream`` (token-stream identity), ``prompt``
  (prompt length), ``N`` (computed position), ``live`` (the live column of its
  last step, -1 when none: the next migration's source column);
* ``table[g, r, c]``: physical slot of column ``c`` in cache group ``g``
  (0 = the null block);
* ``rs[g, s]``, ``nc[g, s]``: the trackers (``ring_start``, ``num_committed``);
* ``ref[g, s]`` (how many table entries name the slot) and ``reg[g, s]`` (the
  prefix the scheduler's prefix cache believes the slot holds, -1 none): the
  scheduler's block pool;
* the worker's persistent plan buffers (``plan_ring_start``,
  ``plan_flush_count``, ``active_request_indices``, ``src_slots``, ``dst_slots``).

Ghost state (what the slots *mean*), for every slot of every group:

* ``ck[g, s]``: the prefix its checkpoint state represents, as ``code(stream,
  P) = stream * K + P`` (the state after tokens ``0..P-1`` of that stream), or
  -1 for garbage;
* ``ring[g, s, i]``: which token ring row ``i`` holds, ``code(stream, t)``, or
  -1 (a rejected draft, never written, or garbage).

A slot *represents* ``(stream, N)`` when its checkpoint is ``code(stream, N -
nc)`` and its ``nc`` committed rows from ``rs`` hold tokens ``N - nc .. N - 1``:
replaying them gives exactly the request's state. A registered (published)
slot is *canonical*: trackers (0, 0) and checkpoint exactly at its boundary.

Actions (:data:`ACTIONS`) are the caller's: ``admit`` (with a prefix-cache hit
on published blocks), ``step`` (one engine step for every running request,
phase by phase) and ``free`` (finish or preempt); each reads top to bottom in
one module (:mod:`.admission`, :mod:`.step`). Each
action declares its nondeterministic *picks*, a *guard* (what the model
itself guarantees), the named caller *assumptions* it relies on (droppable one
by one in proofs), and returns the next state plus *checks*: safety conditions
of that step (no memory fault, the forward pass reads the right prefix, the
materialize contract, ...). The kernels are never re-implemented: the step's
worker side runs the spec's kernel programs on inputs laid out by
``spec.assumptions.encode_row``, in a ``spec.table_memory.TableMemory``.

Modules: :mod:`.state` (world and state), :mod:`.action` (what an action is
made of), :mod:`.admission` (admit and free, each top to bottom),
:mod:`.step` (the step top to bottom: picks, guard, assumptions, its effect
phase by phase, the kernel inputs and launches), :mod:`.ghost` (what a slot
represents), :mod:`.invariant`, :mod:`.actions` (the registry by name, and
the dropped assumptions' names checked), :mod:`.picks` (each action's choices
as a typed record),
:mod:`.run` (one concrete action), :mod:`.rows` (the one
definition of the rows a request may take, which the fuzzer uses too),
:mod:`.exploration` (the pick generators and the explicit-state explorer). The symbolic-array helpers are
``spec.arrays``.
"""

from ..arrays import lookup, select, update
from ..table_memory import TableMemory
from .action import Action, Named, Outcome
from .actions import ACTIONS, check_dropped
from .admission import ADMIT, FREE
from .exploration import (
    Exploration,
    covered_nulls,
    enumerate_picks,
    explore,
    prefix_hit_levels,
    row_options,
    row_pick,
    row_rule,
    sample_picks,
    shares_a_block,
)
from .ghost import replay, represents
from .invariant import (
    AUXILIARY,
    CANONICAL,
    GROUPS_AGREE,
    INVARIANTS,
    NO_TOKEN_DROPPED,
    RANGE,
    REFINEMENT,
    Invariant,
    auxiliary_invariants,
    check_invariants,
    invariants,
    live_slot,
)
from .picks import (
    AdmitPicks,
    FreePicks,
    Picks,
    PickSpec,
    RowPick,
    StepPicks,
    flat_picks,
    idle_row,
    picks_from_flat,
    picks_json,
    step_of,
)
from .rows import RowOption, RowRule
from .run import StepRefused, checked_picks, default_picks, failed_checks, run_action, system_conventions
from .state import GARBAGE, WORKER_BUFFERS, State, SystemParams, code, initial_state
from .step import STEP, step_apply
from .step_assumptions import SYSTEM_ASSUMPTIONS, step_assumptions
from .step_blocks import needs_fresh_slot, shared_block
from .step_guard import step_guard
from .step_kernels import ahead_in_order
from .step_phases import PUBLISH_IN_EVERY_GROUP, register_filled_blocks
from .step_plan import RowPlan, runs_prefill

__all__ = [
    "ACTIONS", "ADMIT", "AUXILIARY", "CANONICAL", "FREE", "GARBAGE", "GROUPS_AGREE", "INVARIANTS",
    "NO_TOKEN_DROPPED", "PUBLISH_IN_EVERY_GROUP", "RANGE", "REFINEMENT", "STEP", "SYSTEM_ASSUMPTIONS", "Action",
    "AdmitPicks", "Exploration", "FreePicks", "Invariant", "Named", "Outcome", "PickSpec", "Picks", "RowOption", "RowPick", "RowPlan",
    "RowRule", "State", "StepPicks", "StepRefused", "SystemParams", "TableMemory", "ahead_in_order", "auxiliary_invariants",
    "check_dropped", "check_invariants", "checked_picks", "code", "covered_nulls", "default_picks", "enumerate_picks", "explore",
    "failed_checks", "flat_picks", "idle_row", "initial_state", "invariants", "live_slot", "lookup",
    "needs_fresh_slot", "picks_from_flat", "picks_json", "prefix_hit_levels", "register_filled_blocks", "replay",
    "represents", "row_options", "row_pick", "row_rule", "run_action", "runs_prefill", "sample_picks", "select", "shared_block",
    "shares_a_block", "step_apply", "step_assumptions", "step_guard", "step_of", "system_conventions", "update",
    "WORKER_BUFFERS",
]
