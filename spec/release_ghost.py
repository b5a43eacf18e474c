"""Ghost state of the released (0.33.0) lifecycle: what a slot's checkpoint and ring rows stand for.

The trackers are the host's mirror; the ghost says what they must mirror.
For one slot of a running request:

- ``checkpoint`` (``P``): the number of the request's tokens the checkpoint
  state has consumed;
- ``position`` (``N``): the number of tokens the request has committed, i.e.
  whose effect the slot must hold;
- ``rows``: the token index each ring row holds (a row never written holds
  whatever it held: an unconstrained value).

The **refinement** property (:func:`refines`): the ``prev_num_accepted``
ring rows from ``ring_start`` hold tokens ``P, P + 1, ...`` and end at the
request's position, ``P + prev_num_accepted = N``. FlashInfer's decode reads
exactly those rows on top of the checkpoint, so under the refinement its
state is the request's.

The device's side is modelled from what FlashInfer's decode kernel does
(``spec.flashinfer.kernel_window_after``): :func:`flashinfer_pass` appends a
query's tokens at ring row ``prev`` after ``start`` and, when the committed
rows plus the query exceed the window, folds the committed rows into the
checkpoint. The query's accepted count is known one forward pass later
(:func:`accept`).

For the Triton decode (no device trackers; a linear buffer of ``L`` rows),
:class:`BufferGhost` holds the checkpoint and the rows, and
:func:`triton_refines` states the invariant between steps in terms of the CPU
cursor of :mod:`.release_cursor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .flashinfer import kernel_checkpoints, materialize_ring_row
from .release_cursor import Cursor, decode_anchor
from .release_trackers import ReleaseGeometry
from .vocab import Cond, Value, cmod, conj, implies, ite, negate, within


def row_at(rows: Sequence[Value], index: Value) -> Value:
    """``rows[index]`` for an interpreted ``index`` in ``[0, len(rows))``."""
    out = rows[-1]
    for k in range(len(rows) - 2, -1, -1):
        out = ite(index == k, rows[k], out)
    return out


def with_row(rows: Sequence[Value], index: Value, value: Value, guard: Cond = True) -> tuple[Value, ...]:
    """``rows`` with ``rows[index] = value`` where ``guard`` holds."""
    return tuple(ite(conj(guard, index == k), value, old) for k, old in enumerate(rows))


@dataclass(frozen=True)
class RingGhost:
    """What one FlashInfer ReplaySSM slot stands for (see the module docstring)."""

    checkpoint: Value
    position: Value
    rows: tuple[Value, ...]


def window_row_holds(rows: Sequence[Value], start: Value, count: Value, first: Value, ring_len: int, k: int) -> Cond:
    """If the window of ``count`` rows from ``start`` has a ``k``-th row, it holds token ``first + k``."""
    return implies(k < count, row_at(rows, materialize_ring_row(start, k, ring_len)) == first + k)


def window_holds(rows: Sequence[Value], start: Value, count: Value, first: Value, ring_len: int) -> Cond:
    """The ``count`` ring rows from ``start`` (``start`` in ``[0, R)``, wrapping
    once past ``R``) hold tokens ``first, first + 1, ...``."""
    return conj(*[window_row_holds(rows, start, count, first, ring_len, k) for k in range(ring_len)])


def trackers_in_range(start: Value, prev: Value, pending: Value, geo: ReleaseGeometry) -> Cond:
    """Between passes: ``0 <= ring_start < R``, ``0 <= prev_num_accepted <= W``,
    and the pending query length is 0 or a query FlashInfer may have run."""
    return conj(within(start, 0, geo.ring_len - 1), within(prev, 0, geo.window), within(pending, 0, geo.query_len))


def pending_consistent(prev: Value, pending: Value) -> Cond:
    """With speculative decoding a slot commits rows only through a query:
    no pending query (the state a reset leaves) means no committed rows."""
    return implies(pending == 0, prev == 0)


def refines(g: RingGhost, start: Value, prev: Value, geo: ReleaseGeometry) -> Cond:
    """The refinement: the committed rows from ``start`` hold ``P, P + 1, ...``
    and end at the request's position (``P + prev = N``)."""
    return conj(g.checkpoint + prev == g.position, window_holds(g.rows, start, prev, g.checkpoint, geo.ring_len))


