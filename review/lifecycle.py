"""Lifecycle-level conformance: any generation judged by what FlashInfer would see.

One step (:func:`run_step`): the scheduler's block copies, the generation's
``migrate`` phase and its materialize, the forward pass on the ghost
(FlashInfer decode with the trackers the version left, or the chunked scan),
the ``postprocess`` phase and its materialize. Then the lifecycle properties
(:data:`PROPERTIES`), each a named check over the version's trackers and the
ghost slot contents:

- ``refinement``: each running request's live slot, in every cache group, has
  trackers in range whose replay gives the request's position (``P + c = N``);
- ``canonical``: each published block, in every group, has trackers (0, 0)
  and holds exactly its boundary state (so groups agree);
- ``forward``: the forward pass read exact state (decode and prefill);
- ``materialize``: the plans and work lists keep FlashInfer's contract and work
  only on rows with a request;
- ``frame``: slots that no scheduled request's block-table row names keep their
  trackers and contents;
- ``memory``: no launch wrote outside its buffers, read past a block-table
  row into a store, or modified an input (the fuzzer's guarded arena).

:func:`review_callers` is the fuzz callers' model with review's policy
(:func:`review_policy`): it records each step's rows and which caller
assumptions each step broke (:class:`StepRecord`), with the assumptions of
:mod:`replayssm.spec.assumptions` a review probe drops (:mod:`.probes`):
those this caller model breaks, each as its record's ``caller_breaks`` says
(``caller_model_breaks``: the policy's decisions kept and dropped, the rows
that break it; no module here knows an assumption by name), and those one
row breaks as ``fuzz --drop`` does (``per_request_drops``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from replayssm.fuzz.caller_policy import CallerPolicy
from replayssm.fuzz.caller_shapes import Features
from replayssm.fuzz.callers import Callers
from replayssm.fuzz.launcher import Setup
from replayssm.spec import assumptions as env
from replayssm.spec.assumption_record import ScheduledRow
from replayssm.spec.ghost_row import GhostRow
from replayssm.spec.flashinfer import executed_rows

from .arguments import CallerStep, Row
from .ghost import Ghost
from .harness import Harness

PROPERTIES = ("refinement", "canonical", "forward", "materialize", "frame", "memory")

class PropertyBroken(AssertionError):
    """A lifecycle property broken at some step: ``prop`` names it."""

    def __init__(self, prop: str, message: str) -> None:
        super().__init__(f"{prop}: {message}")
        self.prop = prop


@dataclass
class StepRecord:
    """What a review campaign reads of its callers after each step, filled by
    their policy (:func:`review_policy`): the step's rows for the adapters
    (:attr:`rows`) and the assumptions of ``dropped`` it broke (:attr:`breaks`).
    ``dropped`` names the caller assumptions the run does not keep."""

    dropped: frozenset[str] = frozenset()
    rows: list[Row | None] = field(default_factory=list)
    breaks: list[str] = field(default_factory=list)
    """The dropped assumptions the last step broke (in some row)."""
    row_breaks: list[list[str]] = field(default_factory=list)
    """Per batch row of the last step, the dropped assumptions that row broke
    (what a probe restores on the row: ``review/attribution.py``)."""

    def scheduled(self, callers: Callers, batch_rows: list) -> None:
        """Record a step's batch rows (None: padding), as they are before its forward pass."""
        self.row_breaks = [[] if row is None else self._breaks(callers, row) for row in batch_rows]
        self.breaks = sorted({name for names in self.row_breaks for name in names})
        self.rows = [None if row is None else
                     Row(row[0].rid, row[0].stream, callers.req_index(b, row[0]), row[0].computed,
                         row[1].query_len, row[1].accepted, row[1].prefilling, row[1].live_col,
                         callers.source_col(row[0]))
                     for b, row in enumerate(batch_rows)]

    def _breaks(self, callers: Callers, row: tuple) -> list[str]:
        """The dropped assumptions one scheduled ``row`` breaks: the one its plan breaks on
        purpose, and those whose record's caller-model break (``caller_breaks``) it meets."""
        r, plan = row
        out = {plan.breaks} if plan.breaks else set()
        src, pad = callers.source_col(r), callers.geo.pad_slot
        live = {cols[plan.live_col] == pad for cols in r.cols}
        view = ScheduledRow(
            GhostRow(r.computed, plan.query_len, plan.accepted, plan.prefilling, plan.live_col, r.rid),
            moves_between_blocks=src >= 0 and src != plan.live_col and pad not in (r.cols[0][src],
                                                                                   r.cols[0][plan.live_col]),
            trackers_copied=plan.copied, past_table=plan.live_col >= callers.table_cols,
            live_null_in_some_groups=live == {True, False}, live_block_taken=r.rid in callers.taken_live)
        for names, how in env.caller_model_breaks():
            if how.broken_by(view):
                out |= names
        return sorted(out & self.dropped)


