"""The system invariants as objects, and the auxiliary ones that make them inductive.

Each :class:`Invariant` has a name, a one-sentence statement and its terms
over a state: one conjunct per slot, request or group it constrains (a
vocabulary boolean: a Python bool on a concrete state, a Z3 term on a
symbolic one). :data:`INVARIANTS` are the properties the system keeps;
:data:`AUXILIARY` are what makes them inductive. Proofs select invariants
by object (``verify.system_proofs``), never by a substring of a name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..flashinfer import tracker_in_range
from ..geometry import has_prefix_cache, moves_live_column
from ..vocab import Cond, Value, conj, disj, implies, ite, negate, within
from .action import Named
from .ghost import represents
from .state import State, code
from .step_plan import in_prefill


@dataclass(frozen=True)
class Invariant:
    """A named system invariant: ``terms(st)`` lists its conjuncts in ``st``."""

    name: str
    statement: str
    terms: Callable[[State], list[Cond]]

    def __call__(self, st: State) -> list[Named]:
        """The invariant's conjuncts in ``st``, each labelled with its name."""
        return [(self.name, t) for t in self.terms(st)]


def live_slot(st: State, g: int, r: int) -> Value:
    """The slot of request ``r``'s live column in group ``g``."""
    return st.get("table", g, r, st.get("live", r))


def _has_live(st: State, r: int) -> Cond:
    return conj(st.get("active", r) == 1, st.get("live", r) >= 0)


def _range(st: State) -> list[Cond]:
    geo = st.p.geo
    return [conj(tracker_in_range("ring_start", st.get("rs", g, s), geo),
                 tracker_in_range("num_committed", st.get("nc", g, s), geo))
            for g in range(st.p.groups) for s in range(st.p.num_slots)]


def _refinement(st: State) -> list[Cond]:
    p = st.p
    out = []
    for r in range(p.num_reqs):
        N, stream = st.get("N", r), st.get("stream", r)
        for g in range(p.groups):
            slot = live_slot(st, g, r)
            out.append(implies(_has_live(st, r), conj(
                slot != p.geo.pad_slot, st.get("ck", g, slot) == code(p, stream, N - st.get("nc", g, slot)))))
    return out


def _no_token_dropped(st: State) -> list[Cond]:
    return [implies(_has_live(st, r), represents(st, g, live_slot(st, g, r), st.get("stream", r), st.get("N", r)))
            for r in range(st.p.num_reqs) for g in range(st.p.groups)]


def _groups_agree(st: State) -> list[Cond]:
    out = []
    for r in range(st.p.num_reqs):
        s0 = live_slot(st, 0, r)
        for g in range(1, st.p.groups):
            sg = live_slot(st, g, r)
            out.append(implies(_has_live(st, r), conj(
                st.get("rs", 0, s0) == st.get("rs", g, sg), st.get("nc", 0, s0) == st.get("nc", g, sg))))
    return out


def _canonical(st: State) -> list[Cond]:
    out = []
    for g in range(st.p.groups):
        for s in range(1, st.p.num_slots):
            reg = st.get("reg", g, s)
            out.append(implies(reg != -1, conj(
                st.get("rs", g, s) == 0, st.get("nc", g, s) == 0, st.get("ck", g, s) == reg)))
    return out


RANGE = Invariant("range", "every slot's trackers lie in their ranges", _range)
REFINEMENT = Invariant(
    "refinement", "a running request's live slot is a real slot whose checkpoint is its prefix at N - committed",
    _refinement)
NO_TOKEN_DROPPED = Invariant(
    "no_token_dropped", "each running request's live slot represents exactly its computed tokens: checkpoint at "
    "N - committed and the committed ring rows hold the tokens after it", _no_token_dropped)
GROUPS_AGREE = Invariant("groups_agree", "a request's live trackers are equal across groups", _groups_agree)
CANONICAL = Invariant(
    "canonical", "every registered (published) slot stays canonical, trackers (0, 0) and its state exactly at its "
    "boundary, until the pool hands it out again", _canonical)

INVARIANTS: tuple[Invariant, ...] = (RANGE, REFINEMENT, NO_TOKEN_DROPPED, GROUPS_AGREE, CANONICAL)
"""The properties the system keeps."""


def invariants(st: State) -> list[Named]:
    """The conjuncts of every invariant of :data:`INVARIANTS` in ``st``, labelled."""
    return [part for inv in INVARIANTS for part in inv(st)]


def _refcount(st: State) -> list[Cond]:
    p = st.p
    out = []
    for g in range(p.groups):
        for s in range(p.num_slots):
            if s == p.geo.pad_slot:
                continue
            count: Value = 0
            for r in range(p.num_reqs):
                for c in range(p.num_cols):
                    count = count + ite(conj(st.get("active", r) == 1, st.get("table", g, r, c) == s), 1, 0)
            out.append(st.get("ref", g, s) == count)
    return out


