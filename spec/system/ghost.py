"""What a slot means: the prefix its checkpoint and committed ring rows represent."""

from __future__ import annotations

from ..flashinfer import materialize_ring_row
from ..vocab import Cond, Value, conj, implies, ite
from .state import GARBAGE, State, code


def represents(st: State, g: int, slot: Value, stream: Value, n: Value) -> Cond:
    """Slot ``slot`` of group ``g`` holds exactly ``stream``'s state after
    ``n`` tokens: checkpoint at ``n - nc`` and its committed rows hold the rest."""
    p = st.p
    R, W = int(p.geo.ring_len), int(p.geo.window)
    nc, rs, ck = st.get("nc", g, slot), st.get("rs", g, slot), st.get("ck", g, slot)
    base = n - nc
    parts = [base >= 0, ck == code(p, stream, base), nc >= 0, nc <= W]
    for j in range(W):
        row = materialize_ring_row(rs, j, R)
        parts.append(implies(j < nc, st.get("ring", g, slot, row) == code(p, stream, base + j)))
    return conj(*parts)


def replay(st: State, g: int, slot: Value, start: Value, count: Value, limit: int) -> Value:
    """The ghost of ``slot``'s checkpoint advanced by ``count`` ring rows from
    ``start`` (rows ``start + j`` by one conditional subtraction, as FlashInfer
    reads them): the prefix it then represents, or garbage."""
    p = st.p
    R = int(p.geo.ring_len)
    ck = st.get("ck", g, slot)
    ok = [ck >= 0, count >= 0, count <= limit]
    for j in range(limit):
        row = materialize_ring_row(start, j, R)
        ok.append(implies(j < count, st.get("ring", g, slot, row) == ck + j))
    return ite(conj(*ok), ck + count, GARBAGE)
