"""Proof obligations: declared as data, discharged by Z3, reported one per line.

An :class:`Obligation` names a (transition x property) pair. Its ``build``
returns :class:`Claim` cases (one per convention combination, say); each case
holds when its named assumptions imply its goal. Every obligation also carries
a non-vacuity check: the assumptions together with the case's ``cover``
(the situation the property is about, e.g. "a plan is active") are
satisfiable for at least one case, or for every case when the obligation
says ``every_case``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Union

import z3

from .counterexamples import scenario
from .memory import SymbolicMemory
from .proof_cache import ProofCache
from .terms import lift

TIMEOUT_MS = 20_000
"""The solver's default limit per query, in wall-clock milliseconds
(:attr:`Obligation.timeout_ms`): a query past it is ``unknown``."""


STRATEGIES = {
    "parts": "each goal part on its own, incrementally, in the claim's order: the first part that can fail is "
             "the one named",
    "whole_goal": "the conjunction of the open goal parts in one query first, and each part on its own only when "
                  "that query is not unsat (to name the first violated part, as with parts): for goals of many "
                  "parts that each take the solver a few milliseconds (bounds, int32, races), where one query "
                  "costs about half of one per part",
    "preprocess": "the whole goal in one query after Z3's equation solving and simplification (PREPROCESS), the "
                  "first violated part found again part by part: for large claims whose assumptions pin many "
                  "variables (the system step shapes, the kernels' memory safety)",
    "preprocess_parts": "each goal part in a fresh query after PREPROCESS, in the claim's order: for goals of a few "
                        "parts each hard in one query with the others, whose incremental solver (no preprocessing) "
                        "is slower (the row-blocked kernel's per-lane equivalence: 1.6 times faster than parts)",
}
"""How a claim's goal is solved, by name (``Claim.strategy``)."""

PartName = Union[str, Callable[[], str]]
"""A goal part's name; a callable is evaluated only for a counterexample."""


@dataclass
class Claim:
    """One case of an obligation: ``assumptions => goal``.

    ``goal`` is a list of named parts (a single term given is the one part
    named ``goal``); a counterexample names the parts it violates. Its
    ``strategy`` (one of :data:`STRATEGIES`) says how the parts are solved."""

    goal: list[tuple[PartName, Any]]
    assumptions: list[tuple[str, Any]]
    cover: Any = True
    case: str = ""
    show: dict[str, Any] = field(default_factory=dict)
    memories: list[SymbolicMemory] = field(default_factory=list)
    trace: dict | None = None
    """A replayable system trace (``base.system_traces`` format) of the failure
    this claim already knows of (the explicit BMC), saved with its scenario."""
    strategy: str = "parts"
    trace_of: Callable[[z3.ModelRef, list[str]], dict] | None = None
    """Builds the system trace (``base.system_traces`` format) of a counterexample
    model, given the violated parts' names: the run ``explain`` draws."""

    def __post_init__(self) -> None:
        if not isinstance(self.goal, list):
            self.goal = [("goal", self.goal)]
        if self.strategy not in STRATEGIES:
            raise ValueError(f"a claim's strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")


class LazyClaim(Claim):
    """A case whose claim is built on first use: ``prove`` skips the cases
    another shard takes without building them (a kernel case's programs, a
    system step shape's claim), so a shard builds only the cases it proves."""

    _HEAVY = frozenset(f.name for f in fields(Claim)) - {"case"}
    """Every field of a claim but its case label: reading one builds it."""

    def __init__(self, case: str, make: Callable[[], Claim]) -> None:  # noqa: D107 - no dataclass init
        object.__setattr__(self, "case", case)
        object.__setattr__(self, "_make", make)
        object.__setattr__(self, "_built", None)

    def __getattribute__(self, name: str) -> Any:
        if name in LazyClaim._HEAVY:
            built = object.__getattribute__(self, "_built")
            if built is None:
                built = object.__getattribute__(self, "_make")()
                object.__setattr__(self, "_built", built)
            return getattr(built, name)
        return object.__getattribute__(self, name)


