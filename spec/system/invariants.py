"""The system invariants, and the auxiliary ones that make them inductive."""

from __future__ import annotations

from typing import Any

from ..flashinfer import tracker_in_range
from ..vocab import conj, disj, implies, ite, negate, within
from .ghost import represents
from .state import State, code
from .step import in_prefill

def live_slot(st: State, g: int, r: int) -> Any:
    return st.get("table", g, r, st.get("live", r))


def invariants(st: State) -> list[tuple[str, Any]]:
    """The system invariants as labelled conjuncts: properties first, then the
    auxiliary ones that make them inductive."""
    p = st.p
    geo, pad = p.geo, p.geo.pad_slot
    NR, G, S = p.num_reqs, p.groups, p.num_slots
    out: list[tuple[str, Any]] = []
    for g in range(G):
        for s in range(S):
            out.append(("range", conj(tracker_in_range("ring_start", st.get("rs", g, s), geo),
                                       tracker_in_range("num_committed", st.get("nc", g, s), geo))))
    for r in range(NR):
        act = st.get("active", r) == 1
        N, live, stream = st.get("N", r), st.get("live", r), st.get("stream", r)
        has_live = conj(act, live >= 0)
        for g in range(G):
            slot = live_slot(st, g, r)
            out.append(("refinement", implies(has_live, conj(
                slot != pad, st.get("ck", g, slot) == code(p, stream, N - st.get("nc", g, slot))))))
            out.append(("no_token_dropped", implies(has_live, represents(st, g, slot, stream, N))))
        for g in range(1, G):
            s0, sg = live_slot(st, 0, r), live_slot(st, g, r)
            out.append(("groups_agree", implies(has_live, conj(
                st.get("rs", 0, s0) == st.get("rs", g, sg), st.get("nc", 0, s0) == st.get("nc", g, sg)))))
    for g in range(G):
        for s in range(1, S):
            reg = st.get("reg", g, s)
            out.append(("canonical", implies(reg != -1, conj(
                st.get("rs", g, s) == 0, st.get("nc", g, s) == 0, st.get("ck", g, s) == reg))))
    return out


def auxiliary_invariants(st: State) -> list[tuple[str, Any]]:
    """What makes :func:`invariants` inductive: request shape, the block-table
    layout of a running request (columns past the live one null; the live one
    real; earlier ones null, published, or the one pending block the next
    boundary publishes), reference counts, and the prefill phase."""
    p = st.p
    geo, pad, conv = p.geo, p.geo.pad_slot, p.conv
    bs, T = geo.block_size, min(p.max_step, int(geo.window))
    NR, G, C, S = p.num_reqs, p.groups, p.num_cols, p.num_slots
    out: list[tuple[str, Any]] = []
    for g in range(G):
        for s in range(S):
            count = 0
            for r in range(NR):
                for c in range(C):
                    count = count + ite(conj(st.get("active", r) == 1, st.get("table", g, r, c) == s), 1, 0)
            if s != pad:
                out.append(("aux.refcount", st.get("ref", g, s) == count))
            reg = st.get("reg", g, s)
            out.append(("aux.registry", disj(reg == -1, conj(reg >= 0, s != pad))))
            if not conv.materialize_prefixes:
                out.append(("aux.registry", reg == -1))
        for r in range(NR):
            for c in range(C):
                out.append(("aux.table_range", within(st.get("table", g, r, c), 0, S - 1)))
    for r in range(NR):
        act, N, live = st.get("active", r), st.get("N", r), st.get("live", r)
        stream, prompt = st.get("stream", r), st.get("prompt", r)
        on = act == 1
        out.append(("aux.request", disj(act == 0, act == 1)))
        out.append(("aux.request", implies(negate(on), conj(live == -1, *[
            st.get("table", g, r, c) == pad for g in range(G) for c in range(C)]))))
        out.append(("aux.request", implies(on, conj(
            within(N, 0, p.max_len), within(prompt, 1, p.max_len), within(stream, 0, p.num_streams - 1),
            within(live, -1, C - 1), (live == -1) == (N == 0)))))
        if conv.materialize_prefixes:
            out.append(("aux.live_column", implies(conj(on, live >= 0), conj(
                N <= (live + 1) * bs, live * bs <= N + T - 2))))
        else:
            out.append(("aux.live_column", implies(on, live <= 0)))
        out.append(("aux.prefill_phase", implies(conj(on, in_prefill(st, r), live >= 0), conj(*[
            st.get("nc", g, live_slot(st, g, r)) == 0 for g in range(G)]))))
        for c in range(C):
            slots = [st.get("table", g, r, c) for g in range(G)]
            full = code(p, stream, (c + 1) * bs)
            for g in range(G):
                s = slots[g]
                reg, ref = st.get("reg", g, s), st.get("ref", g, s)
                null = s == pad
                out.append(("aux.groups_agree_on_null", implies(on, (slots[0] == pad) == null)))
                published = conj(negate(null), reg == full, (c + 1) * bs <= N)
                private = conj(negate(null), reg == -1, ref == 1)
                if not conv.materialize_prefixes:
                    # mode none: one private live slot per request, in column 0
                    out.append(("aux.table_layout", implies(on, ite(c > live, null, private))))
                    continue
                out.append(("aux.table_layout", implies(on, ite(
                    c > live, null,
                    ite(c == live, disj(published, conj(private, N < (c + 1) * bs)),
                        disj(null, published, conj(private, c == live - 1, N < live * bs)))))))
    return out


def check_invariants(st: State) -> list[str]:
    """The names of the invariant conjuncts a concrete state violates."""
    return sorted({n for n, t in invariants(st) + auxiliary_invariants(st) if not t})