def _registry(st: State) -> list[Cond]:
    p = st.p
    out = []
    for g in range(p.groups):
        for s in range(p.num_slots):
            reg = st.get("reg", g, s)
            out.append(disj(reg == -1, conj(reg >= 0, s != p.geo.pad_slot)))
            if not has_prefix_cache(p.mode):
                out.append(reg == -1)
    return out


def _table_range(st: State) -> list[Cond]:
    p = st.p
    return [within(st.get("table", g, r, c), 0, p.num_slots - 1)
            for g in range(p.groups) for r in range(p.num_reqs) for c in range(p.num_cols)]


def _request(st: State) -> list[Cond]:
    p = st.p
    out = []
    for r in range(p.num_reqs):
        act, N, live = st.get("active", r), st.get("N", r), st.get("live", r)
        on = act == 1
        out.append(disj(act == 0, act == 1))
        out.append(implies(negate(on), conj(live == -1, *[
            st.get("table", g, r, c) == p.geo.pad_slot for g in range(p.groups) for c in range(p.num_cols)])))
        out.append(implies(on, conj(
            within(N, 0, p.max_len), within(st.get("prompt", r), 1, p.max_len),
            within(st.get("stream", r), 0, p.num_streams - 1), within(live, -1, p.num_cols - 1),
            (live == -1) == (N == 0))))
    return out


def _live_column(st: State) -> list[Cond]:
    p = st.p
    bs, T = p.geo.block_size, min(p.max_step, int(p.geo.window))
    out = []
    for r in range(p.num_reqs):
        on, N, live = st.get("active", r) == 1, st.get("N", r), st.get("live", r)
        if moves_live_column(p.mode):
            out.append(implies(conj(on, live >= 0), conj(N <= (live + 1) * bs, live * bs <= N + T - 2)))
        else:
            out.append(implies(on, live <= 0))
    return out


def _prefill_phase(st: State) -> list[Cond]:
    return [implies(conj(st.get("active", r) == 1, in_prefill(st, r), st.get("live", r) >= 0), conj(*[
        st.get("nc", g, live_slot(st, g, r)) == 0 for g in range(st.p.groups)])) for r in range(st.p.num_reqs)]


def _groups_agree_on_null(st: State) -> list[Cond]:
    p = st.p
    pad = p.geo.pad_slot
    return [implies(st.get("active", r) == 1, (st.get("table", 0, r, c) == pad) == (st.get("table", g, r, c) == pad))
            for r in range(p.num_reqs) for c in range(p.num_cols) for g in range(p.groups)]


def _table_layout(st: State) -> list[Cond]:
    p = st.p
    pad, bs = p.geo.pad_slot, p.geo.block_size
    out = []
    for r in range(p.num_reqs):
        on, N, live, stream = st.get("active", r) == 1, st.get("N", r), st.get("live", r), st.get("stream", r)
        for c in range(p.num_cols):
            full = code(p, stream, (c + 1) * bs)
            for g in range(p.groups):
                s = st.get("table", g, r, c)
                reg, ref = st.get("reg", g, s), st.get("ref", g, s)
                null = s == pad
                published = conj(negate(null), reg == full, (c + 1) * bs <= N)
                private = conj(negate(null), reg == -1, ref == 1)
                if not moves_live_column(p.mode):
                    # mode none: one private live slot per request, in column 0
                    out.append(implies(on, ite(c > live, null, private)))
                    continue
                out.append(implies(on, ite(
                    c > live, null,
                    ite(c == live, disj(published, conj(private, N < (c + 1) * bs)),
                        disj(null, published, conj(private, c == live - 1, N < live * bs))))))
    return out


AUXILIARY: tuple[Invariant, ...] = (
    Invariant("aux.registry", "a registered slot is a real one (none in mode none)", _registry),
    Invariant("aux.refcount", "a real slot's reference count is the number of running table entries naming it",
              _refcount),
    Invariant("aux.table_range", "every table entry names a slot of its group", _table_range),
    Invariant("aux.request", "a request is running or waiting; a waiting one holds no block, a running one has its "
              "position, prompt, stream and live column in range (a live column once it computed a token)",
              _request),
    Invariant("aux.live_column", "a running request's live column holds its position (within a decode row's "
              "reach of its end in align mode; column 0 in mode none)", _live_column),
    Invariant("aux.prefill_phase", "a prefilling request's live slots hold no committed rows", _prefill_phase),
    Invariant("aux.groups_agree_on_null", "a running request's column is null in every group or in none",
              _groups_agree_on_null),
    Invariant("aux.table_layout", "a running request's columns past the live one are null, the live one real, "
              "earlier ones null, published, or the one pending block the next boundary publishes",
              _table_layout),
)
"""What makes :data:`INVARIANTS` inductive: request shape, the block-table
layout of a running request, reference counts, and the prefill phase."""


def auxiliary_invariants(st: State) -> list[Named]:
    """The conjuncts of every invariant of :data:`AUXILIARY` in ``st``, labelled."""
    return [part for inv in AUXILIARY for part in inv(st)]


def check_invariants(st: State) -> list[str]:
    """The names of the invariant conjuncts a concrete state violates."""
    return sorted({n for n, t in invariants(st) + auxiliary_invariants(st) if not t})