@dataclass(frozen=True)
class Obligation:
    """A named property of one transition."""

    name: str
    transition: str
    statement: str
    build: Callable[[], Iterable[Claim]]
    shardable: bool = False
    """Building a case is cheap next to solving it, so ``prove --jobs N`` may
    split the cases over processes (:func:`prove` with ``shard``)."""
    lemmas: tuple[str, ...] = ()
    """Obligations whose goal parts this one restates: when they are proved
    in the same run, a part found verbatim (same assumptions, same term) in
    one of their cases is not solved again (:func:`prove` with ``lemmas``)."""
    every_case: bool = False
    """Non-vacuity per case: every case's assumptions must admit its cover
    (a case that no state satisfies proves nothing and is reported), not only
    one case's."""
    sources: tuple[str, ...] = ()
    """Files outside ``spec/`` and ``verify/`` the queries are built from (a
    kernel's source, for the kernel-source proofs): the proof cache keeps a
    whole proved obligation only while they are unchanged too."""
    invariants: tuple[str, ...] = ()
    """The system invariants (``spec.system.INVARIANTS``, by name) whose
    preservation or truth this obligation proves, for ``prove --invariant``."""
    timeout_ms: int = TIMEOUT_MS
    """The solver's limit per query of this obligation (goal parts and
    non-vacuity check), in wall-clock milliseconds: a query past it makes
    the obligation ``unknown``. A wall-clock limit counts the time other
    processes take the CPU from the solver, so an obligation whose queries
    a loaded machine can stretch past the default gives a larger one."""
    isolated: bool = False
    """Each case's queries are solved in a Z3 context of the case's own, its
    terms translated into it: how long a query takes then depends on the
    case alone, not on which terms the process made before (Z3's
    simplifier orders terms by their ids, which follow the order they were
    made in, so the same query can take another path after other cases were
    built in the same worker)."""


@dataclass
class Result:
    """The outcome of one obligation."""

    name: str
    status: str
    seconds: float
    assumptions: list[str]
    cases: int = 0
    counterexample: dict | None = None
    detail: str = ""
    covered: bool = False
    reused: int = 0
    """Goal parts not solved again: proved verbatim by a lemma in this run."""
    cached: bool = False
    """Reported from the proof cache: proved on this very source tree before."""
    cases_cached: int = 0
    """Cases whose exact query the proof cache held as proved (not solved again)."""
    cpu_seconds: float = 0.0
    """The CPU time of the processes proving it (user + system, summed over
    the shards): on a loaded machine, the figure ``seconds`` (wall time) is not."""

    @classmethod
    def from_json(cls, d: dict, cached: bool = False) -> "Result":
        """The result :meth:`as_json` wrote."""
        return cls(d["name"], d["status"], d["seconds"], list(d["assumptions"]), d["cases"],
                   d.get("counterexample"), d.get("detail", ""), d["status"] == "proved",
                   d.get("parts_proved_by_lemmas", 0), cached, cpu_seconds=d.get("cpu_seconds", 0.0))

    def as_json(self) -> dict:
        out = {
            "name": self.name,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "cpu_seconds": round(self.cpu_seconds, 4),
            "assumptions": self.assumptions,
            "cases": self.cases,
        }
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        if self.detail:
            out["detail"] = self.detail
        if self.reused:
            out["parts_proved_by_lemmas"] = self.reused
        if self.cached:
            out["cached"] = True
        if self.cases_cached:
            out["cases_cached"] = self.cases_cached
        return out


REGISTRY: dict[str, Obligation] = {}


def obligation(name: str, transition: str, statement: str, shardable: bool = False,
               lemmas: tuple[str, ...] = (), every_case: bool = False, sources: tuple[str, ...] = (),
               invariants: tuple[str, ...] = (), timeout_ms: int = TIMEOUT_MS, isolated: bool = False
               ) -> Callable[[Callable[[], Iterable[Claim]]], Callable[[], Iterable[Claim]]]:
    """Register ``build`` as the obligation ``name`` (the fields of :class:`Obligation`)."""

    def register(build: Callable[[], Iterable[Claim]]) -> Callable[[], Iterable[Claim]]:
        if name in REGISTRY:
            raise ValueError(f"obligation {name!r} is declared twice ({REGISTRY[name].build.__qualname__} and {build.__qualname__})")
        REGISTRY[name] = Obligation(name, transition, statement, build, shardable, lemmas, every_case, sources,
                                    invariants, timeout_ms, isolated)
        return build

    return register


_ELIMINATE = ("propagate-values", "solve-eqs", "elim-uncnstr", "simplify")


