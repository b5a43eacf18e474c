"""Symbolic transitions of the system model, the step shapes, and the proof context.

A :class:`Transition` is one action of ``spec.system`` on the symbolic
pre-state with symbolic picks. The engine step is built once per world
(:meth:`ProofContext.general_step`); each :class:`StepCase` narrows it with
equalities (:meth:`ProofContext.case_transition`), which Z3's preprocessing
substitutes away.

Everything the system claims build and share lives in one
:class:`ProofContext`: the symbolic pre-states, the transitions, the
inductive invariant of each state and the grouped goal parts. Lifetime: one
context per proof process, created when the process first builds a system
claim (:func:`context`) and kept while it proves; :func:`fresh_context`
replaces it (after the spec is patched, as the planted-bug tests do).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import combinations, permutations, product
from typing import Any, Generic, NamedTuple, TypeVar

from replayssm.spec.system import (
    ACTIONS,
    Named,
    Outcome,
    Picks,
    State,
    StepPicks,
    SystemParams,
    ahead_in_order,
    auxiliary_invariants,
    flat_picks,
    invariants,
    runs_prefill,
)
from replayssm.spec.geometry import chunks_on_boundary, moves_live_column
from replayssm.spec.vocab import Cond, conj, ite, negate

from .system_world import SYSTEM_CONVENTIONS, group_parts, symbolic_picks, symbolic_state, world_params
from .terms import named_int, variables


class RowShape(NamedTuple):
    """One scheduled row's shape: how the forward pass runs it (1 a prefill
    chunk, 0 a decode: a decode row, or a prompt tail run as one), its
    previous live column (-1 none) and its new one."""

    prefill: int
    live: int
    live_col: int


class CaseRow(NamedTuple):
    """One scheduled row of a step shape: request ``req`` with its row shape."""

    req: int
    prefill: int
    live: int
    live_col: int

    @property
    def label(self) -> str:
        return f"r{self.req} {'prefill' if self.prefill else 'decode'} live {self.live}->{self.live_col}"


def prefill_row(req: int, live: int, live_col: int) -> CaseRow:
    """Request ``req`` schedules a prefill chunk moving its live column from ``live`` to ``live_col``."""
    return CaseRow(req, 1, live, live_col)


def decode_row(req: int, live: int, live_col: int) -> CaseRow:
    """Request ``req`` schedules a decode row moving its live column from ``live`` to ``live_col``."""
    return CaseRow(req, 0, live, live_col)


@dataclass(frozen=True)
class StepCase:
    """One shape of an engine step: which requests run, each one's phase,
    previous and new live column, and with two or more rows their batch
    order: ``rows`` lists the scheduled rows in batch order (the step's
    ``order`` pick puts them there, concrete in the shape's transition; one
    row sits in batch row 0 whatever the order, which its shape leaves a
    pick). Slot ids are fixed by symmetry (ids are only
    compared for equality and with the null id): request 0's column ``c`` is
    slot ``1 + c`` or null, request 1's is null, request 0's slot of the same
    column (a shared published block: registered codes name the column) or its
    own ``1 + C + c``; fresh blocks are ``2C + 1`` and ``2C + 2``. A column
    ``c`` a row covers before its live one takes a fresh block only while it
    is null (past the live column, so in no table of its request): request
    0's is slot ``1 + c``, request 1's ``1 + C + c``, each then named by no
    other table entry (a slot of request 0's column ``c`` that request 1
    shares while request 0's is null is a renaming of request 1's own)."""

    rows: tuple[CaseRow, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(CaseRow(*row) for row in self.rows))

    @property
    def label(self) -> str:
        return ", ".join(row.label for row in self.rows) or "idle"

    @property
    def lead(self) -> "StepCase":
        """The same rows in request order: the shape a reordered one is proved through."""
        return StepCase(tuple(sorted(self.rows, key=lambda row: row.req)))

    def reorderings(self) -> list["StepCase"]:
        """The same rows in every other batch order (none for one row)."""
        return [StepCase(order) for order in permutations(self.rows) if order != self.rows]

    def batch_order(self, p: SystemParams) -> tuple[int, ...] | None:
        """The ``order`` pick of the shape's transition: its rows' requests,
        then the others by index; None (a pick) for one row."""
        if len(self.rows) < 2:
            return None
        mine = tuple(row.req for row in self.rows)
        return mine + tuple(r for r in range(p.num_reqs) if r not in mine)


P = TypeVar("P", bound=Picks)


@dataclass
class Transition(Generic[P]):
    """One symbolic action from a symbolic state (``P``: its picks record)."""

    p: SystemParams
    action: str
    pre: State
    picks: P
    outcome: Outcome
    guard: Cond
    assumptions: list[Named]
    shape: list[Cond] = field(default_factory=list)
    case: StepCase | None = None
    """The step shape a :func:`case_transition` narrows the general step to."""
    shown: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`show`'s values, listed once (every claim about the transition shows them)."""

    @property
    def post(self) -> State:
        return self.outcome.state

    def show(self) -> dict[str, Any]:
        """The picks, and every variable but the ring before and after: a
        counterexample's values (a fresh dict each call; the claims extend it)."""
        if self.shown is None:
            out: dict[str, Any] = {f"pick.{k}": v for k, v in flat_picks(self.picks).items()}
            for name, vals in self.pre.v.items():
                if name in ("ring",):
                    continue
                for i, v in enumerate(vals):
                    out[f"pre.{name}[{i}]"] = v
                    out[f"post.{name}[{i}]"] = self.post.v[name][i]
            self.shown = out
        return dict(self.shown)


