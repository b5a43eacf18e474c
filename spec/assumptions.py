"""Every caller assumption, by name, and the views of them that the commands use.

The records live beside what they speak of (``spec/row_assumptions.py``: one
request's row; ``spec/launch_assumptions.py``: one launch's inputs;
``spec/scheduler_assumptions.py``: the scheduler and block pool), each an
:class:`~.assumption_record.Assumption` carrying all its faces. :data:`ALL`
is the registry; every list a command needs is a function of it, read when
asked (a record added to :data:`ALL` shows in each view with no other
edit): :func:`per_request_drops` (``fuzz --drop``'s choices),
:func:`checked_on_rows` (what the fuzz callers check on every row),
:func:`caller_model_drops`, :data:`SETS` and :func:`caller_model_breaks` (what a
review's caller model breaks, and how), :func:`caller_model_draws` (what every review
campaign draws as vLLM does), :func:`behavioural` (what the kernels' equivalence obligation
leaves out). The proofs name the records they assume directly.

:class:`GhostRow`, :func:`encode_row` (``spec/ghost_row.py``) and
:func:`block_table_width` are re-exported here: the caller contract's other
half, which proofs and generators import from this module.
"""

from __future__ import annotations

from .assumption_record import Assumption, AssumptionSet, CallerBreak
from .ghost_row import GhostRow, RowContext, encode_row, last_scheduled_block
from .launch_assumptions import (
    BATCH_IN_LAUNCH, COLUMNS_IN_TABLE, GEOMETRY_SUPPORTED, IDX_MAPPING_IN_RANGE, MODEL_FITS_TABLE,
    NUM_SPECULATIVE_BLOCKS, PACKED_GROUPS_DISJOINT, PACKED_TABLES_MATCH_LAYERS, POOL_HAS_NULL_BLOCK, SLOT_IN_CAPACITY,
    TABLE_SHORT_BY_ONE, block_table_width,
)
from .row_assumptions import (
    ACCEPTED_WITHIN_ROW, DECODE_ROW_FITS, DECODE_WITHIN_BLOCK, IS_PREFILLING_AGREES, LIVE_COL_IS_LAST_BLOCK,
    MAX_MODEL_LEN_LIMIT, POSITIONS_IN_MODEL, PREFILL_CHUNK_ON_BOUNDARY, PREFILL_CONTINUATION_LONGER_THAN_ONE,
    ROW_NONEMPTY,
)
from .scheduler_assumptions import (
    BLOCK_COPY_MOVES_TRACKERS, DISTINCT_SLOTS_IN_ROW, EXCLUSIVE_DECODE_LIVE_SLOT, FRESH_DISTINCT_DESTINATIONS,
    FRESH_SLOT_IS_FREE, GROUPS_AGREE_ON_NULL, LIVE_MOVE_COPIES_STATE,
)

ALL: list[Assumption] = [
    GEOMETRY_SUPPORTED,
    DECODE_ROW_FITS,
    ACCEPTED_WITHIN_ROW,
    ROW_NONEMPTY,
    DECODE_WITHIN_BLOCK,
    POSITIONS_IN_MODEL,
    LIVE_COL_IS_LAST_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    POOL_HAS_NULL_BLOCK,
    SLOT_IN_CAPACITY,
    IDX_MAPPING_IN_RANGE,
    COLUMNS_IN_TABLE,
    MODEL_FITS_TABLE,
    PACKED_TABLES_MATCH_LAYERS,
    PACKED_GROUPS_DISJOINT,
    BATCH_IN_LAUNCH,
    EXCLUSIVE_DECODE_LIVE_SLOT,
    FRESH_DISTINCT_DESTINATIONS,
    DISTINCT_SLOTS_IN_ROW,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    FRESH_SLOT_IS_FREE,
    BLOCK_COPY_MOVES_TRACKERS,
    LIVE_MOVE_COPIES_STATE,
    PREFILL_CONTINUATION_LONGER_THAN_ONE,
]
"""Every caller assumption: the registry every view reads (in this order)."""

SETS: list[AssumptionSet] = [TABLE_SHORT_BY_ONE]
"""The sets of assumptions needed only jointly that a review's caller model breaks together."""


def named(name: str) -> Assumption:
    """The record called ``name`` (a ``KeyError`` naming the known ones otherwise)."""
    for a in ALL:
        if a.name == name:
            return a
    raise KeyError(f"no caller assumption {name!r}; the assumptions are {', '.join(a.name for a in ALL)}")


def per_request_drops() -> list[Assumption]:
    """The assumptions one row can break while every other row keeps them
    (those with a breaker): ``fuzz --drop``'s choices, each probed by review."""
    return [a for a in ALL if a.breaker is not None]


def checked_on_rows() -> list[Assumption]:
    """The assumptions every row the fuzz callers generate keeps (those read
    on a row), but the one a row breaks on purpose."""
    return [a for a in ALL if a.on_row is not None]


def caller_model_drops() -> list[Assumption]:
    """The assumptions a review's caller model breaks when a probe drops one
    (those with ``caller_breaks``)."""
    return [a for a in ALL if a.caller_breaks is not None]


def caller_model_breaks() -> list[tuple[frozenset[str], CallerBreak]]:
    """Each way the review's caller model breaks assumptions, with the names it
    breaks together: every record's (:func:`caller_model_drops`), then every
    set's (:data:`SETS`), in that order."""
    singles = [(frozenset({a.name}), a.caller_breaks) for a in ALL if a.caller_breaks is not None]
    return singles + [(frozenset(s.names), s.caller_breaks) for s in SETS]


def caller_model_draws() -> list[Assumption]:
    """The assumptions vLLM's evidence contradicts that every review campaign breaks as vLLM does
    (those with ``caller_draws``): no probe drops them, each version is judged under them."""
    return [a for a in ALL if a.caller_draws]


def behavioural() -> list[str]:
    """The names of the assumptions the kernels' equivalence obligation leaves out."""
    return [a.name for a in ALL if a.behavioural]