def preprocess_tactic(context: z3.Context | None = None) -> z3.Tactic:
    """:data:`PREPROCESS` in ``context`` (None: Z3's main context)."""
    return z3.Then("simplify", *_ELIMINATE, *_ELIMINATE, z3.With("smt", ctx=context, **{"arith.solver": 2}),
                   ctx=context)


PREPROCESS = preprocess_tactic()
"""Substitute the equalities away (shape pins, cut definitions), drop
unconstrained terms, twice (the first round's simplification exposes new
equalities: about 18% less solving on 40 system step shapes), then search
(with Z3's older arithmetic solver: about 30% faster than the default one
on the system step shapes)."""


@dataclass(frozen=True)
class Facts:
    """Terms lifted to Z3 once (each checked to be Boolean here), which
    :func:`new_solver` asserts through Z3's C API: without the Python
    wrapper's sort check and cast of every term on every solver, which cost
    about as much as the solving when each query of a kernel case's failure
    re-added its few hundred facts (``docs/reviewing.md``, Speed)."""

    terms: tuple

    def __post_init__(self) -> None:
        bad = next((t for t in self.terms if not z3.is_bool(t)), None)
        if bad is not None:
            raise TypeError(f"a fact must be Boolean, got {bad.sort()}: {bad}")


def fact_vector(facts: Iterable[Any]) -> Facts:
    """``facts`` lifted once, in order (:class:`Facts`)."""
    return Facts(tuple(lift(f) for f in facts))


def translated(facts: Facts, context: z3.Context | None) -> Facts:
    """``facts`` in ``context`` (None: as they are), translated once: the
    solvers :func:`new_solver` makes in that context then assert them as they
    are (a case of an ``isolated`` obligation asks for a solver per goal part,
    and translating its few hundred facts for each cost as much as a tenth
    of the row-blocked kernel's proofs)."""
    if context is None:
        return facts
    return Facts(tuple(t if t.ctx is context else t.translate(context) for t in facts.terms))


def new_solver(facts: Facts, *extra: Any, preprocess: bool = False, timeout_ms: int | None = None,
               context: z3.Context | None = None) -> z3.Solver:
    """A fresh solver asserting ``facts`` in order, then each of ``extra`` (a
    term or :class:`Facts`): the assertions ``s.add`` would make, in that
    order; with ``context``, a solver of that Z3 context, every term
    translated into it (the caller's stay in theirs; those already of that
    context, as :func:`translated` makes them, are asserted as they are)."""
    if context is None:
        s = PREPROCESS.solver() if preprocess else z3.Solver()
    else:
        s = preprocess_tactic(context).solver() if preprocess else z3.Solver(ctx=context)
    s.set("timeout", TIMEOUT_MS if timeout_ms is None else timeout_ms)
    ctx, solver = s.ctx.ref(), s.solver
    for group in (facts, *extra):
        for t in group.terms if isinstance(group, Facts) else (z3.BoolSort().cast(lift(group)),):
            z3.Z3_solver_assert(ctx, solver, (t if context is None or t.ctx is context else t.translate(context)).as_ast())
    return s


def _model(s: z3.Solver) -> z3.ModelRef:
    """``s``'s model, in Z3's main context (where the claims' terms are)."""
    model = s.model()
    return model if s.ctx == z3.main_ctx() else model.translate(z3.main_ctx())


def _solver(facts: Iterable[Any] | Facts, preprocess: bool = False) -> z3.Solver:
    return new_solver(facts if isinstance(facts, Facts) else fact_vector(facts), preprocess=preprocess)


def _goal_term(parts: list[tuple[PartName, Any]]) -> Any:
    return z3.And(*[lift(t) for _, t in parts]) if parts else z3.BoolVal(True)


def first_violation(claim: Claim, facts: Facts | None = None, timeout_ms: int = TIMEOUT_MS,
                    context: z3.Context | None = None) -> z3.ModelRef | None:
    """A model violating the first goal part (in the claim's order) that can
    fail, or None: the part a reader looks at first, rather than whichever
    part the solver broke in a combined query (``facts``: the claim's
    assumptions as a :func:`fact_vector`, when the caller has it; each query
    limited to ``timeout_ms``, solved in ``context`` as :func:`new_solver`
    does; the model in the main context)."""
    facts = fact_vector(f for _, f in claim.assumptions) if facts is None else facts
    for _, part in claim.goal:
        s = new_solver(facts, z3.Not(lift(part)), preprocess=claim.strategy == "preprocess", timeout_ms=timeout_ms,
                       context=context)
        if s.check() == z3.sat:
            return _model(s)
    return None


