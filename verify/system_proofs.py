"""System obligations: the composed model's invariants, proved inductively.

Each action of ``spec.system`` runs on a symbolic state (every variable a Z3
integer) with symbolic picks (``verify.system_steps``). An obligation assumes
the inductive invariant (``invariants`` + ``auxiliary_invariants``) in the
pre-state, the action's guard and its named caller assumptions, and proves
the invariant's labelled conjuncts in the post-state together with the step's
safety checks. The worlds are ``verify.system_world``'s; the probes of each
dropped caller assumption are ``verify.system_probes``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import z3

from replayssm.spec.system import (
    CANONICAL,
    GROUPS_AGREE,
    NO_TOKEN_DROPPED,
    PUBLISH_IN_EVERY_GROUP,
    REFINEMENT,
    Invariant,
    Named,
    State,
    StepPicks,
    check_dropped,
    initial_state,
)
from replayssm.spec.geometry import has_prefix_cache
from replayssm.spec.vocab import Cond, conj, disj, implies

from .obligation import Claim, LazyClaim, PartName, obligation
from .system_steps import (
    StepCase,
    Transition,
    case_pins,
    case_transition,
    context,
    step_cases,
    transitions,
)
from .system_world import (
    ALIGN,
    DIRECT,
    EVERY_INVARIANT,
    REFERENCE_CALLER,
    SYSTEM_CONVENTIONS,
    group_parts,
    world_label,
    world_params,
)
from .terms import Sym, lift
from .traces import trace_from_transition

def preservation_claim(t: Transition[Any], label: str, goal_filter: Callable[[str], bool] = lambda n: True,
                       dropped: tuple[str, ...] = (), cover: Cond = True) -> Claim:
    """``inv(pre) & guard & assumptions => inv(post) & checks``, as named parts."""
    ctx = context()
    goal: list[tuple[PartName, Cond]] = [
        (n, x) for n, x in ctx.grouped(ctx.inductive_invariant(t.post), "inv(post): ") if goal_filter(n)]
    goal += [(n, x) for n, x in ctx.grouped(t.outcome.checks, "check: ") if goal_filter(n)]
    return Claim(goal, hypotheses(t, dropped), cover, label, t.show(), strategy="preprocess",
                 trace_of=lambda m, violated: trace_from_transition(t, m, violated, dropped))


def hypotheses(t: Transition[Any], dropped: tuple[str, ...] = ()) -> list[Named]:
    """What a claim about ``t`` assumes, named: the inductive invariant in the
    pre-state, the guard, the shape's pins and the caller assumptions (less
    the ``dropped`` ones, each of which must name a system assumption)."""
    check_dropped(dropped)
    ctx = context()
    out = list(ctx.grouped(ctx.inductive_invariant(t.pre), "inv(pre): "))
    out.append(("guard", t.guard))
    if t.shape:
        out.append(("shape", conj(*t.shape)))
    return out + [(n, x) for n, x in ctx.grouped(t.assumptions) if n not in dropped]



def step_claim(t: Transition[Any], label: str, goal_filter: Callable[[str], bool] = lambda n: True,
               cover: Cond = True) -> Claim:
    """The claim of one step shape: :func:`preservation_claim`, or for a
    shape proved through another (:func:`reference_of`: a v1 caller's, a
    batch order other than request order) :func:`reference_claim`."""
    if reference_of(t) is not None:
        return reference_claim(t, label, goal_filter, cover)
    return preservation_claim(t, label, goal_filter, cover=cover)


def reference_of(t: Transition[Any]) -> tuple[Transition[StepPicks], str] | None:
    """The step shape ``t`` is proved through, and its name, or None when it
    is proved against the invariant itself: a v1 caller's shape through its
    reference caller's (:data:`REFERENCE_CALLER`), and a shape whose rows
    are in another batch order than request order through the same rows in
    request order (``StepCase.lead``), both at once for a reordered v1 shape."""
    if t.case is None:
        return None
    caller = world_label(t.p)
    ref_caller, lead = REFERENCE_CALLER.get(caller, caller), t.case.lead
    if (ref_caller, lead) == (caller, t.case):
        return None
    name = ref_caller if lead == t.case else f"{ref_caller} in request order"
    return case_transition(world_params(ref_caller), lead), name


def reference_claim(t: Transition[StepPicks], label: str, goal_filter: Callable[[str], bool] = lambda n: True,
                    cover: Cond = True) -> Claim:
    """A step shape proved through another (:func:`reference_of`): under the
    same hypotheses (the invariant in the pre-state, guard, caller
    assumptions, shape: the same terms, since both steps read the same state
    and picks but for a batch order fixed in each), the step leaves every
    variable the invariant reads as the reference step does, and passes its
    own safety checks. With the reference shape's claim (the invariant after
    its step) the invariant after this step follows; a bug of one caller or
    one batch order alone shows as the first variable the two steps leave
    differently."""
    ref_of = reference_of(t)
    if ref_of is None:
        raise ValueError(f"{label}: a reference claim is of a step shape proved through another "
                         f"(a v1 caller's, or rows out of request order)")
    ref, ref_label = ref_of
    claim = preservation_claim(t, label, lambda n: n.startswith("check: ") and goal_filter(n), cover=cover)
    if [lift(x).get_id() for _, x in hypotheses(ref)] != [lift(x).get_id() for _, x in claim.assumptions]:
        raise ValueError(f"{label}: the {ref_label} step of this shape rests on other hypotheses; "
                         f"prove it directly (preservation_claim)")
    claim.goal = context().same_state(t, ref, ref_label) + claim.goal
    return claim



def shape_claim(t: Transition[StepPicks], cover: Callable[[Transition[StepPicks]], Cond] = lambda t: True) -> Claim:
    """One step shape for every caller and every batch order of its rows, as
    one claim: the invariant and the checks after the step of ``t``'s caller
    (one of :data:`DIRECT`, its rows in request order), then for each caller
    and batch order proved through it (:func:`reference_of`) the parts of its
    :func:`reference_claim`, named after them. The hypotheses are the same
    terms (``reference_claim`` checks), so one query, one preprocessing and
    one non-vacuity check serve every caller and order of the shape (about
    27% less solving than a claim per caller); their covers must be the same
    term too."""
    label, lead = shape_label(t), direct_case(t)
    direct = world_label(t.p)
    callers = [caller for caller, ref in REFERENCE_CALLER.items() if ref == direct]
    claim = preservation_claim(t, label, cover=cover(t))
    for caller in [direct, *callers]:
        for case in [lead, *lead.reorderings()]:
            if (caller, case) == (direct, lead):
                continue
            follower = case_transition(world_params(caller), case)
            name = caller if case == lead else f"{caller} {case.label}"
            if lift(cover(follower)).get_id() != lift(claim.cover).get_id():
                raise ValueError(f"{label}: {name} covers another situation than {direct}; prove it on its own")
            claim.goal += [(f"{name}: {n}", x) for n, x in reference_claim(follower, label).goal]
            claim.show.update({f"{name} {k}": v for k, v in follower.show().items() if k.startswith("post.")})
    return claim


def direct_case(t: Transition[StepPicks]) -> StepCase:
    """The shape ``t`` narrows the step to, when it is proved directly (not through another: :func:`reference_of`)."""
    if t.case is None or reference_of(t) is not None:
        raise ValueError("shape_claim: a claim of one step shape needs the case_transition of a shape proved directly")
    return t.case


def shape_label(t: Transition[StepPicks]) -> str:
    """The case name of :func:`shape_claim`'s claim of ``t``: the callers and
    the batch orders it proves, and the shape."""
    case, direct = direct_case(t), world_label(t.p)
    callers = [caller for caller, ref in REFERENCE_CALLER.items() if ref == direct]
    return f"step {' + '.join([direct, *callers])}: {case.label}{', in either batch order' if case.reorderings() else ''}"


def check_callers_share_shapes(rows: tuple[int, ...]) -> None:
    """The step shapes listed for a caller proved through another
    (:data:`REFERENCE_CALLER`) are that caller's: otherwise some of its
    shapes (those ``system.shapes_cover`` lists for it) would go unproved."""
    for caller, ref in REFERENCE_CALLER.items():
        if ref not in DIRECT:
            raise ValueError(f"{caller} is proved through {ref}, which is not proved directly ({DIRECT})")
        mine, theirs = (world_params(c) for c in (caller, ref))
        for n in rows:
            if step_cases(mine, n) != step_cases(theirs, n):
                raise ValueError(f"{caller} and {ref} list different {n}-row step shapes; "
                                 f"prove {caller}'s on their own")



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


def _preserves(action: str, cover: Callable[[Transition[Any]], Cond] = lambda t: True,
               rows: tuple[int, ...] = (1,)) -> Callable[[], Iterator[Claim]]:
    def build() -> Iterator[Claim]:
        if action == "step":
            check_callers_share_shapes(rows)
            for _, t in transitions(action, DIRECT, rows):
                if t.case is not None and t.case == t.case.lead:  # the other orders are proved in its claim
                    # built when a shard takes it: each shard builds only its own shapes' claims
                    yield LazyClaim(shape_label(t), partial(shape_claim, t, cover))
            return
        yield from distinct_claims(preservation_claim(t, label, cover=cover(t))
                                   for label, t in transitions(action, rows=rows))
    build.__name__ = f"preserves_{action}"
    return with_solver_params(build)


@obligation("system.initial", "system",
            "the initial state (no request, every slot free) satisfies the inductive invariant",
            invariants=EVERY_INVARIANT)
def initial() -> list[Claim]:
    claims = []
    for label in SYSTEM_CONVENTIONS:
        st = initial_state(world_params(label))
        goal: list[tuple[PartName, Cond]] = [
            (n, Sym(z3.BoolVal(bool(x)))) for n, x in group_parts(context().inductive_invariant(st))]
        claims.append(Claim(goal, [], True, label))
    return distinct_claims(claims)


system_admit = obligation(
    "system.admit", "admit",
    "admit (a prefix-cache hit on published blocks, or none) preserves the inductive invariant", shardable=True,
    invariants=EVERY_INVARIANT)(
    _preserves("admit", lambda t: t.picks.hit == 1 if has_prefix_cache(t.p.mode) else True))
system_free = obligation(
    "system.free", "free",
    "free / preempt preserves the inductive invariant (a freed published block stays registered)", shardable=True,
    invariants=EVERY_INVARIANT)(
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
    every_case=True, invariants=EVERY_INVARIANT, isolated=True)(_preserves("step", rows=STEP_ROWS))
system_step_batch = obligation(
    "system.step_batch", "step",
    "one engine step with both requests scheduled, in either batch order (v1: one program per row; v2: "
    "rows mapped by idx_mapping), every pair of row shapes (decode or prefill, every live-column move) "
    "preserves the inductive invariant and passes every safety check (no materialize race; a v1 pair, or a "
    "pair out of request order: leaves what the v2 pair in request order leaves and passes its own checks); "
    "every pair admits some state", shardable=True,
    every_case=True, invariants=EVERY_INVARIANT, isolated=True)(_preserves("step", rows=BATCH_ROWS))


def pinned_layout_is_general(st: State) -> Cond:
    """What makes the step shapes' fixed slot ids a renaming of any state's:
    in each group, two table entries that name one real slot belong to
    different requests and the same column (a shared published block). With
    fresh slots unreferenced (``fresh_slot_is_free``) and distinct
    (``fresh_distinct_destinations``), ids can then be renamed to the pinned
    ones (``system_steps.ProofContext.case_transition``)."""
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
    for label in SYSTEM_CONVENTIONS:
        p = world_params(label)
        if set(STEP_ROWS + BATCH_ROWS) != set(range(1, p.num_reqs + 1)):
            raise ValueError(f"step shapes cover {STEP_ROWS + BATCH_ROWS} rows; a step of {p.num_reqs} "
                             f"requests schedules 1..{p.num_reqs}")
        ctx = context()
        t = ctx.general_step(p)
        shapes = [case_pins(t, case) for n in STEP_ROWS + BATCH_ROWS for case in step_cases(p, n)]
        facts = list(ctx.grouped(ctx.inductive_invariant(t.pre), "inv(pre): "))
        facts += [("guard", t.guard)] + ctx.grouped(t.assumptions)
        goal: list[tuple[PartName, Cond]] = [
            ("a listed shape", disj(*shapes)), ("slot ids as pinned, up to renaming", pinned_layout_is_general(t.pre))]
        yield Claim(goal, facts, True, label, t.show(), strategy="preprocess",
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
            "group or in none", shardable=True, lemmas=STEP_LEMMAS, invariants=(GROUPS_AGREE.name,))
@with_solver_params
def groups_agree() -> Iterator[Claim]:
    for label, t in transitions("step", ALIGN, rows=STEP_ROWS + BATCH_ROWS):
        claim = step_claim(t, label, selecting(GROUPS_AGREE, checks=(PUBLISH_IN_EVERY_GROUP,)))
        first_row = [tr.materialize for tr in t.outcome.info["traces"][:1]]
        claim.cover = conj(*first_row)
        yield claim


@obligation("system.no_token_dropped", "all",
            f"after every action {NO_TOKEN_DROPPED.statement}", shardable=True, lemmas=ACTION_LEMMAS,
            invariants=(NO_TOKEN_DROPPED.name, REFINEMENT.name))
@with_solver_params
def no_token_dropped() -> Iterator[Claim]:
    for action in ("admit", "free", "step"):
        for label, t in transitions(action, rows=STEP_ROWS + BATCH_ROWS):
            yield step_claim(t, label, selecting(NO_TOKEN_DROPPED, REFINEMENT))


@obligation("system.canonical", "all", CANONICAL.statement, shardable=True, lemmas=ACTION_LEMMAS,
            invariants=(CANONICAL.name,))
@with_solver_params
def canonical() -> Iterator[Claim]:
    for action in ("admit", "free", "step"):
        for label, t in transitions(action, ALIGN, rows=STEP_ROWS + BATCH_ROWS):
            yield step_claim(t, label, selecting(CANONICAL))