def transition_from(p: SystemParams, action: str, pre: State, picks: P) -> Transition[P]:
    """``action`` with ``picks`` from ``pre``."""
    a = ACTIONS[action]
    return Transition(p, action, pre, picks, a.apply(pre, picks), a.guard(pre, picks), a.assumptions(pre, picks))


def row_shapes(p: SystemParams) -> list[RowShape]:
    """Every shape of one scheduled row that the live-column rule admits: in
    align mode a decode row stays in its column or moves to the next; a
    prefill chunk moves forward from its previous column (or from none), or
    stays in it when that column is not the first (a chunk after a prefix hit
    of that many blocks starts at the column's first token; after column 0
    the position would be 0, which has no live column; in all mode a chunk
    may also continue inside column 0, chunks starting anywhere); in mode
    none the live column is 0. A prompt tail run as a decode has a decode's
    shapes (its prior state has a live column)."""
    C = p.num_cols
    out: list[RowShape] = []
    stays_from = 1 if chunks_on_boundary(p.mode) else 0
    for mode in (0, 1):
        for live in range(-1, C):
            for col in range(C):
                if moves_live_column(p.mode):
                    ok = (col in (live, live + 1) and live >= 0) if mode == 0 else (col > live or col == live >= stays_from)
                else:
                    ok = col == 0 and (live == 0 if mode == 0 else live in (-1, 0))
                if ok:
                    out.append(RowShape(mode, live, col))
    return out


def step_cases(p: SystemParams, rows: int) -> list[StepCase]:
    """Every step shape with exactly ``rows`` requests scheduled: each subset
    of that many requests, each with every row shape (:func:`row_shapes`),
    in every batch order of the subset."""
    shapes = row_shapes(p)
    return [StepCase(tuple(CaseRow(r, *x) for r, x in zip(order, combo)))
            for reqs in combinations(range(p.num_reqs), rows)
            for combo in product(shapes, repeat=rows)
            for order in permutations(reqs)]


def case_pins(t: Transition[StepPicks], case: StepCase) -> Cond:
    """What a step shape says about the caller's choice, without the slot-id
    choices that hold by symmetry: which requests are scheduled, each
    scheduled row's phase, previous and new live column, and the batch order
    of the scheduled rows."""
    pre, pins = t.pre, []
    for r in range(t.p.num_reqs):
        pins.append(t.picks.rows[r].sched == 0)
    for row in case.lead.rows:  # by request: a shape's reorderings pin the same terms but for the order
        r = row.req
        phase = runs_prefill(pre, t.picks, r)
        pins[r] = t.picks.rows[r].sched == 1
        pins += [phase if row.prefill else negate(phase), pre.get("live", r) == row.live]
        if moves_live_column(t.p.mode):
            pins.append(t.picks.rows[r].live_col == row.live_col)
    pins += [ahead_in_order(t.picks.order, a.req, b.req) for a, b in zip(case.rows, case.rows[1:])]
    return conj(*pins)