class ProvedParts:
    """The goal parts of proved obligations, by the exact assumption terms of
    their case: a part that appears under the same assumptions in a proved
    case needs no second proof. Holds the claims, so the term ids stay valid."""

    def __init__(self, proved: Iterable[Obligation]) -> None:
        self.claims: list[Claim] = []
        self.parts: dict[tuple[int, ...], set[int]] = {}
        for ob in proved:
            for claim in ob.build():
                self.claims.append(claim)
                self.parts.setdefault(self.key(claim), set()).update(lift(t).get_id() for _, t in claim.goal)

    @staticmethod
    def key(claim: Claim) -> tuple[int, ...]:
        return tuple(lift(f).get_id() for _, f in claim.assumptions)

    def open_parts(self, claim: Claim) -> list[tuple[PartName, Any]]:
        """``claim``'s goal parts not already proved."""
        known = self.parts.get(self.key(claim), set())
        return [(n, t) for n, t in claim.goal if lift(t).get_id() not in known]


def _raised(ob: Obligation, case: str, e: Exception, names: list[str], cases: int, seconds: float) -> Result:
    """An exception inside an obligation (building or proving a case) as its
    failure, the exception standing for the counterexample; a spec access
    outside a buffer names the buffer, the index and the buffer's extent."""
    scenario: dict[str, Any] = {"case": case, "violated": [f"raised {type(e).__name__}: {e}"], "values": {},
                                "accesses": [], "raised": type(e).__name__}
    if all(hasattr(e, k) for k in ("buffer", "index", "shape")):  # spec.memory.MemoryFault
        scenario["accesses"] = [{"program": "spec", "kind": "access", "buffer": str(e.buffer),
                                 "index": [int(i) for i in e.index], "value": None,
                                 "shape": [int(n) for n in e.shape]}]
    return Result(ob.name, "failed", seconds, names, cases, counterexample=scenario,
                  detail=f"{case}: raised {type(e).__name__}: {e}" if case else f"raised {type(e).__name__}: {e}")


def prove(ob: Obligation, shard: tuple[int, int] = (0, 1), lemmas: Iterable[Obligation] = (),
          take: Callable[[], int] | None = None, cache: ProofCache | None = None,
          case_done: Callable[[], None] | None = None, steal: Callable[[int], int | None] | None = None) -> Result:
    """Discharge every case of ``ob``; stop at the first failing (or, with
    ``every_case``, vacuous) case. With
    ``shard=(i, n)`` only the cases whose index is ``i`` modulo ``n``, or with
    ``take`` the indices it hands out (increasing, shared with the other
    shards); the non-vacuity verdict is then left to :func:`merge_shards`.
    With ``steal`` as well, once the cases are listed to their end,
    ``steal(count)`` hands out indices below ``count`` that the other shards'
    ``take`` has not handed out yet, one at a time, None when there is none
    left (``verify.runner``: each shard takes its own cases first, those its
    process may have built for another obligation, then helps the others).
    ``lemmas`` are obligations already proved: parts they state verbatim are
    not re-solved (the non-vacuity check still runs). A case whose exact
    query ``cache`` holds as proved is not solved again. An exception while
    building or proving a case is the obligation's failure (:func:`_raised`),
    never the caller's. ``case_done`` is called after each case proved (the
    progress lines of ``verify.runner``); the result's ``cpu_seconds`` is
    this process's CPU time over the call."""
    part_of, shards = shard
    start, cpu = time.perf_counter(), time.process_time()
    result = _prove(ob, part_of, shards, lemmas, take, steal, cache, case_done, start)
    result.cpu_seconds = time.process_time() - cpu
    return result if shards > 1 or result.status != "proved" else merge_shards([result])


