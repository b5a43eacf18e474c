"""Bounded model checks of the composed system from its initial state.

Two checkers share the spec's actions, guards, assumptions and checks:

- :func:`run_bmc`, symbolic (Z3): every depth ``d`` chooses one action
  (``admit`` or ``free`` of a concrete request, or an engine ``step``) with
  symbolic picks; the next state is the chosen action's outcome, renamed into
  fresh variables ``s<d>.*``. Depths are checked one by one on one incremental
  solver; a violation comes back as a trace (``verify.traces``). It answers
  quickly to depth 2 only: the obligation ``system.bmc_symbolic`` and the
  searches for counterexamples with an assumption dropped use it.
- :func:`explicit_bmc`, exhaustive explicit-state exploration
  (``spec.system.explore``) over a reduced pick domain: the obligation
  ``system.bmc`` at depth 8, for the v2 and the v1 caller (one case each,
  explored lazily so that shards split them), and ``system.bmc_odd_ring``
  in a world whose ring length is not a power of two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import z3

from replayssm.spec.system import (
    ACTIONS,
    Exploration,
    Named,
    Picks,
    State,
    SystemParams,
    check_dropped,
    flat_picks,
    initial_state,
    invariants,
)
from replayssm.spec.geometry import Geometry
from replayssm.spec.vocab import Cond, Value, conj, ite, within

from .obligation import Claim, PartName, obligation
from .system_world import EVERY_INVARIANT, group_parts, symbolic_picks, world_params
from .terms import Sym, lift, named_int

BMC_DEPTH = 8
"""The depth ``system.bmc`` checks."""


class Cuts:
    """Names intermediate values of a transition with fresh variables; the
    equations defining them become assumptions (definitions, always satisfiable)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.definitions: list[Cond] = []

    def __call__(self, name: str, value: Value) -> Value:
        z = lift(value)
        if z3.is_const(z) and not z3.is_int_value(z):
            return value
        var = named_int(f"{self.tag}.{name}")
        self.definitions.append(var == value)
        return var


@dataclass(frozen=True)
class Choice:
    """One action the selector can take at a depth: a name and fixed picks."""

    action: str
    fixed: tuple[tuple[str, int], ...] = ()

    @property
    def label(self) -> str:
        return self.action + "".join(f" {k}={v}" for k, v in self.fixed)


def choices(p: SystemParams) -> list[Choice]:
    return ([Choice("step")] + [Choice("admit", (("req", r),)) for r in range(p.num_reqs)]
            + [Choice("free", (("req", r),)) for r in range(p.num_reqs)])


@dataclass
class Unrolling:
    """The unrolled transition relation, depth by depth."""

    p: SystemParams
    dropped: tuple[str, ...] = ()
    states: list[State] = field(default_factory=list)
    selectors: list[Sym] = field(default_factory=list)
    picks: list[dict[str, Picks]] = field(default_factory=list)
    facts: list[Named] = field(default_factory=list)
    properties: list[list[Named]] = field(default_factory=list)
    options: list[Choice] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_dropped(self.dropped)
        self.options = choices(self.p)
        self.states.append(initial_state(self.p))

    def extend(self) -> None:
        """Add one depth: a selector, each option's picks, the next state."""
        d = len(self.selectors)
        pre = self.states[-1]
        cuts = Cuts(f"d{d}")
        pre = State(pre.p, pre.v, cuts)
        sel = named_int(f"d{d}.action")
        self.selectors.append(sel)
        facts: list[Named] = [("selector", conj(sel >= 0, sel < len(self.options)))]
        props: list[Named] = []
        picks_here: dict[str, Picks] = {}
        outcomes = []
        for i, ch in enumerate(self.options):
            a = ACTIONS[ch.action]
            picks = replace(symbolic_picks(self.p, ch.action, f"d{d}.{ch.label.replace(' ', '_')}"), **dict(ch.fixed))
            picks_here[ch.label] = picks
            out = a.apply(pre, picks)
            on = sel == i
            # every pick within its domain, also where the guard leaves it free,
            # so a model's trace replays through run_action
            leaves = flat_picks(picks)
            facts.append(("pick domain", conj(*[within(leaves[s.name], s.lo, s.hi) for s in a.picks(self.p)])))
            facts.append(("guard", ite(on, a.guard(pre, picks), True)))
            for n, x in group_parts(a.assumptions(pre, picks)):
                if n not in self.dropped:
                    facts.append((n, ite(on, x, True)))
            props += [(f"check: {n}", ite(on, x, True)) for n, x in group_parts(out.checks)]
            outcomes.append(out.state)
        facts.append(("definitions", conj(*cuts.definitions)))
        nxt: dict[str, list] = {}
        for name, vals in pre.v.items():
            merged = []
            for j in range(len(vals)):
                value: Value = outcomes[-1].v[name][j]
                for i in range(len(self.options) - 2, -1, -1):
                    value = ite(sel == i, outcomes[i].v[name][j], value)
                var = named_int(f"s{d + 1}.{name}[{j}]")
                facts.append(("definitions", var == value))
                merged.append(var)
            nxt[name] = merged
        post = State(self.p, nxt)
        props += [(f"inv: {n}", x) for n, x in group_parts(invariants(post))]
        self.states.append(post)
        self.picks.append(picks_here)
        self.facts += facts
        self.properties.append(props)