@dataclass
class ProofContext:
    """What the system claims of one proof process build once and share.

    Transitions and pre-states are keyed by world (and action, fixed picks,
    step shape). Inductive invariants and grouped parts are keyed by the
    identity of the state or list they derive from (the step shapes share
    the general step's states, assumptions and checks, so each is built
    once); each entry keeps its key object alive, so an identity is never
    reused while the context lives.
    """

    transitions: dict[tuple, Transition[Any]] = field(default_factory=dict)
    pre_states: dict[SystemParams, State] = field(default_factory=dict)
    invariants: dict[int, tuple[State, list[Named]]] = field(default_factory=dict)
    grouped_parts: dict[tuple[int, str], tuple[list, list[Named]]] = field(default_factory=dict)
    reads: dict[SystemParams, tuple[str, ...]] = field(default_factory=dict)
    same: dict[tuple[int, int], tuple[Transition[StepPicks], Transition[StepPicks], list[Named]]] = field(
        default_factory=dict)

    def pre_state(self, p: SystemParams) -> State:
        """The symbolic pre-state of every action under ``p``: one object, so its
        inductive invariant is built once for admit, free and every step shape."""
        if p not in self.pre_states:
            self.pre_states[p] = symbolic_state(p, "pre")
        return self.pre_states[p]

    def transition(self, p: SystemParams, action: str, **fixed: int) -> Transition[Any]:
        """``action`` from the symbolic pre-state; ``fixed`` picks are concrete
        (one claim per request index keeps the index arithmetic out of Z3)."""
        key = (p, action, tuple(sorted(fixed.items())))
        if key not in self.transitions:
            picks = replace(symbolic_picks(p, action, "pick"), **fixed)
            self.transitions[key] = transition_from(p, action, self.pre_state(p), picks)
        return self.transitions[key]

    def general_step(self, p: SystemParams, order: tuple[int, ...] | None = None) -> Transition[StepPicks]:
        """The engine step with every pick and every pre-state variable
        symbolic (but the batch ``order`` where given: a step shape of two
        rows lays its batch out concretely, which keeps its query as small as
        one fixed order's); each :class:`StepCase` narrows it
        (:meth:`case_transition`)."""
        key = (p, "step", "general", order)
        if key not in self.transitions:
            picks = symbolic_picks(p, "step", "pick")
            if order is not None and isinstance(picks, StepPicks):
                picks = replace(picks, order=order)
            self.transitions[key] = transition_from(p, "step", self.pre_state(p), picks)
        return self.transitions[key]

    def case_transition(self, p: SystemParams, case: StepCase,
                        fresh: tuple[int, ...] | None = None) -> Transition[StepPicks]:
        """The general step narrowed to ``case``: the shape's table layout, live
        columns, scheduled rows and slot picks as equalities (``shape``), which
        Z3's preprocessing substitutes away. ``fresh`` overrides the fresh slot
        id of each request (probes of ``fresh_*`` assumptions)."""
        key = (p, "step", case, fresh)
        if key in self.transitions:
            return self.transitions[key]
        if p.num_reqs != 2 or p.num_slots < 2 * p.num_cols + 3:
            raise ValueError(f"step shapes pin the slot layout of 2 requests with 2C + 3 = {2 * p.num_cols + 3} "
                             f"slots per group; got {p.num_reqs} requests and num_slots = {p.num_slots}")
        general = self.general_step(p, case.batch_order(p))
        C, pre = p.num_cols, general.pre
        shape: list[Cond] = []
        for g in range(p.groups):
            for c in range(C):
                null0 = named_int(f"pre.null[{g},0,{c}]") == 1
                null1 = named_int(f"pre.null[{g},1,{c}]") == 1
                shared = named_int(f"pre.shared[{g},{c}]") == 1
                shape.append(pre.get("table", g, 0, c) == ite(null0, 0, 1 + c))
                shape.append(pre.get("table", g, 1, c) == ite(null1, 0, ite(shared, 1 + c, 1 + C + c)))
        shape.append(case_pins(general, case))
        rows = [replace(row, sched=0) for row in general.picks.rows]
        for row in case.lead.rows:
            r = row.req
            slot = fresh[r] if fresh is not None else 2 * C + 1 + r
            shape += [general.picks.rows[r].slot[g] == slot for g in range(p.groups)]
            cover = tuple((1 + r * C + c,) * p.groups for c in range(C - 1))
            shape += [general.picks.rows[r].cover_slot[c][g] == cover[c][g]
                      for c in range(C - 1) for g in range(p.groups)]
            rows[r] = replace(rows[r], sched=1, slot=(slot,) * p.groups, cover_slot=cover,
                              live_col=row.live_col if moves_live_column(p.mode) else rows[r].live_col)
        t = Transition(p, "step", pre, StepPicks(tuple(rows), general.picks.order), general.outcome, general.guard,
                       general.assumptions, shape, case)
        self.transitions[key] = t
        return t

    def inductive_invariant(self, st: State) -> list[Named]:
        """The labelled conjuncts of the inductive invariant of ``st``."""
        if id(st) not in self.invariants:
            self.invariants[id(st)] = (st, invariants(st) + auxiliary_invariants(st))
        return self.invariants[id(st)][1]

    def grouped(self, parts: list[Named], prefix: str = "") -> list[Named]:
        """``system_world.group_parts`` of a list, merged once per list."""
        key = (id(parts), prefix)
        if key not in self.grouped_parts:
            self.grouped_parts[key] = (parts, group_parts(parts, prefix))
        return self.grouped_parts[key][1]

    def invariant_reads(self, p: SystemParams) -> tuple[str, ...]:
        """The state variables the inductive invariant reads (found in its terms):
        two post-states equal on these satisfy it together or not at all."""
        if p not in self.reads:
            pre = self.pre_state(p)
            read = variables(conj(*[x for _, x in self.inductive_invariant(pre)]))
            names = {v.split(".", 1)[1].split("[", 1)[0] for v in read if v.startswith("pre.")}
            self.reads[p] = tuple(k for k in pre.v if k in names)
        return self.reads[p]

    def same_state(self, t: Transition[StepPicks], ref: Transition[StepPicks], ref_label: str) -> list[Named]:
        """One goal part per variable the invariant reads: ``t`` leaves it as
        ``ref`` does (built once per pair, so the views find it verbatim)."""
        key = (id(t), id(ref))
        if key not in self.same:
            parts = [(f"same {name} as {ref_label}",
                      conj(*[a == b for a, b in zip(t.post.v[name], ref.post.v[name])]))
                     for name in self.invariant_reads(t.p)]
            self.same[key] = (t, ref, parts)
        return self.same[key][2]


