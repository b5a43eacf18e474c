"""The decisions of the fuzz callers that their users make differently, as one object.

:class:`.callers.Callers` takes a :class:`CallerPolicy`; the default is the
fuzz campaign's. The lockstep runner (``fuzz/lockstep.py``
``LOCKSTEP_POLICY``) draws a step's rows and their batch order from
primitive choices; a review campaign (``review/lifecycle.py``
``review_policy``) copies the trackers of every moved live column or of
none, keeps or breaks ``prefill_continuation_longer_than_one``, shows the
kernels a block table one column short, hands out blocks other requests
hold, aliases a moved live column to its old block, and records each step's rows. No
module subclasses :class:`.callers.Callers` (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from hypothesis import strategies as hs

from .bulk_choices import BulkDraw

if TYPE_CHECKING:
    from .callers import Callers, DrawnRow, Request

Draw = Callable[[Any], Any]
"""How the callers decide: Hypothesis's ``draw`` (``data.draw``), or a
lockstep system's :class:`.bulk_choices.BulkDraw`; the single decisions go
through :func:`integer`, :func:`boolean` and :func:`element`."""

T = TypeVar("T")


def integer(draw: Draw, lo: int, hi: int) -> int:
    """A decision in ``[lo, hi]`` (``lo`` the simplest)."""
    return draw.integer(lo, hi) if type(draw) is BulkDraw else draw(hs.integers(lo, hi))


def boolean(draw: Draw) -> bool:
    """A yes or no (no the simplest)."""
    return draw.boolean() if type(draw) is BulkDraw else draw(hs.booleans())


def element(draw: Draw, options: Sequence[T]) -> T:
    """One of ``options`` (non-empty; the first the simplest)."""
    return draw.element(options) if type(draw) is BulkDraw else draw(hs.sampled_from(options))


@dataclass(frozen=True)
class Choices:
    """The callers' decisions as a ``spec.assumption_record.Chooser``: what a
    caller assumption's breaker picks, through :func:`integer`,
    :func:`boolean` and :func:`element` on ``draw``."""

    draw: Draw

    def integer(self, lo: int, hi: int) -> int:
        return integer(self.draw, lo, hi)

    def boolean(self) -> bool:
        return boolean(self.draw)

    def element(self, options: Sequence[T]) -> T:
        return element(self.draw, options)


TRACKER_COPIES = ("drawn", "every", "none")
"""Which rows whose live column moves have their trackers copied by the
scheduler's block copy: with :attr:`.caller_shapes.Features.block_copies` on, each
such row yes or no as drawn (``drawn``); every such row inside the kernels'
table (``every``); none (``none``)."""

ONE_TOKEN_CONTINUATIONS = ("drawn", "never", "often")
"""Prefill continuation chunks of one token (a row ``prefill_continuation_longer_than_one``
rules out): as the row rule's chunk lengths are drawn (``drawn``); never,
such a row not scheduled that step (``never``); for half the continuation
chunks that may be one token long (``often``)."""


def any_rows(draw: Draw, rids: list[int]) -> list[int]:
    """The running requests a step schedules: a non-empty subset of ``rids``, in drawn order."""
    return draw(hs.lists(hs.sampled_from(rids), min_size=1, max_size=len(rids), unique=True))


def any_order(draw: Draw, n: int) -> list[int]:
    """The batch order of a step's ``n`` scheduled rows: a drawn permutation of ``range(n)``."""
    return draw(hs.permutations(list(range(n))))


Scheduled = Callable[["Callers", "list[tuple[Request, DrawnRow] | None]"], None]
"""Told each step's batch rows (None: a padding row) once the step's
launches are decided, before the forward pass moves its requests on."""


@dataclass(frozen=True)
class CallerPolicy:
    """The caller decisions :class:`.callers.Callers` leaves to its user; the defaults are the fuzz campaign's."""

    choose_rows: Callable[[Draw, list[int]], list[int]] = any_rows
    """Which running requests a step schedules (given their ids; a non-empty subset)."""
    batch_order: Callable[[Draw, int], list[int]] = any_order
    """The batch order of a step's ``n`` scheduled rows (a permutation of ``range(n)``)."""
    tracker_copies: str = "drawn"
    """One of :data:`TRACKER_COPIES`."""
    one_token_continuations: str = "drawn"
    """One of :data:`ONE_TOKEN_CONTINUATIONS`."""
    table_short_by: int = 0
    """How many columns narrower than the callers' rows the kernels' block table is."""
    null_live_groups: bool = False
    """A live column allocated for a request gets, half the time where there are several cache groups,
    the null block in one of them (drawn) and real blocks in the others; the request leaves at the next
    step, its state in that group lost (a review probe of ``groups_agree_on_null``)."""
    taken_live_blocks: bool = False
    """A prefill chunk's newly allocated live block is, where there is one, a block that another
    running request still names before its live column and before what this step's launches touch
    for it, in every group (a prefix block it holds; a review probe of ``fresh_slot_is_free``)."""
    aliased_live_moves: bool = False
    """Where the host publishes no prefix and the live column moves (all mode launched with
    ``MATERIALIZE_PREFIXES`` off and live columns), a request's live column that moves to a new
    column keeps, in each cache group as drawn, the block its state is in: two columns of its row
    name one block (vLLM's test T5; every review campaign draws it, ``distinct_slots_in_row``'s
    ``caller_draws``)."""
    state_copies: bool = True
    """The scheduler's block copy of a moved live column carries its state and ring (what a
    review's forward pass reads: ``review/lifecycle.py``; the fuzz callers' spec side copies them always)."""
    scheduled: Scheduled | None = None
    """Told each step's batch rows (see :data:`Scheduled`), if given."""

    def __post_init__(self) -> None:
        if self.tracker_copies not in TRACKER_COPIES:
            raise ValueError(f"tracker_copies must be one of {TRACKER_COPIES}, got {self.tracker_copies!r}")
        if self.one_token_continuations not in ONE_TOKEN_CONTINUATIONS:
            raise ValueError(f"one_token_continuations must be one of {ONE_TOKEN_CONTINUATIONS}, "
                             f"got {self.one_token_continuations!r}")
        for name in ("null_live_groups", "taken_live_blocks", "aliased_live_moves"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if isinstance(self.table_short_by, bool) or not isinstance(self.table_short_by, int) \
                or self.table_short_by < 0:
            raise ValueError(f"table_short_by must be an int >= 0, got {self.table_short_by!r}")


DEFAULT = CallerPolicy()
"""The fuzz campaign's callers."""