def review_policy(record: StepRecord) -> CallerPolicy:
    """The fuzz callers' decisions in a review campaign that drops ``record.dropped``
    and records each step in ``record``: for each way the caller model breaks
    assumptions (``spec.assumptions.caller_model_breaks``), its record's decisions
    while they are kept or, all of them dropped, while dropped (the trackers of
    every moved live column copied or none, one-token continuation chunks never
    or often, the state copied on a live move or not, the kernels' block table
    one column short or not, a prefill's live block one another request holds or
    not); and in every campaign the decisions with which the callers draw vLLM's
    behaviour that contradicts an assumption (``spec.assumptions.caller_model_draws``:
    a moved live column keeping its block)."""
    decisions: dict[str, Any] = {}
    for names, how in env.caller_model_breaks():
        decisions.update(how.dropped if names <= record.dropped else how.kept)
    for drawn in env.caller_model_draws():  # vLLM's own behaviour, in every campaign
        decisions.update(drawn.caller_draws)
    return CallerPolicy(**decisions, scheduled=record.scheduled)


def state_copies(dropped: frozenset[str]) -> bool:
    """Whether a review run that drops ``dropped`` copies a moved live column's state and ring
    (its callers' policy: :func:`review_policy`)."""
    return review_policy(StepRecord(dropped)).state_copies


def review_callers(setup: Setup, features: Features, dropped: frozenset[str],
                   executed_width: bool = False) -> tuple[Callers, StepRecord]:
    """The fuzz callers of a review campaign (:func:`review_policy`) and the record they keep of
    each step; of ``dropped``, at most one per-request assumption, which some rows then break as
    ``fuzz --drop`` does (a ``ValueError`` for more). With ``executed_width``, FlashInfer runs
    every decode row at the widest width it allows (``min(W, R - W)``: at least every row's
    length, rows longer than a block included), as a host that passes the width does
    (``spec/generations/contract.py`` ``EXECUTED_WIDTH_PASSED``)."""
    per_request = sorted(dropped & {a.name for a in env.per_request_drops()})
    if len(per_request) > 1:
        raise ValueError(f"one per-request assumption at a time, got {per_request}")
    if executed_width:  # FlashInfer's widest: T <= W and R = W + T (decode_row_fits), whatever the block size
        setup = replace(setup, executed_width=min(int(setup.geometry.window), int(setup.geometry.max_step)))
    record = StepRecord(dropped)
    callers = Callers(setup, features, policy=review_policy(record), drop=per_request[0] if per_request else None)
    return callers, record


def expectation(callers: Callers) -> dict:
    """What the checks need after a step: running requests and the prefix cache
    (of the kernels' table: a live column past it holds nothing they can judge)."""
    width = callers.table_cols
    return {"running": [[r.rid, r.stream, r.computed, r.live_col, r.cols] for r in callers.requests.values()
                        if r.live_col < width],
            "published": [[s, c, slots] for (s, c), slots in callers.published.items() if c < width]}


def runs_as_prefill(row: Row) -> bool:
    """How vLLM's Mamba forward runs a row: a one-token row with prior state runs as a decode."""
    return row.prefilling and not (row.query_len == 1 and row.computed_before > 0)


def _referenced(step: CallerStep, groups: int) -> list[set[int]]:
    out: list[set[int]] = [set() for _ in range(groups)]
    for b, row in enumerate(step.rows):
        if row is not None:
            for g in range(groups):
                out[g].update(step.table[g][b])
    return out