def flashinfer_pass(g: RingGhost, start: Value, prev: Value, query_len: Value, geo: ReleaseGeometry) -> RingGhost:
    """FlashInfer's decode of one query of ``query_len`` tokens (the request's
    tokens ``N, N + 1, ...``) on a slot whose trackers are ``(start, prev)``:
    it appends the tokens at ring row ``prev`` after ``start`` and, when
    ``prev + query_len > W``, folds the ``prev`` committed rows into the
    checkpoint. The request's position moves only once the accepted count is
    known (:func:`accept`)."""
    rows = tuple(g.rows)
    for j in range(geo.query_len):
        rows = with_row(rows, materialize_ring_row(start, prev + j, geo.ring_len), g.position + j, j < query_len)
    folds = kernel_checkpoints(prev, query_len, geo.window)
    return RingGhost(ite(folds, g.checkpoint + prev, g.checkpoint), g.position, rows)


def accept(g: RingGhost, accepted: Value) -> RingGhost:
    """The request's position after ``accepted`` tokens of its last query survived."""
    return replace(g, position=g.position + accepted)


def prefill(g: RingGhost, computed: Value) -> RingGhost:
    """A prefill wrote the slot's whole state: the checkpoint stands for the request's ``computed`` tokens."""
    return RingGhost(computed, computed, g.rows)


def flashinfer_reads_ok(start: Value, prev: Value, query_len: Value, geo: ReleaseGeometry) -> Cond:
    """What FlashInfer's decode requires of the trackers it reads (its
    ``ring_start`` in ``[0, R)``, committed rows in ``[0, W]``), and that the
    query's rows fit beside the rows it keeps (``prev + T <= R``, or it folds)."""
    folds = kernel_checkpoints(prev, query_len, geo.window)
    return conj(within(start, 0, geo.ring_len - 1), within(prev, 0, geo.window),
                implies(negate(folds), prev + query_len <= geo.ring_len), query_len <= geo.ring_len)


@dataclass(frozen=True)
class BufferGhost:
    """What one Triton ReplaySSM slot stands for: the checkpoint's token count
    and the token index each of the ``L`` buffer rows holds."""

    checkpoint: Value
    rows: tuple[Value, ...]


def triton_reads_ok(g: BufferGhost, cursor: Cursor, num_computed: Value) -> Cond:
    """The decode of the token at index ``num_computed`` with this cursor reads
    the right state: rows ``[0, write_pos)`` hold tokens ``P, P + 1, ...`` and
    the current token comes next (``P + write_pos = num_computed``)."""
    rows = g.rows
    held = conj(*[implies(k < cursor.write_pos, rows[k] == g.checkpoint + k) for k in range(len(rows))])
    return conj(g.checkpoint + cursor.write_pos == num_computed, held)


def triton_decode(g: BufferGhost, cursor: Cursor, num_computed: Value) -> BufferGhost:
    """The Triton decode of one token: a flush stores the state after it (the
    new checkpoint), otherwise the token is appended at row ``write_pos``."""
    return BufferGhost(ite(cursor.is_flush, num_computed + 1, g.checkpoint),
                       with_row(g.rows, cursor.write_pos, num_computed, negate(cursor.is_flush)))


def triton_refines(g: BufferGhost, num_computed: Value, decode_base: Value, buffer_len: int, block_size: int,
                   align: bool) -> Cond:
    """The Triton path's invariant between steps: before the anchor (a prompt
    still being computed) the checkpoint is exact; from the anchor on, the
    checkpoint is ``(num_computed - anchor) mod L`` tokens back and the rows
    since it hold the tokens after it."""
    anchor = decode_anchor(num_computed, decode_base, block_size, align)
    steps = num_computed - anchor
    back = cmod(steps, buffer_len)
    held = conj(*[implies(k < back, g.rows[k] == g.checkpoint + k) for k in range(buffer_len)])
    return ite(steps < 0, g.checkpoint == num_computed, conj(g.checkpoint + back == num_computed, held))