def _prove(ob: Obligation, part_of: int, shards: int, lemmas: Iterable[Obligation], take: Callable[[], int] | None,
           steal: Callable[[int], int | None] | None, cache: ProofCache | None,
           case_done: Callable[[], None] | None, start: float) -> Result:
    """:func:`prove`'s cases, its result before the shards are merged."""
    names: list[str] = []
    covered = False
    cases = reused = 0
    case = ""

    def one(claim: Claim) -> Result | None:
        nonlocal case, cases, reused, covered
        case = claim.case
        cases += 1
        for n, _ in claim.assumptions:
            if n not in names:
                names.append(n)
        parts = proved.open_parts(claim)
        reused += len(claim.goal) - len(parts)
        verdict = _prove_case(ob, claim, parts, covered, cache)
        if isinstance(verdict, Result):
            verdict.seconds, verdict.assumptions, verdict.cases = time.perf_counter() - start, names, cases
            return verdict
        covered = covered or verdict
        if case_done is not None:
            case_done()
        return None

    try:
        proved = ProvedParts(lemmas)
        listed: list[Claim | None] = []  # with steal: every case, None once proved here (no built case kept)
        mine = take() if take is not None else None
        for index, claim in enumerate(ob.build()):
            if steal is not None:
                listed.append(claim)
            if take is None and index % shards != part_of or take is not None and index != mine:
                continue
            failure = one(claim)
            if failure is not None:
                return failure
            if steal is not None:
                listed[index] = None
            if take is not None:
                mine = take()
        while steal is not None and (other := steal(len(listed))) is not None:
            stolen, listed[other] = listed[other], None
            if stolen is None:
                raise ValueError(f"case {other} of {ob.name} was handed out twice")
            failure = one(stolen)
            if failure is not None:
                return failure
    except Exception as e:  # noqa: BLE001 - the spec's own failure (MemoryFault first) is this obligation's finding
        return _raised(ob, case, e, names, cases, time.perf_counter() - start)
    return Result(ob.name, "proved", time.perf_counter() - start, names, cases, covered=covered, reused=reused,
                  cases_cached=cache.hits if cache is not None else 0)


class Satisfiable:
    """The covers this process found satisfiable, each with the assumptions
    it was checked under: a cover with a subset of those assumptions is
    satisfiable too (a model of more facts is a model of fewer), so its
    non-vacuity check is answered without a solver. The row-blocked kernel's
    memory safety and int32 cases state the same assumptions and cover, and
    its equivalence cases a subset of them (without the behavioural
    assumptions); a worker proves the same cases of each (``verify.runner``).
    Terms are compared by id, and every term recorded is kept, so no id is
    reused for another term while the record lives; past :data:`SATISFIABLE_KEPT`
    records the oldest is forgotten (a long-lived process, the test suite,
    would otherwise keep every case's terms)."""

    def __init__(self) -> None:
        self.known: dict[int, list[tuple[frozenset[int], tuple]]] = {}
        self.order: deque[int] = deque()

    def implied(self, facts: list[Any], cover: Any) -> bool:
        """Whether ``cover`` was found satisfiable under a superset of ``facts``."""
        ids = frozenset(lift(f).get_id() for f in facts)
        return any(ids <= seen for seen, _ in self.known.get(lift(cover).get_id(), ()))

    def add(self, facts: list[Any], cover: Any) -> None:
        """Record that ``cover`` is satisfiable under ``facts``."""
        terms, key = tuple(lift(f) for f in facts), lift(cover).get_id()
        self.known.setdefault(key, []).append((frozenset(t.get_id() for t in terms), (terms, lift(cover))))
        self.order.append(key)
        if len(self.order) > SATISFIABLE_KEPT:
            oldest = self.order.popleft()
            self.known[oldest].pop(0)
            if not self.known[oldest]:
                del self.known[oldest]


SATISFIABLE_KEPT = 4096
"""The records a :class:`Satisfiable` keeps: more than a whole ``prove`` makes (one per satisfiable
non-vacuity check: each case of an ``every_case`` obligation, one per shard of another)."""


SATISFIABLE = Satisfiable()
"""This process's :class:`Satisfiable` record."""


