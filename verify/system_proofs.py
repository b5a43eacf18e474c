"""System obligations: the composed model's invariants, proved inductively.

Each action of ``spec.system`` runs on a symbolic state (every variable a Z3
integer) with symbolic picks. An obligation assumes the inductive invariant
(``invariants`` + ``auxiliary_invariants``) in the pre-state, the action's
guard and its named caller assumptions, and proves the invariant's labelled
conjuncts in the post-state together with the step's safety checks. The
geometry, sizes and conventions are concrete (constexprs stay concrete so the
problems stay linear); everything else is symbolic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import combinations, product
from dataclasses import dataclass, field
from typing import Any

import z3

from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.system import (
    ACTIONS,
    CANONICAL,
    GROUPS_AGREE,
    NO_TOKEN_DROPPED,
    PUBLISH_IN_EVERY_GROUP,
    REFINEMENT,
    Invariant,
    Outcome,
    State,
    SystemParams,
    auxiliary_invariants,
    check_dropped,
    in_prefill,
    initial_state,
    invariants,
)
from replayssm.spec.vocab import conj, disj, implies, ite, negate

from .obligation import Claim, obligation
from .terms import Sym, lift, named_int, variables
from .traces import trace_from_transition

SYSTEM_GEOMETRY = Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=4)
"""Two requests, block size 2, W = 2, R = 4 (decode rows of up to 2 tokens)."""

SYSTEM_CONVENTIONS: dict[str, Conventions] = {
    "v1-align": Conventions(cumulative=False, post_step=False, has_idx_mapping=False,
                            materialize_prefixes=True, live_col_is_zero=False),
    "v2-align": Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                            materialize_prefixes=True, live_col_is_zero=False),
    "v1-none": Conventions(cumulative=False, post_step=False, has_idx_mapping=False,
                           materialize_prefixes=False, live_col_is_zero=True),
    "v2-none": Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                           materialize_prefixes=False, live_col_is_zero=True),
}
"""Both callers in both modes (v2 swaps batch rows, so its ``idx_mapping`` is
a real permutation). ``postprocess.conventions_agree`` covers the remaining
query/count combinations at the kernel level."""


def system_params(conv: Conventions, geo: Geometry = SYSTEM_GEOMETRY, **kw: Any) -> SystemParams:
    kw = {"num_cols": 2, "num_slots": 7, **kw}
    return SystemParams(geo, conv, swap_rows=conv.has_idx_mapping, **kw)


def symbolic_state(p: SystemParams, tag: str) -> State:
    """A state whose every variable is the Z3 integer ``<tag>.<name>[i]``."""
    return State(p, {k: [named_int(f"{tag}.{k}[{i}]") for i in range(len(v))]
                      for k, v in initial_state(p).v.items()})


def symbolic_picks(p: SystemParams, action: str, tag: str) -> dict:
    return {s.name: named_int(f"{tag}.{s.name}") for s in ACTIONS[action].picks(p)}


def group_parts(parts: Iterable[tuple[str, Any]], prefix: str = "") -> list[tuple[str, Any]]:
    """Labelled conjuncts with one name merged into one goal part."""
    merged: dict[str, list] = {}
    for n, t in parts:
        merged.setdefault(prefix + n, []).append(t)
    return [(n, conj(*ts)) for n, ts in merged.items()]


@dataclass
class Transition:
    """One symbolic action from a symbolic state."""

    p: SystemParams
    action: str
    pre: State
    picks: dict
    outcome: Outcome
    guard: Any
    assumptions: list[tuple[str, Any]]
    shape: list[Any] = field(default_factory=list)
    case: StepCase | None = None
    """The step shape a :func:`case_transition` narrows the general step to."""

    @property
    def post(self) -> State:
        return self.outcome.state

    def show(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"pick.{k}": v for k, v in self.picks.items()}
        for name, vals in self.pre.v.items():
            if name in ("ring",):
                continue
            for i, v in enumerate(vals):
                out[f"pre.{name}[{i}]"] = v
                out[f"post.{name}[{i}]"] = self.post.v[name][i]
        return out


_CACHE: dict[tuple, Transition] = {}


def transition(p: SystemParams, action: str, **fixed: int) -> Transition:
    """``action`` from the symbolic state ``pre``; ``fixed`` picks are concrete
    (one claim per request index keeps the index arithmetic out of Z3)."""
    key = (p, action, tuple(sorted(fixed.items())))
    if key not in _CACHE:
        picks = {**symbolic_picks(p, action, "pick"), **fixed}
        _CACHE[key] = transition_from(p, action, pre_state(p), picks)
    return _CACHE[key]


_INVARIANTS: dict[int, tuple[State, list[tuple[str, Any]]]] = {}
_PRE: dict[SystemParams, State] = {}


def pre_state(p: SystemParams) -> State:
    """The symbolic pre-state of every action under ``p``: one object, so its
    inductive invariant is built once for admit, free and every step shape."""
    if p not in _PRE:
        _PRE[p] = symbolic_state(p, "pre")
    return _PRE[p]


def clear_caches() -> None:
    """Forget built transitions and invariants (after patching the spec)."""
    _CACHE.clear()
    _PRE.clear()
    _READ.clear()
    _SAME.clear()
    _INVARIANTS.clear()
    _GROUPED.clear()


def inductive_invariant(st: State) -> list[tuple[str, Any]]:
    """The labelled conjuncts of the inductive invariant of ``st`` (built once
    per symbolic state: every step shape shares the general step's states)."""
    if id(st) not in _INVARIANTS:
        _INVARIANTS[id(st)] = (st, invariants(st) + auxiliary_invariants(st))
    return _INVARIANTS[id(st)][1]


_GROUPED: dict[tuple[int, str], tuple[list, list[tuple[str, Any]]]] = {}


def grouped(parts: list[tuple[str, Any]], prefix: str = "") -> list[tuple[str, Any]]:
    """:func:`group_parts` of a list, merged once per list (the step shapes
    share the general step's invariants, assumptions and checks)."""
    key = (id(parts), prefix)
    if key not in _GROUPED:
        _GROUPED[key] = (parts, group_parts(parts, prefix))
    return _GROUPED[key][1]


def preservation_claim(t: Transition, label: str, goal_filter: Callable[[str], bool] = lambda n: True,
                       dropped: tuple[str, ...] = (), cover: Any = True) -> Claim:
    """``inv(pre) & guard & assumptions => inv(post) & checks``, as named parts."""
    goal = [(n, x) for n, x in grouped(inductive_invariant(t.post), "inv(post): ") if goal_filter(n)]
    goal += [(n, x) for n, x in grouped(t.outcome.checks, "check: ") if goal_filter(n)]
    return Claim(goal, hypotheses(t, dropped), cover, label, t.show(), preprocess=True,
                 trace_of=lambda m, violated: trace_from_transition(t, m, violated, dropped))


def hypotheses(t: Transition, dropped: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """What a claim about ``t`` assumes, named: the inductive invariant in the
    pre-state, the guard, the shape's pins and the caller assumptions (less
    the ``dropped`` ones, each of which must name a system assumption)."""
    check_dropped(dropped)
    out = list(grouped(inductive_invariant(t.pre), "inv(pre): "))
    out.append(("guard", t.guard))
    if t.shape:
        out.append(("shape", conj(*t.shape)))
    return out + [(n, x) for n, x in grouped(t.assumptions) if n not in dropped]


REFERENCE_CALLER: dict[str, str] = {"v1-align": "v2-align", "v1-none": "v2-none"}
"""A v1 step shape is proved through the v2 step of the same shape and mode
(:func:`reference_claim`): v1 and v2 differ only in how the worker lays the
rows out for the kernels (per-row or cumulative queries, counts before or
after the step, rows in request order or swapped through ``idx_mapping``)."""

_READ: dict[SystemParams, tuple[str, ...]] = {}


def invariant_reads(p: SystemParams) -> tuple[str, ...]:
    """The state variables the inductive invariant reads (found in its terms):
    two post-states equal on these satisfy it together or not at all."""
    if p not in _READ:
        read = variables(conj(*[x for _, x in inductive_invariant(pre_state(p))]))
        names = {v.split(".", 1)[1].split("[", 1)[0] for v in read if v.startswith("pre.")}
        _READ[p] = tuple(k for k in pre_state(p).v if k in names)
    return _READ[p]


_SAME: dict[tuple[int, int], list[tuple[str, Any]]] = {}


def same_state(t: Transition, ref: Transition, ref_label: str) -> list[tuple[str, Any]]:
    """One goal part per variable the invariant reads: ``t`` leaves it as
    ``ref`` does (built once per pair, so the views find it verbatim)."""
    key = (id(t), id(ref))
    if key not in _SAME:
        _SAME[key] = [(f"same {name} as {ref_label}", conj(*[a == b for a, b in zip(t.post.v[name], ref.post.v[name])]))
                      for name in invariant_reads(t.p)]
    return _SAME[key]


def convention_label(conv: Conventions) -> str:
    """The name of a system convention in :data:`SYSTEM_CONVENTIONS`."""
    return next(label for label, c in SYSTEM_CONVENTIONS.items() if c == conv)


def step_claim(t: Transition, label: str, goal_filter: Callable[[str], bool] = lambda n: True,
               cover: Any = True) -> Claim:
    """The claim of one step shape: :func:`preservation_claim`, or for a v1
    caller :func:`reference_claim`."""
    if t.case is not None and convention_label(t.p.conv) in REFERENCE_CALLER:
        return reference_claim(t, label, goal_filter, cover)
    return preservation_claim(t, label, goal_filter, cover=cover)


def reference_claim(t: Transition, label: str, goal_filter: Callable[[str], bool] = lambda n: True,
                    cover: Any = True) -> Claim:
    """A v1 step shape proved through its reference caller's
    (:data:`REFERENCE_CALLER`): under the same hypotheses (the invariant in
    the pre-state, guard, caller assumptions, shape: the same terms, since
    both steps read the same state and picks), the v1 step leaves every
    variable the invariant reads as the v2 step of the same shape does, and
    passes its own safety checks. With the v2 shape's claim (the invariant
    after the v2 step) the invariant after the v1 step follows; a v1-only
    bug shows as the first variable the two callers leave differently."""
    ref_label = REFERENCE_CALLER[convention_label(t.p.conv)]
    ref = case_transition(system_params(SYSTEM_CONVENTIONS[ref_label]), t.case)
    claim = preservation_claim(t, label, lambda n: n.startswith("check: ") and goal_filter(n), cover=cover)
    if [lift(x).get_id() for _, x in hypotheses(ref)] != [lift(x).get_id() for _, x in claim.assumptions]:
        raise ValueError(f"{label}: the {ref_label} step of this shape rests on other hypotheses; "
                         f"prove it directly (preservation_claim)")
    claim.goal = same_state(t, ref, ref_label) + claim.goal
    return claim


DIRECT = tuple(label for label in SYSTEM_CONVENTIONS if label not in REFERENCE_CALLER)
"""The callers whose step shapes are proved against the invariant itself."""


def shape_claim(t: Transition, cover: Callable[[Transition], Any] = lambda t: True) -> Claim:
    """One step shape for every caller, as one claim: the invariant and the
    checks after the step of ``t``'s caller (one of :data:`DIRECT`), then for
    each caller proved through it (:data:`REFERENCE_CALLER`) the parts of its
    :func:`reference_claim`, named after that caller. The hypotheses are the
    same terms (``reference_claim`` checks), so one query, one preprocessing
    and one non-vacuity check serve every caller of the shape (about 27%
    less solving than a claim per caller); the callers' covers must be the
    same term too."""
    direct = convention_label(t.p.conv)
    callers = [caller for caller, ref in REFERENCE_CALLER.items() if ref == direct]
    label = f"step {' + '.join([direct, *callers])}: {t.case.label}"
    claim = preservation_claim(t, label, cover=cover(t))
    for caller in callers:
        follower = case_transition(system_params(SYSTEM_CONVENTIONS[caller]), t.case)
        if lift(cover(follower)).get_id() != lift(claim.cover).get_id():
            raise ValueError(f"{label}: {caller} covers another situation than {direct}; prove it on its own")
        claim.goal += [(f"{caller}: {n}", x) for n, x in reference_claim(follower, label).goal]
        claim.show.update({f"{caller} {k}": v for k, v in follower.show().items() if k.startswith("post.")})
    return claim


def check_callers_share_shapes(rows: tuple[int, ...]) -> None:
    """The step shapes listed for a caller proved through another
    (:data:`REFERENCE_CALLER`) are that caller's: otherwise some of its
    shapes (those ``system.shapes_cover`` lists for it) would go unproved."""
    for caller, ref in REFERENCE_CALLER.items():
        if ref not in DIRECT:
            raise ValueError(f"{caller} is proved through {ref}, which is not proved directly ({DIRECT})")
        mine, theirs = (system_params(SYSTEM_CONVENTIONS[c]) for c in (caller, ref))
        for n in rows:
            if step_cases(mine, n) != step_cases(theirs, n):
                raise ValueError(f"{caller} and {ref} list different {n}-row step shapes; "
                                 f"prove {caller}'s on their own")


@dataclass(frozen=True)
class StepCase:
    """One shape of an engine step: which requests run, each one's phase,
    previous and new live column. Slot ids are fixed by symmetry (ids are only
    compared for equality and with the null id): request 0's column ``c`` is
    slot ``1 + c`` or null, request 1's is null, request 0's slot of the same
    column (a shared published block: registered codes name the column) or its
    own ``1 + C + c``; fresh blocks are ``2C + 1`` and ``2C + 2``."""

    rows: tuple[tuple[int, int, int, int], ...]  # (req, prefill, live, live_col)

    @property
    def label(self) -> str:
        return ", ".join(f"r{r} {'prefill' if m else 'decode'} live {l}->{c}" for r, m, l, c in self.rows) or "idle"


def row_shapes(p: SystemParams) -> list[tuple[int, int, int]]:
    """Every (prefill, previous live column, new live column) of one scheduled
    row that the live-column rule admits: in align mode a decode row stays in
    its column or moves to the next; a prefill chunk moves forward from its
    previous column (or from none), or stays in it when that column is not
    the first (a chunk after a prefix hit of that many blocks starts at the
    column's first token; after column 0 the position would be 0, which has
    no live column); in mode none the live column is 0."""
    C = p.num_cols
    out: list[tuple[int, int, int]] = []
    for mode in (0, 1):
        for live in range(-1, C):
            for col in range(C):
                if p.conv.materialize_prefixes:
                    ok = (col in (live, live + 1) and live >= 0) if mode == 0 else (col > live or col == live >= 1)
                else:
                    ok = col == 0 and (live == 0 if mode == 0 else live in (-1, 0))
                if ok:
                    out.append((mode, live, col))
    return out


def step_cases(p: SystemParams, rows: int) -> list[StepCase]:
    """Every step shape with exactly ``rows`` requests scheduled: each subset
    of that many requests, each with every row shape (:func:`row_shapes`)."""
    shapes = row_shapes(p)
    return [StepCase(tuple((r, *x) for r, x in zip(reqs, combo)))
            for reqs in combinations(range(p.num_reqs), rows)
            for combo in product(shapes, repeat=rows)]


def case_pins(t: Transition, case: StepCase) -> Any:
    """What a step shape says about the caller's choice, without the slot-id
    choices that hold by symmetry: which requests are scheduled, and each
    scheduled row's phase, previous and new live column."""
    pre, pins = t.pre, []
    for r in range(t.p.num_reqs):
        pins.append(t.picks[f"sched_{r}"] == 0)
    for r, mode, live, col in case.rows:
        phase = in_prefill(pre, r)
        pins[r] = t.picks[f"sched_{r}"] == 1
        pins += [phase if mode else negate(phase), pre.get("live", r) == live]
        if t.p.conv.materialize_prefixes:
            pins.append(t.picks[f"live_col_{r}"] == col)
    return conj(*pins)


def general_step(p: SystemParams) -> Transition:
    """The engine step with every pick and every pre-state variable symbolic,
    built once per parameter set; each :class:`StepCase` narrows it with
    equalities (:func:`case_transition`)."""
    key = (p, "step", "general")
    if key not in _CACHE:
        _CACHE[key] = transition_from(p, "step", pre_state(p), symbolic_picks(p, "step", "pick"))
    return _CACHE[key]


def transition_from(p: SystemParams, action: str, pre: State, picks: dict) -> Transition:
    """``action`` with ``picks`` from ``pre``."""
    a = ACTIONS[action]
    return Transition(p, action, pre, picks, a.apply(pre, picks), a.guard(pre, picks), a.assumptions(pre, picks))


def case_transition(p: SystemParams, case: StepCase, fresh: tuple[int, ...] | None = None) -> Transition:
    """The general step narrowed to ``case``: the shape's table layout, live
    columns, scheduled rows and slot picks as equalities (``shape``), which
    Z3's preprocessing substitutes away. ``fresh`` overrides the fresh slot
    id of each request (probes of ``fresh_*`` assumptions)."""
    key = (p, "step", case, fresh)
    if key in _CACHE:
        return _CACHE[key]
    if p.num_reqs != 2 or p.num_slots < 2 * p.num_cols + 3:
        raise ValueError(f"step shapes pin the slot layout of 2 requests with 2C + 3 = {2 * p.num_cols + 3} slots "
                         f"per group; got {p.num_reqs} requests and num_slots = {p.num_slots}")
    general = general_step(p)
    C, pre = p.num_cols, general.pre
    shape: list[Any] = []
    for g in range(p.groups):
        for c in range(C):
            null0 = named_int(f"pre.null[{g},0,{c}]") == 1
            null1 = named_int(f"pre.null[{g},1,{c}]") == 1
            shared = named_int(f"pre.shared[{g},{c}]") == 1
            shape.append(pre.get("table", g, 0, c) == ite(null0, 0, 1 + c))
            shape.append(pre.get("table", g, 1, c) == ite(null1, 0, ite(shared, 1 + c, 1 + C + c)))
    shape.append(case_pins(general, case))
    fixed: dict[str, int] = {}
    for r, _, _, _ in case.rows:
        for g in range(p.groups):
            fixed[f"slot_{g}_{r}"] = fresh[r] if fresh is not None else 2 * C + 1 + r
    shape += [general.picks[k] == v for k, v in fixed.items()]
    sched = {f"sched_{r}": 0 for r in range(p.num_reqs)} | {f"sched_{r}": 1 for r, *_ in case.rows}
    cols = {f"live_col_{r}": col for r, _, _, col in case.rows if p.conv.materialize_prefixes}
    t = Transition(p, "step", pre, {**general.picks, **sched, **cols, **fixed}, general.outcome, general.guard,
                   general.assumptions, shape, case)
    _CACHE[key] = t
    return t


ALIGN = tuple(label for label, conv in SYSTEM_CONVENTIONS.items() if conv.materialize_prefixes)
"""The system conventions in align mode (the ones that publish and plan)."""


def transitions(action: str, conventions: tuple[str, ...] | None = None,
                rows: tuple[int, ...] = (1,)) -> Iterator[tuple[str, Transition]]:
    """The symbolic transitions of ``action`` under every system convention
    (or those named; admit and free: one per request index; step: one per
    :class:`StepCase` with a number of scheduled rows in ``rows``)."""
    for label, conv in SYSTEM_CONVENTIONS.items():
        if conventions is not None and label not in conventions:
            continue
        p = system_params(conv)
        if action == "step":
            for n in rows:
                for case in step_cases(p, n):
                    yield f"step {label}: {case.label}", case_transition(p, case)
        else:
            for r in range(p.num_reqs):
                yield f"{action} req={r} {label}", transition(p, action, req=r)


SOLVER_PARAMS = {"smt.relevancy": 0}
"""Z3 settings in force while the system claims are checked (about 2x faster
on the step shapes); restored when an obligation's claims are exhausted."""


def with_solver_params(build: Callable[[], Iterator[Claim]]) -> Callable[[], Iterator[Claim]]:
    """Run ``build``'s claims (checked lazily by ``prove``) under :data:`SOLVER_PARAMS`."""

    def wrapped() -> Iterator[Claim]:
        saved = {k: z3.get_param(k) for k in SOLVER_PARAMS}
        for k, v in SOLVER_PARAMS.items():
            z3.set_param(k, v)
        try:
            yield from build()
        finally:
            for k, v in saved.items():
                z3.set_param(k, v)

    wrapped.__name__ = wrapped.__qualname__ = build.__name__
    return wrapped


def distinct_claims(claims: Iterable[Claim]) -> list[Claim]:
    """``claims`` with each query stated once: a claim whose named hypotheses,
    named goal parts and cover are the same Z3 terms as an earlier one's is
    left out and the earlier one's case names both (admit and free read
    nothing of the caller's layout, so v1 and v2 state the same claims). All
    are built before any is compared, so no term is freed and its id reused."""
    built = list(claims)
    kept: dict[tuple, Claim] = {}
    for c in built:
        key = (tuple((n, lift(x).get_id()) for n, x in c.assumptions),
               tuple((n, lift(x).get_id()) for n, x in c.goal), lift(c.cover).get_id())
        if key in kept:
            kept[key].case += f" = {c.case}"
        else:
            kept[key] = c
    return list(kept.values())


def _preserves(action: str, cover: Callable[[Transition], Any] = lambda t: True,
               rows: tuple[int, ...] = (1,)) -> Callable[[], Iterator[Claim]]:
    def build() -> Iterator[Claim]:
        if action == "step":
            check_callers_share_shapes(rows)
            for _, t in transitions(action, DIRECT, rows):
                yield shape_claim(t, cover)
            return
        yield from distinct_claims(preservation_claim(t, label, cover=cover(t))
                                   for label, t in transitions(action, rows=rows))
    build.__name__ = f"preserves_{action}"
    return with_solver_params(build)


@obligation("system.initial", "system",
            "the initial state (no request, every slot free) satisfies the inductive invariant")
def initial() -> list[Claim]:
    claims = []
    for label, conv in SYSTEM_CONVENTIONS.items():
        st = initial_state(system_params(conv))
        goal = [(n, Sym(z3.BoolVal(bool(x)))) for n, x in group_parts(inductive_invariant(st))]
        claims.append(Claim(goal, [], True, label))
    return distinct_claims(claims)


system_admit = obligation(
    "system.admit", "admit",
    "admit (a prefix-cache hit on published blocks, or none) preserves the inductive invariant", shardable=True)(
    _preserves("admit", lambda t: t.picks["hit"] == 1 if t.p.conv.materialize_prefixes else True))
system_free = obligation(
    "system.free", "free",
    "free / preempt preserves the inductive invariant (a freed published block stays registered)", shardable=True)(
    _preserves("free", lambda t: t.pre.get("reg", 0, 1) != -1))

STEP_ROWS, BATCH_ROWS = (1,), (2,)
"""Scheduled rows per step shape in ``system.step`` and ``system.step_batch``
(with the 2 requests of the system geometry, every count a step can have)."""

system_step = obligation(
    "system.step", "step",
    "one engine step with one scheduled row, every phase and live-column shape (the other "
    "request present, possibly sharing blocks, as a padding row or not launched): allocation and "
    "copy-on-write, live-column move (block copy + migration), forward pass, postprocess, compaction, "
    "materialize preserve the inductive invariant and pass every safety check (a v1 shape: leaves what "
    "the v2 shape leaves and passes its own checks); every shape admits some state", shardable=True,
    every_case=True)(_preserves("step", rows=STEP_ROWS))
system_step_batch = obligation(
    "system.step_batch", "step",
    "one engine step with both requests scheduled (v1: one program per row; v2: rows swapped by "
    "idx_mapping), every pair of row shapes (decode or prefill, every live-column move) preserves the "
    "inductive invariant and passes every safety check (no materialize race; a v1 pair: leaves what the "
    "v2 pair leaves and passes its own checks); every pair admits some state", shardable=True,
    every_case=True)(_preserves("step", rows=BATCH_ROWS))


def pinned_layout_is_general(st: State) -> Any:
    """What makes the step shapes' fixed slot ids a renaming of any state's:
    in each group, two table entries that name one real slot belong to
    different requests and the same column (a shared published block). With
    fresh slots unreferenced (``fresh_slot_is_free``) and distinct
    (``fresh_distinct_destinations``), ids can then be renamed to the pinned
    ones (:func:`case_transition`)."""
    p, pad = st.p, st.p.geo.pad_slot
    cells = [(r, c) for r in range(p.num_reqs) for c in range(p.num_cols)]
    parts = []
    for g in range(p.groups):
        for i, (r, c) in enumerate(cells):
            for r2, c2 in cells[i + 1:]:
                a, b = st.get("table", g, r, c), st.get("table", g, r2, c2)
                if r == r2 or c != c2:
                    parts.append(implies(conj(a != pad, b != pad), a != b))
    return conj(*parts)


@obligation("system.shapes_cover", "step",
            "the step shapes of system.step and system.step_batch are every step the caller may take: from "
            "any state satisfying the inductive invariant, any step the guard and the caller assumptions "
            "admit schedules a set of requests with phases and live-column moves that one shape lists, "
            "and its slot ids are a renaming of the shapes' pinned ones")
def shapes_cover() -> list[Claim]:
    return distinct_claims(_shapes_cover_claims())


def _shapes_cover_claims() -> Iterator[Claim]:
    for label, conv in SYSTEM_CONVENTIONS.items():
        p = system_params(conv)
        if set(STEP_ROWS + BATCH_ROWS) != set(range(1, p.num_reqs + 1)):
            raise ValueError(f"step shapes cover {STEP_ROWS + BATCH_ROWS} rows; a step of {p.num_reqs} "
                             f"requests schedules 1..{p.num_reqs}")
        t = general_step(p)
        shapes = [case_pins(t, case) for n in STEP_ROWS + BATCH_ROWS for case in step_cases(p, n)]
        facts = list(grouped(inductive_invariant(t.pre), "inv(pre): "))
        facts += [("guard", t.guard)] + grouped(t.assumptions)
        goal = [("a listed shape", disj(*shapes)), ("slot ids as pinned, up to renaming", pinned_layout_is_general(t.pre))]
        yield Claim(goal, facts, True, label, t.show(), preprocess=True,
                    trace_of=lambda m, violated, t=t: trace_from_transition(t, m, violated, ()))


# property views over the cached transitions: each proves only its conjuncts


STEP_LEMMAS = ("system.step", "system.step_batch")
ACTION_LEMMAS = ("system.admit", "system.free", *STEP_LEMMAS)


def selecting(*invariants: Invariant, checks: tuple[str, ...] = ()) -> Callable[[str], bool]:
    """A goal filter keeping exactly the parts of these invariants (after
    the action) and of these step checks."""
    names = {f"inv(post): {inv.name}" for inv in invariants} | {f"check: {c}" for c in checks}
    return names.__contains__


@obligation("system.groups_agree", "step",
            f"after a step {GROUPS_AGREE.statement}, and a publish (postprocess materialize) happens in every "
            "group or in none", shardable=True, lemmas=STEP_LEMMAS)
@with_solver_params
def groups_agree() -> Iterator[Claim]:
    for label, t in transitions("step", ALIGN, rows=STEP_ROWS + BATCH_ROWS):
        claim = step_claim(t, label, selecting(GROUPS_AGREE, checks=(PUBLISH_IN_EVERY_GROUP,)))
        first_row = [tr.materialize for tr in t.outcome.info["traces"][:1]]
        claim.cover = conj(*first_row)
        yield claim


@obligation("system.no_token_dropped", "all",
            f"after every action {NO_TOKEN_DROPPED.statement}", shardable=True, lemmas=ACTION_LEMMAS)
@with_solver_params
def no_token_dropped() -> Iterator[Claim]:
    for action in ("admit", "free", "step"):
        for label, t in transitions(action, rows=STEP_ROWS + BATCH_ROWS):
            yield step_claim(t, label, selecting(NO_TOKEN_DROPPED, REFINEMENT))


@obligation("system.canonical", "all", CANONICAL.statement, shardable=True, lemmas=ACTION_LEMMAS)
@with_solver_params
def canonical() -> Iterator[Claim]:
    for action in ("admit", "free", "step"):
        for label, t in transitions(action, ALIGN, rows=STEP_ROWS + BATCH_ROWS):
            yield step_claim(t, label, selecting(CANONICAL))


# --------------------------------------------------------------------------
# Probes: each caller assumption dropped in a step shape where it matters
# --------------------------------------------------------------------------

PROBE_GEOMETRIES: dict[str, Geometry] = {
    "system": SYSTEM_GEOMETRY,
    "wide_block": Geometry(max_num_reqs=2, block_size=4, window=2, ring_len=4),
    "unit_block": Geometry(max_num_reqs=2, block_size=1, window=2, ring_len=4),
}
"""``wide_block`` has blocks longer than the ring's step room (bs > R - W), so
``decode_row_fits`` is not implied by ``decode_within_block``; ``unit_block``
has decode rows longer than a block (R - W > bs)."""


@dataclass(frozen=True)
class Probe:
    """Where to look for the counterexample of a set of assumptions dropped
    together (usually one; several when they overlap, each implying what the
    step needs of the others)."""

    assumptions: tuple[str, ...]
    conv: str
    geometry: str
    case: StepCase
    num_cols: int = 2
    fresh: tuple[int, ...] | None = None  # override fresh slot ids (per request)

    @property
    def name(self) -> str:
        """The dropped set, ``+``-joined (a single assumption's own name)."""
        return "+".join(self.assumptions)


def probe_transition(pr: Probe) -> Transition:
    p = system_params(SYSTEM_CONVENTIONS[pr.conv], PROBE_GEOMETRIES[pr.geometry], num_cols=pr.num_cols,
                      num_slots=2 * pr.num_cols + 3)
    return case_transition(p, pr.case, pr.fresh)


def probe_claim(pr: Probe, drop: bool | tuple[str, ...] = True, cover_violation: bool = False) -> Claim:
    """The probe's step shape with its set dropped (``drop=True``), some
    members of it (a tuple), or nothing (``False``). With
    ``cover_violation`` the claim covers only states that violate a dropped
    assumption, so a proof says whether the drop removed anything
    (non-vacuous) or the kept assumptions imply the dropped ones (vacuous)."""
    t = probe_transition(pr)
    dropped = pr.assumptions if drop is True else tuple(drop or ())
    if set(dropped) - set(pr.assumptions):
        raise ValueError(f"{sorted(set(dropped) - set(pr.assumptions))} are not in the probe's set {list(pr.assumptions)}")
    cover = negate(conj(*[x for n, x in grouped(t.assumptions) if n in dropped])) if cover_violation else True
    return preservation_claim(t, f"{'+'.join(dropped) or 'nothing'} dropped: {pr.conv} {pr.geometry} {pr.case.label}",
                              dropped=dropped, cover=cover)


def _case(*rows: tuple[int, int, int, int]) -> StepCase:
    return StepCase(tuple(rows))


PROBES: dict[str, Probe] = {pr.name: pr for pr in [
    Probe(("live_col_is_last_block",), "v2-align", "system", _case((0, 0, 0, 0))),
    Probe(("decode_row_fits",), "v2-align", "wide_block", _case((0, 0, 1, 1))),
    Probe(("accepted_within_row",), "v2-align", "system", _case((0, 0, 0, 0))),
    Probe(("row_nonempty",), "v2-align", "system", _case((0, 1, 0, 0))),
    Probe(("decode_within_block",), "v2-align", "unit_block", _case((0, 0, 0, 2)), num_cols=3),
    Probe(("prefill_chunk_on_boundary",), "v2-align", "system", _case((0, 1, 0, 1))),
    Probe(("fresh_distinct_destinations",), "v2-align", "system", _case((0, 1, -1, 0), (1, 1, -1, 0)), fresh=(5, 5)),
    Probe(("groups_agree_on_null",), "v2-align", "system", _case((0, 0, 0, 1))),
    Probe(("is_prefilling_agrees",), "v2-align", "system", _case((0, 0, 0, 0))),
    Probe(("fresh_slot_is_free",), "v2-align", "system", _case((0, 1, -1, 0)), fresh=(3,)),
    Probe(("decode_row_fits", "row_nonempty", "accepted_within_row"), "v2-align", "unit_block", _case((0, 0, 0, 0))),
]}
"""One probe per caller assumption the step relies on, and one per set of
overlapping assumptions needed only together: in ``unit_block`` (bs = 1) a
decode row that stays in block 0 has room for 0 tokens only, which each of
the three alone forbids (dropped one at a time the shape admits no state:
vacuous); dropped together, a 0-token decode breaks refinement
(docs/assumptions.md, "Needed jointly")."""
