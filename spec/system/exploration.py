"""The pick generators (random and exhaustive) and the explicit-state explorer."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import lru_cache
from itertools import chain, permutations, product
from typing import TypedDict

from ..geometry import has_prefix_cache
from .invariant import invariants
from .picks import AdmitPicks, FreePicks, Picks, RowPick, StepPicks, cover_picks, request_order
from .lanes import REFUSED, failed_invariants, run_lanes
from .run import StepRefused, default_picks, failed_checks, run_action
from .rows import RowOption, RowRule
from .state import WORKER_BUFFERS, State, SystemParams, code, initial_state
from .step_blocks import covers, needs_fresh_slot


def _free_slots(st: State, g: int) -> list[int]:
    return [s for s in range(1, st.p.num_slots) if st.get("ref", g, s) == 0]


def prefix_hit_levels(st: State, stream: int, prompt: int) -> list[tuple[tuple[int, ...], ...]]:
    """The prefix hits the prefix cache can serve a new request of ``stream``
    with ``prompt`` tokens: entry ``h - 1`` holds the ``hit_slots`` of a hit
    on blocks ``0 .. h - 1`` (each registered in every group; later columns
    hold the domain's low end, unused)."""
    p, bs = st.p, st.p.geo.block_size
    levels: list[tuple[tuple[int, ...], ...]] = []
    slots = [[1] * (p.num_cols - 1) for _ in range(p.groups)]
    hit = 0
    while has_prefix_cache(p.mode) and (hit + 1) * bs < prompt and hit < p.num_cols - 1:
        found: list[int] = []
        for g in range(p.groups):
            registered = [s for s in range(1, p.num_slots) if st.get("reg", g, s) == code(p, stream, (hit + 1) * bs)]
            if not registered:
                break
            found.append(registered[0])
        if len(found) < p.groups:
            break
        for g, slot in enumerate(found):
            slots[g][hit] = slot
        hit += 1
        levels.append(tuple(tuple(x) for x in slots))
    return levels


def row_rule(p: SystemParams) -> RowRule:
    """The caller's row rule in world ``p`` (``spec.system.rows``)."""
    return RowRule(p.geo, p.conv, p.max_len, p.mode)


def row_options(st: State, r: int) -> list[RowOption]:
    """Every row running request ``r`` may take in the next step (:class:`RowRule`)."""
    return row_rule(st.p).options(st.get("N", r), st.get("prompt", r))


def row_pick(p: SystemParams, row: RowOption, acc: int, fresh: dict[int, int],
             covered: dict[int, tuple[int, ...]] | None = None) -> RowPick:
    """A request's step picks when it takes ``row`` with ``acc`` accepted,
    the ``fresh`` slot of each group that needs one (no column kept null)
    and the ``covered`` columns' slots (one per group; the other covered
    columns are given the null block)."""
    given = covered or {}
    return RowPick(1, row.q, acc, row.live_col, row.prefilling,
                   tuple(fresh.get(g, 1) for g in range(p.groups)), (0,) * p.groups,
                   cover_picks(p, given), tuple(0 if c in given else 1 for c in range(p.num_cols - 1)),
                   row.tail_as_decode)


def covered_nulls(st: State, r: int, live_col: int) -> list[int]:
    """The null columns a row of request ``r`` ending in ``live_col`` covers
    before it (:func:`.step.covers`, on ints)."""
    p = st.p
    return [c for c in range(p.num_cols - 1) if covers(st, r, 1, live_col, c)
            and st.get("table", 0, r, c) == p.geo.pad_slot]


def _fresh_slots(st: State, r: int, row: RowOption, taken: dict[int, set],
                 choose: Callable[[list[int]], int], free_slots: list[list[int]] | None = None,
                 ) -> tuple[dict[int, int], dict[int, tuple[int, ...]]] | None:
    """A fresh slot for each group where request ``r``'s ``row`` needs one
    for its live column (:func:`needs_fresh_slot`; these generators never
    keep a live column null), and one per group for each null column it
    covers (:func:`covered_nulls`), chosen by ``choose`` among the free
    slots not ``taken`` by an earlier row or column (and added to
    ``taken``); None when some group has none left. ``free_slots`` (by
    group): ``st``'s free slots, when the caller has listed them already."""
    free_of = free_slots if free_slots is not None else [_free_slots(st, g) for g in range(st.p.groups)]
    slots = {}
    for g in range(st.p.groups):
        if needs_fresh_slot(st, g, st.get("table", g, r, row.live_col), True, 0):
            free = [s for s in free_of[g] if s not in taken[g]]
            if not free:
                return None
            slots[g] = choose(free)
            taken[g].add(slots[g])
    covered = {}
    for c in covered_nulls(st, r, row.live_col):
        per_group = []
        for g in range(st.p.groups):
            free = [s for s in free_of[g] if s not in taken[g]]
            if not free:
                return None
            per_group.append(choose(free))
            taken[g].add(per_group[-1])
        covered[c] = tuple(per_group)
    return slots, covered


def sample_picks(st: State, rng: random.Random, *, weights: tuple[int, int, int] = (2, 8, 1)) -> tuple[str, Picks]:
    """A random action with picks that satisfy its guard and every caller
    assumption: the generator the concrete walks (and later the fuzzer) use."""
    p = st.p
    active = [r for r in range(p.num_reqs) if st.get("active", r) == 1]
    waiting = [r for r in range(p.num_reqs) if st.get("active", r) == 0]
    choices = [a for a, ok in zip(("admit", "step", "free"), (waiting, active, active)) if ok]
    while True:
        action = rng.choices(choices, [dict(zip(("admit", "step", "free"), weights))[a] for a in choices])[0]
        if action == "admit":
            r = rng.choice(waiting)
            stream = rng.randrange(p.num_streams)
            prompt = rng.randint(1, p.max_len)
            picks = default_picks(p, "admit", req=r, stream=stream, prompt=prompt)
            levels = prefix_hit_levels(st, stream, prompt)
            return action, replace(picks, hit=rng.randint(0, len(levels)),
                                   hit_slots=levels[-1] if levels else picks.hit_slots)
        if action == "free":
            return action, default_picks(p, "free", req=rng.choice(active))
        rows = list(default_picks(p, "step").rows)
        taken: dict[int, set] = {g: set() for g in range(p.groups)}
        any_sched = False
        for r in active:
            if rng.random() < 0.2:
                continue
            options = row_options(st, r)
            if not options:
                continue
            row = rng.choice(options)
            acc = rng.choice(row.accepted)
            trial = {g: set(x) for g, x in taken.items()}
            slots = _fresh_slots(st, r, row, trial, rng.choice)
            if slots is None:
                continue
            taken = trial
            fresh, covered = slots
            rows[r] = row_pick(p, row, acc, fresh, {c: x for c, x in covered.items() if rng.random() < 0.8})
            any_sched = True
        if any_sched:
            order = list(request_order(p))
            rng.shuffle(order)
            return action, StepPicks(tuple(rows), tuple(order))
        choices = [a for a in choices if a != "step"] or ["free"]


@lru_cache(maxsize=None)
def _admit(p: SystemParams, req: int, stream: int, prompt: int) -> AdmitPicks:
    """``default_picks`` of an admit without a prefix hit, once per world and picks (records are immutable)."""
    return default_picks(p, "admit", req=req, stream=stream, prompt=prompt)


@lru_cache(maxsize=None)
def _free(p: SystemParams, req: int) -> FreePicks:
    """``default_picks`` of freeing ``req``, once per world and request."""
    return default_picks(p, "free", req=req)


@lru_cache(maxsize=None)
def _idle_step(p: SystemParams) -> StepPicks:
    """``default_picks`` of a step (every request idle), once per world."""
    return default_picks(p, "step")


def enumerate_picks(st: State, *, prompts: tuple[int, ...] | None = None) -> Iterator[tuple[str, Picks]]:
    """Every action a caller may take in ``st`` under every caller assumption,
    for exhaustive bounded exploration. Two reductions keep it finite and
    small: a fresh block is the lowest free slot of each group (a covered
    null column takes one too, never the null block), and a prefix
    hit takes the lowest matching registered slot. They choose one slot
    where the pool may hand out any: free slots can differ (one still holds
    a registered prefix, or stale trackers), so this is one policy of the
    pool's, not a symmetry (docs/system.md, BMC, says what the others would
    cost). A prefill row's accepted count is 0 (the step ignores it).
    Every batch order of the scheduled requests is taken
    (:func:`batch_orders`). ``prompts`` limits the prompt lengths admitted
    (default: all)."""
    p = st.p
    for r in range(p.num_reqs):
        if st.get("active", r) == 1:
            yield "free", _free(p, r)
            continue
        for stream in range(p.num_streams):
            for prompt in prompts or range(1, p.max_len + 1):
                picks = _admit(p, r, stream, prompt)
                yield "admit", picks
                for hit, level in enumerate(prefix_hit_levels(st, stream, prompt), 1):
                    yield "admit", replace(picks, hit=hit, hit_slots=level)
    options: list[list[tuple[RowOption, int] | None]] = []
    for r in range(p.num_reqs):
        mine: list[tuple[RowOption, int] | None] = [None]
        if st.get("active", r) == 1:
            mine += [(row, acc) for row in row_options(st, r)
                     for acc in (row.accepted[:1] if row.prefilling else row.accepted)]
        options.append(mine)
    idle = _idle_step(p)
    free_slots = [_free_slots(st, g) for g in range(p.groups)]
    for combo in product(*options):
        if not any(combo):
            continue
        rows = list(idle.rows)
        taken: dict[int, set] = {g: set() for g in range(p.groups)}
        for r, choice in enumerate(combo):
            if choice is None:
                continue
            row, acc = choice
            slots = _fresh_slots(st, r, row, taken, lambda free: free[0], free_slots)
            if slots is None:
                break
            rows[r] = row_pick(p, row, acc, *slots)
        else:
            for order in batch_orders(p, [r for r, choice in enumerate(combo) if choice is not None]):
                yield "step", StepPicks(tuple(rows), order)


def batch_orders(p: SystemParams, scheduled: list[int]) -> Iterator[tuple[int, ...]]:
    """Every batch order of a step that schedules ``scheduled``, once per
    layout: each permutation of the scheduled requests, then the others by
    index (where they stand does not change the batch)."""
    rest = tuple(r for r in request_order(p) if r not in scheduled)
    for first in permutations(scheduled):
        yield first + rest


def shares_a_block(st: State) -> bool:
    """Two running requests name one physical slot (a prefix-cache hit)."""
    p = st.p
    rows = [{st.get("table", 0, r, c) for c in range(p.num_cols)} - {p.geo.pad_slot}
            for r in range(p.num_reqs) if st.get("active", r) == 1]
    return any(a & b for i, a in enumerate(rows) for b in rows[i + 1:])


class Exploration(TypedDict, total=False):
    """What :func:`explore` reports: how much it saw, how it ended
    (``status``: ``proved``, ``failed`` or ``budget``) and, when it failed,
    what broke and the run that reaches it."""

    states: int
    transitions: int
    depth: int
    actions: dict[str, int]
    shared_states: int
    status: str
    violated: list[str]
    run: list[tuple[str, Picks]]


def explore(p: SystemParams, depth: int, *, prompts: tuple[int, ...] | None = None,
            dropped: tuple[str, ...] = (), extra: Callable[[State], Iterator[tuple[str, Picks]]] | None = None,
            budget: int | None = None, lanes: bool = True) -> Exploration:
    """Exhaustive breadth-first exploration of every run of at most ``depth``
    actions from the initial state (states deduplicated on their view: every
    variable but the worker's per-step buffers, ``WORKER_BUFFERS``, which a
    step writes wherever it reads them, so two states that differ only there
    have the same runs; the batch orders of a step differ only there).
    Returns statistics and, on the first violated check or invariant, the run
    that reaches it as a list of (action, picks) together with what broke.

    With ``lanes`` (the default) each depth's transitions are first run
    together on numpy lanes (``lanes.run_lanes``); a transition the lanes do
    not vouch for (a memory fault, a failed check, a construct they cannot
    run) is run on ints, so the result is the one ``lanes=False`` (every
    transition on ints, one at a time) gives, transition for transition."""

    start = initial_state(p)
    viewed = [name for name in p.shapes() if name not in WORKER_BUFFERS]
    # one flat tuple per state: every variable of a world has a fixed length, so the entries in order say it all
    key = lambda s: tuple(chain.from_iterable(map(s.v.__getitem__, viewed)))
    whole = lambda s: tuple(chain.from_iterable(map(s.v.__getitem__, p.shapes())))
    seen = {key(start): None}
    parent: dict[tuple, tuple] = {}
    frontier = [(start, key(start))]
    stats: Exploration = {"states": 1, "transitions": 0, "depth": 0, "actions": {}}
    for d in range(depth):
        nxt = []
        moves: list[tuple[State, tuple, str, Picks | Exception]] = []
        for st, here in frontier:
            try:
                found = list(enumerate_picks(st, prompts=prompts))
                if extra is not None:
                    found += list(extra(st))
            except Exception as e:  # noqa: BLE001 - raised where the state's turn comes, as one state at a time would
                moves.append((st, here, "", e))
                continue
            moves += [(st, here, action, picks) for action, picks in found]
        verdicts = run_lanes(p, [(st, action, picks) for st, _, action, picks in moves
                                 if not isinstance(picks, Exception)], dropped) if lanes else []
        lane_verdicts = iter(verdicts)
        fresh: dict[tuple, State] = {}  # the states the lanes reached that no earlier depth did, by every variable
        for verdict in verdicts if lanes else []:
            if isinstance(verdict, State) and key(verdict) not in seen:
                fresh.setdefault(whole(verdict), verdict)
        inv_failed = dict(zip(fresh, failed_invariants(p, list(fresh.values()))))
        for st, here, action, picks in moves:
            if isinstance(picks, Exception):
                raise picks
            verdict = next(lane_verdicts, None)
            if verdict is REFUSED:
                continue
            if isinstance(verdict, State):
                after, bad = verdict, []
            else:  # on ints: the refusal, memory fault or failed checks exactly as run_action has them
                try:
                    out = run_action(st, action, picks, dropped=dropped)
                except StepRefused:
                    continue
                after, bad = out.state, failed_checks(out)
            stats["transitions"] += 1
            stats["actions"][action] = stats["actions"].get(action, 0) + 1
            k = key(after)
            if k not in seen:  # a state's invariants are checked when it is first reached
                failed = inv_failed.get(whole(after)) if inv_failed else None
                if failed is None:
                    failed = sorted({n for n, x in invariants(after) if not x})
                bad += [f"inv: {n}" for n in failed]
            if bad:
                run = [(action, picks)]
                cur = here
                while cur in parent:
                    prev, a, pk = parent[cur]
                    run.append((a, pk))
                    cur = prev
                stats["depth"] = d + 1
                return {**stats, "status": "failed", "violated": bad, "run": run[::-1]}
            if k not in seen:
                seen[k] = None
                parent[k] = (here, action, picks)
                nxt.append((after, k))
                stats["states"] += 1
                if shares_a_block(after):
                    stats["shared_states"] = stats.get("shared_states", 0) + 1
                if budget is not None and stats["states"] > budget:
                    return {**stats, "status": "budget", "depth": d}
        frontier = nxt
        stats["depth"] = d + 1
        if not frontier:
            break
    return {**stats, "status": "proved"}