@dataclass
class BmcResult:
    """The outcome of a bounded run."""

    status: str
    depth: int
    seconds: float
    violated: list[str] = field(default_factory=list)
    trace: dict | None = None


def run_bmc(p: SystemParams, depth: int = BMC_DEPTH, *, dropped: tuple[str, ...] = (),
            timeout_ms: int = 60_000) -> BmcResult:
    """Check every depth up to ``depth``; stop at the first violation."""
    from .traces import trace_from_model

    start = time.perf_counter()
    u = Unrolling(p, dropped)
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    for d in range(depth):
        n_facts = len(u.facts)
        u.extend()
        for _, f in u.facts[n_facts:]:
            s.add(lift(f))
        props = u.properties[-1]
        s.push()
        s.add(z3.Not(z3.And(*[lift(x) for _, x in props])))
        verdict = s.check()
        if verdict == z3.sat:
            m = s.model()
            bad = [n for n, x in props if not z3.is_true(m.eval(lift(x), model_completion=True))]
            trace = trace_from_model(u, m, violated=bad)
            return BmcResult("failed", d + 1, time.perf_counter() - start, bad, trace)
        s.pop()
        if verdict == z3.unknown:
            return BmcResult("unknown", d + 1, time.perf_counter() - start, [s.reason_unknown()], None)
        for _, x in props:
            s.add(lift(x))
    return BmcResult("proved", depth, time.perf_counter() - start)


BMC_DOMAIN = {"num_slots": 5, "num_streams": 1, "prompts": (3,)}
"""The explicit check's domain: 2 requests of one token stream (so every
admission may hit the other's published blocks), prompts of 3 tokens over
2-token blocks, 2 columns, 4 real slots per group, 2 groups of 1 and 2
layers; decode rows of 1 or 2 tokens with every accepted count."""


def explicit_bmc(conv_label: str = "v2-align", depth: int = BMC_DEPTH, dropped: tuple[str, ...] = (),
                 extra: Callable[[State], Iterator[tuple[str, Picks]]] | None = None,
                 **domain: Any) -> tuple[SystemParams, Exploration]:
    """Exhaustive bounded exploration (``spec.system.explore``) of every run of
    ``depth`` actions from the initial state: the same actions, guards,
    assumptions and checks as the proofs, evaluated on Python ints."""
    from replayssm.spec.system import explore

    dom = {**BMC_DOMAIN, **domain}
    prompts = dom.pop("prompts")
    p = world_params(conv_label, **dom)
    return p, explore(p, depth, prompts=prompts, dropped=dropped, extra=extra)


BMC_CONVENTIONS = ("v2-align", "v1-align")
"""Both callers in align mode, the one that publishes and shares prefixes."""


class ExplicitClaim(Claim):
    """One explicit exploration as a claim whose exploration runs when its
    goal is first read: building the cases stays cheap, so ``prove --jobs N``
    hands the explorations of one obligation to different processes (a shard
    never explores the cases it skips) and ``prove --list`` explores none."""

    def __init__(self, case: str, explore_run: Callable[[], tuple[SystemParams, Exploration]], depth: int,
                 source: str, sharing: bool = True) -> None:
        self.assumptions = [("bounded_domain", Sym(z3.BoolVal(True)))]
        self.case, self.memories, self.strategy, self.trace_of = case, [], "parts", None
        self._explore, self._depth, self._source, self._sharing = explore_run, depth, source, sharing
        self._parts: dict[str, Any] | None = None

    def _result(self) -> dict[str, Any]:
        """Explore once; the goal, cover, shown statistics and trace of the run
        (with ``sharing``, some reachable state must share a block)."""
        if self._parts is None:
            from replayssm.base.system_traces import record_run

            p, r = self._explore()
            trace = None
            if r["status"] == "failed":
                trace = record_run(p, r["run"], source=self._source, violated=r["violated"], checked=False)
            shared = r.get("shared_states", 0)
            goal = [(f"no violation within depth {self._depth}" if r["status"] == "proved"
                     else f"violated at depth {r['depth']}: {', '.join(r['violated'])}",
                     Sym(z3.BoolVal(r["status"] == "proved")))]
            if self._sharing:
                goal.append(("some reachable state shares a block (prefix sharing is exercised)",
                             Sym(z3.BoolVal(shared > 0))))
            exercised = r["depth"] >= self._depth and (shared > 0 or not self._sharing)
            self._parts = {
                "goal": goal, "cover": Sym(z3.BoolVal(exercised)), "trace": trace,
                "show": {"depth": r["depth"], "states": r["states"], "transitions": r["transitions"],
                         "states_sharing_a_block": shared}}
        return self._parts

    goal = property(lambda self: self._result()["goal"])
    cover = property(lambda self: self._result()["cover"])
    show = property(lambda self: self._result()["show"])
    trace = property(lambda self: self._result()["trace"])