_CONTEXT = ProofContext()


def context() -> ProofContext:
    """This process's proof context."""
    return _CONTEXT


def fresh_context() -> ProofContext:
    """Replace this process's proof context by an empty one (after the spec
    is patched: nothing built before is reused) and return it."""
    global _CONTEXT
    _CONTEXT = ProofContext()
    return _CONTEXT


def case_transition(p: SystemParams, case: StepCase, fresh: tuple[int, ...] | None = None) -> Transition[StepPicks]:
    """:meth:`ProofContext.case_transition` in this process's context."""
    return context().case_transition(p, case, fresh)


def transitions(action: str, conventions: tuple[str, ...] | None = None,
                rows: tuple[int, ...] = (1,)) -> Iterator[tuple[str, Transition[Any]]]:
    """The symbolic transitions of ``action`` under every system convention
    (or those named; admit and free: one per request index; step: one per
    :class:`StepCase` with a number of scheduled rows in ``rows``)."""
    ctx = context()
    for label in SYSTEM_CONVENTIONS:
        if conventions is not None and label not in conventions:
            continue
        p = world_params(label)
        if action == "step":
            for n in rows:
                for case in step_cases(p, n):
                    yield f"step {label}: {case.label}", ctx.case_transition(p, case)
        else:
            for r in range(p.num_reqs):
                yield f"{action} req={r} {label}", ctx.transition(p, action, req=r)