def run_step(h: Harness, ghost: Ghost, step: CallerStep, expect: dict, *, state_copies: bool = True) -> None:
    """Execute ``step`` on the version and the ghost, then check every lifecycle property."""
    setup = h.setup
    geo, groups = setup.geometry, len(setup.layers_per_group)
    before_trackers = h.tracker_arrays()
    before_ghost = ghost.snapshot()
    h.set_tables(step.table)
    h.copy_trackers(step.copies)
    width = len(step.table[0][0]) if step.table and step.table[0] else 0
    for b, row in enumerate(step.rows):
        if (row is not None and state_copies and row.source_col >= 0 and row.source_col != row.live_col
                and row.live_col < width):
            for g in range(groups):
                s, d = step.table[g][b][row.source_col], step.table[g][b][row.live_col]
                if geo.pad_slot not in (s, d) and s != d:
                    ghost.copy_block(g, s, d)
    real = {b for b, row in enumerate(step.rows) if row is not None}
    problems: list[tuple[str, str]] = []
    _materialize(h, ghost, "migrate", step, real, problems)
    for b, row in enumerate(step.rows):
        if row is None or row.live_col >= width:  # past the kernels' table: no slot they could have served
            continue
        for g in range(groups):
            live = step.table[g][b][row.live_col]
            if live == geo.pad_slot:
                continue
            if runs_as_prefill(row):
                src = step.table[g][b][row.source_col] if row.source_col >= 0 else None
                p = ghost.prefill(g, src, live, row.stream, row.computed_before, row.query_len)
            else:
                p = ghost.decode(g, live, h.trackers(g, live), row.stream, row.computed_before,
                                 executed_rows(row.query_len, setup.executed_width),
                                 row.accepted if not row.prefilling else row.query_len)
            if p:
                problems.append(("forward", f"request {row.rid} (batch row {b}) group {g}: {p}"))
    _materialize(h, ghost, "postprocess", step, real, problems)
    problems += _check(h, ghost, step, expect, before_trackers, before_ghost)
    if problems:
        prop, message = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PropertyBroken(prop, message + more)


def _materialize(h: Harness, ghost: Ghost, phase: str, step: CallerStep, real: set[int], problems: list) -> None:
    plans, broken = h.run_phase(phase, step, h.setup.conventions)
    for violation in broken:
        problems.append(("memory", f"{phase}: {violation}"))
    for plan in plans:
        for p in ghost.materialize(plan.numpy(), plan.layers, h.api.work_list, real):
            problems.append(("materialize", f"{phase}: {p}"))


def _check(h: Harness, ghost: Ghost, step: CallerStep, expect: dict, before_trackers: Any, before_ghost: dict) -> list:
    geo, groups = h.setup.geometry, len(h.setup.layers_per_group)
    problems = []
    for rid, stream, computed, live_col, cols in expect["running"]:
        if live_col < 0:
            continue
        for g in range(groups):
            slot = cols[g][live_col]
            if slot == geo.pad_slot:  # no block holds its state in this group (groups_agree_on_null dropped)
                continue
            s, c = h.trackers(g, slot)
            for layer in ghost.group_layers[g]:
                ok = 0 <= s < geo.ring_len and 0 <= c <= geo.window
                if not ok or ghost.replayed(layer, slot, s, c) != (stream, computed):
                    problems.append(("refinement", f"request {rid} group {g} live slot {slot}: trackers "
                                     f"(ring_start {s}, committed {c}) with {ghost.describe(layer, slot, s, c)} "
                                     f"do not stand for N = {computed} (layer {layer})"))
                    break
    for stream, col, slots in expect["published"]:
        aligned = (col + 1) * geo.block_size
        for g, slot in enumerate(slots):
            t = h.trackers(g, slot)
            states = {ghost.state.get((layer, slot)) for layer in ghost.group_layers[g]}
            if t != (0, 0) or states != {(stream, aligned)}:
                problems.append(("canonical", f"published block (stream {stream}, column {col}) slot {slot} of "
                                 f"group {g}: trackers {t}, contents {sorted(states, key=str)}, want (0, 0) and "
                                 f"the state at {aligned}"))
    start, committed = h.tracker_arrays()
    referenced = _referenced(step, groups)
    for g in range(groups):
        for slot in range(h.setup.num_slots):
            if slot in referenced[g] or slot == geo.pad_slot:
                continue
            was = (int(before_trackers[0][g, slot]), int(before_trackers[1][g, slot]))
            now = (int(start[g, slot]), int(committed[g, slot]))
            if was != now:
                problems.append(("frame", f"group {g} slot {slot}, named by no scheduled request: trackers "
                                 f"{was} -> {now}"))
            for layer in ghost.group_layers[g]:
                if ghost.state.get((layer, slot)) != before_ghost.get((layer, slot)):
                    problems.append(("frame", f"group {g} slot {slot} (layer {layer}), named by no scheduled "
                                     f"request: contents changed"))
                    break
    return problems