def _prove_case(ob: Obligation, claim: Claim, parts: list[tuple[PartName, Any]], covered: bool,
                cache: ProofCache | None) -> Result | bool:
    """Prove one case's open ``parts`` and, unless an earlier case was covered
    (and the obligation does not ask ``every_case``), check its cover; the
    case's failure as a :class:`Result` (times filled in by :func:`prove`),
    else whether the cover holds."""
    facts = [f for _, f in claim.assumptions]
    key = query = None
    if cache is not None:
        query = facts + [z3.Not(lift(t)) for _, t in parts]
        key = cache.case_key(ob.name, query, claim.cover, claim.strategy == "preprocess")
        kept = cache.proved_case(key, ob.name, claim.case)
        if kept is not None and (kept["covered"] is not None or covered and not ob.every_case):
            return bool(kept["covered"])
    context = z3.Context() if ob.isolated else None
    vector = translated(fact_vector(facts), context)
    failure = _solve_parts(ob, claim, parts, vector, context)
    if failure is not None:
        return failure
    cover: bool | None = None
    if (ob.every_case or not covered) and SATISFIABLE.implied(facts, claim.cover):
        cover = True
    elif ob.every_case or not covered:
        w = new_solver(vector, claim.cover, preprocess=claim.strategy == "preprocess", timeout_ms=ob.timeout_ms,
                       context=context)
        verdict = w.check()
        if ob.every_case and verdict == z3.unsat:
            return Result(ob.name, "failed", 0, [], 0,
                          detail=f"vacuous case: {claim.case}: its assumptions admit no covered state")
        if ob.every_case and verdict == z3.unknown:
            return Result(ob.name, "unknown", 0, [], 0,
                          detail=f"{claim.case}: non-vacuity check unknown: {w.reason_unknown()}")
        cover = verdict == z3.sat if verdict != z3.unknown else None
        if cover:
            SATISFIABLE.add(facts, claim.cover)
    if cache is not None and key is not None:
        cache.keep_case(key, ob.name, claim.case, cover)
    return bool(cover)


def _solve_parts(ob: Obligation, claim: Claim, parts: list[tuple[PartName, Any]],
                 facts: Facts, context: z3.Context | None = None) -> Result | None:
    """None when every part holds under the case's assumptions (``facts``, a
    :func:`fact_vector`), else the failure (with the first violated part's
    model) or the unknown; each query limited to ``ob.timeout_ms``, solved in
    ``context`` (None: the main one; see ``Obligation.isolated``)."""
    if not parts:  # every part proved by a lemma: nothing to check
        return None
    preprocess = claim.strategy == "preprocess"
    if claim.strategy == "preprocess_parts":
        for _, part in parts:
            s = new_solver(facts, z3.Not(lift(part)), preprocess=True, timeout_ms=ob.timeout_ms, context=context)
            verdict = s.check()
            if verdict == z3.sat:
                return Result(ob.name, "failed", 0, [], 0, counterexample=scenario(claim, _model(s)))
            if verdict == z3.unknown:
                return Result(ob.name, "unknown", 0, [], 0, detail=f"{claim.case}: {s.reason_unknown()}")
        return None
    if claim.strategy == "whole_goal" and len(parts) > 1:
        s = new_solver(facts, z3.Not(_goal_term(parts)), timeout_ms=ob.timeout_ms, context=context)
        if s.check() == z3.unsat:
            return None
    s = new_solver(facts, preprocess=preprocess, timeout_ms=ob.timeout_ms, context=context)
    if preprocess:
        parts = [("goal", _goal_term(parts))]
    for _, part in parts:
        s.push()
        s.add(z3.Not(lift(part)) if context is None else z3.Not(lift(part)).translate(context))
        verdict = s.check()
        if verdict == z3.sat:
            model = (first_violation(claim, facts, ob.timeout_ms, context) if preprocess else None) or _model(s)
            return Result(ob.name, "failed", 0, [], 0, counterexample=scenario(claim, model))
        if verdict == z3.unknown:
            return Result(ob.name, "unknown", 0, [], 0, detail=f"{claim.case}: {s.reason_unknown()}")
        s.pop()
    return None


def merge_shards(results: list[Result]) -> Result:
    """One obligation's verdict from its shards: the first failure or unknown,
    else proved when some case's assumptions admit the covered situation.
    ``seconds`` is summed over the shards (work, not wall time)."""
    seconds, cpu = sum(r.seconds for r in results), sum(r.cpu_seconds for r in results)
    names = list(dict.fromkeys(n for r in results for n in r.assumptions))
    cases = sum(r.cases for r in results)
    for r in results:
        if r.status != "proved":
            return Result(r.name, r.status, seconds, names, cases, r.counterexample, r.detail, cpu_seconds=cpu)
    if not any(r.covered for r in results):
        return Result(results[0].name, "failed", seconds, names, cases,
                      detail="vacuous: no case's assumptions admit the covered situation", cpu_seconds=cpu)
    return Result(results[0].name, "proved", seconds, names, cases, covered=True,
                  reused=sum(r.reused for r in results), cases_cached=sum(r.cases_cached for r in results),
                  cpu_seconds=cpu)