@obligation("system.bmc", "system",
            f"bounded model check of the composed system from the initial state, depth {BMC_DEPTH}, by "
            "exhaustive exploration, for v1 and v2 callers: 2 requests sharing prefixes, 2 cache groups (1 and "
            "2 layers); every step's safety checks and the system invariants hold in every reachable state",
            shardable=True, invariants=EVERY_INVARIANT)
def bmc() -> Iterator[Claim]:
    for label in BMC_CONVENTIONS:
        yield ExplicitClaim(f"explicit {label}", partial(explicit_bmc, label), BMC_DEPTH,
                            f"system.bmc {label}")


ODD_RING = Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=5)
"""A ring of 5 rows: the other system worlds' ring is 4, a power of two,
where a bit mask computes the ring's modulo too; here a mask in place of the
modulo leaves the trackers on the wrong rows."""

ODD_RING_DEPTH = 6
"""The depth ``system.bmc_odd_ring`` explores."""

ODD_RING_DOMAIN: dict[str, Any] = {"conv_label": "v2-none", "depth": ODD_RING_DEPTH, "geo": ODD_RING, "prompts": (1,)}
"""Mode none (no publish resets the trackers, so the ring wraps: the first
checkpoint after a one-token prompt comes at depth 4), prompts of 1 token."""


@obligation("system.bmc_odd_ring", "system",
            f"bounded model check with a ring of {ODD_RING.ring_len} rows (not a power of two), depth "
            f"{ODD_RING_DEPTH}, by exhaustive exploration, v2 caller in mode none (the ring wraps): 2 requests, "
            "2 cache groups; every step's safety checks and the system invariants hold in every reachable state",
            invariants=EVERY_INVARIANT)
def bmc_odd_ring() -> Iterator[Claim]:
    yield ExplicitClaim("explicit v2-none ring 5", lambda: explicit_bmc(**ODD_RING_DOMAIN), ODD_RING_DEPTH,
                        "system.bmc_odd_ring v2-none", sharing=False)


NONE_CONVENTIONS = ("v2-none", "v1-none")
"""Both callers in mode none."""

NONE_PROMPTS = (3,)
"""Prompts of a block and a half: in mode none the one live column holds
them, so prefill chunks run past the first block (from 0 to 3, or from 2)."""


@obligation("system.bmc_none", "system",
            f"bounded model check in mode none, depth {BMC_DEPTH}, by exhaustive exploration, for v1 and v2 "
            "callers: a one-column block table (as vLLM sizes it without prefix caching) and prompts of 3 tokens "
            "over 2-token blocks, so prefill chunks run past the first block in that column; every step's safety "
            "checks and the system invariants hold in every reachable state", shardable=True,
            invariants=EVERY_INVARIANT)
def bmc_none() -> Iterator[Claim]:
    for label in NONE_CONVENTIONS:
        yield ExplicitClaim(f"explicit {label} prompts 3",
                            partial(explicit_bmc, label, prompts=NONE_PROMPTS), BMC_DEPTH,
                            f"system.bmc_none {label}", sharing=False)


ALL_DEPTH = 7
"""The depth ``system.bmc_all`` explores (3003 states; depth 8, 6647 states, doubles its time)."""


@obligation("system.bmc_all", "system",
            f"bounded model check in mode all under an A1-era host (which publishes in it), depth {ALL_DEPTH}, by "
            "exhaustive exploration, v2 caller: 2 requests sharing prefixes, 2 cache groups, prefill chunks "
            "starting and ending anywhere, each writing every boundary it crosses; every step's safety checks "
            "and the system invariants hold in every reachable state (under the reference's host, which does "
            "not publish in all mode, they do not: verify/system_findings.py)", invariants=EVERY_INVARIANT)
def bmc_all() -> Iterator[Claim]:
    yield ExplicitClaim("explicit v2-all", partial(explicit_bmc, "v2-all", ALL_DEPTH), ALL_DEPTH, "system.bmc_all v2-all")


SYMBOLIC_DEPTH = 2
"""The depth the symbolic unrolling answers quickly (depth 3 takes about 17 s, depth 4 over 300 s)."""


@obligation("system.bmc_symbolic", "system",
            f"bounded model check by symbolic unrolling (Z3), depth {SYMBOLIC_DEPTH}, every pick symbolic over "
            "its whole domain: 2 requests, 2 token streams, 2 cache groups; every step's checks and the system "
            "invariants hold", invariants=EVERY_INVARIANT)
def bmc_symbolic() -> Iterator[Claim]:
    p = world_params("v2-align", num_slots=5)
    u = Unrolling(p)
    goal: list[tuple[PartName, Cond]] = []
    for d in range(SYMBOLIC_DEPTH):
        u.extend()
        goal.append((f"depth {d + 1}", conj(*[x for _, x in u.properties[-1]])))
    cover = conj(u.states[-1].get("active", 0) == 1, u.states[-1].get("N", 0) > 0)
    from .traces import trace_from_model

    yield Claim(goal, u.facts, cover, f"symbolic v2-align depth {SYMBOLIC_DEPTH}", strategy="preprocess",
                trace_of=lambda m, violated: trace_from_model(u, m, violated))
