"""FlashInfer's side of the contract, as the spec needs it.

The decode kernel (``checkpointing_ssu``) decides on its own when to checkpoint
and never writes the trackers back; ``replayssm_materialize`` trusts its plan
without checks in release builds. These predicates state what those kernels do
and require, so proofs can compare the host's mirror against them.
"""

from __future__ import annotations

from .geometry import Geometry
from .vocab import Cond, Value, conj, ite


def kernel_checkpoints(pnat: Value, row_len: Value, max_window: Value) -> Cond:
    """The decode kernel folds its committed rows when ``pnat + row_len > max_window``."""
    return pnat + row_len > max_window


def executed_rows(query_len: int, fixed_width: int) -> int:
    """The ring rows FlashInfer's decode appends for a row of ``query_len``
    tokens: a launch of fixed width ``fixed_width`` (0: none, each row at its
    own length) executes every row that runs a token at that width, the real
    tokens then placeholders; a row of no token is no work."""
    return max(query_len, fixed_width) if query_len > 0 else 0


def materialize_ring_row(start: Value, k: Value, ring_len: Value) -> Value:
    """Ring row ``k`` rows after ``start``, by one conditional subtraction (exact
    only while ``start + k < 2R``): the rows a replay reads and the rows the
    decode kernel appends to."""
    row = start + k
    return ite(row >= ring_len, row - ring_len, row)


def materialize_plan_ok(ring_start: Value, replay_len: Value, source_committed: Value, geo: Geometry) -> Cond:
    """``replayssm_materialize``'s contract on one active plan: ring start in
    ``[0, R)``, replay length in ``[0, W]`` and not above the source's committed rows."""
    return conj(
        ring_start >= 0,
        ring_start < geo.ring_len,
        replay_len >= 0,
        replay_len <= geo.window,
        replay_len <= source_committed,
    )


def tracker_in_range(buffer: str, value: Value, geo: Geometry) -> Cond:
    """The range a tracker entry keeps between steps, which FlashInfer's
    kernels index by: ``ring_start`` names a ring row in ``[0, R)``,
    ``num_committed`` counts rows in ``[0, W]``."""
    if buffer == "ring_start":
        return conj(value >= 0, value < geo.ring_len)
    if buffer == "num_committed":
        return conj(value >= 0, value <= geo.window)
    raise ValueError(f"buffer must be ring_start or num_committed, got {buffer!r}")


def kernel_window_after(start: Value, pnat: Value, row_len: Value, accepted: Value, max_window: Value, ring_len: Value) -> tuple[Value, Value]:
    """Where the decode kernel leaves a slot's live window after a step, in its
    own terms: it appends the step's rows at ring row ``pnat`` after ``start``;
    when it checkpoints, the folded rows are gone and the window starts at the
    append row, else it keeps its start. Returns ``(start, committed)`` once
    ``accepted`` rows survive."""
    append_row = materialize_ring_row(start, pnat, ring_len)
    folds = kernel_checkpoints(pnat, row_len, max_window)
    return ite(folds, append_row, start), ite(folds, accepted, pnat + accepted)
