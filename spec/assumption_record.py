"""The record of a caller assumption: everything the proofs, the fuzzers and the review know about one.

An :class:`Assumption` carries every face of one claim about vLLM's caller:
its statement, a vocabulary predicate (``holds``) the proofs take as a named
hypothesis, its provenance (``spec.provenance``), its :data:`SCOPES` entry,
how it reads on one scheduled row (``on_row``), the rows that break it
(``breaker``, on the :class:`~.ghost_row.GhostRow`, choosing through a
:class:`Chooser`), where a caller can break it (:class:`Reach`), whether the
kernels' equivalence obligation leaves it out (``behavioural``), and how the
system's caller model breaks it when a review drops it (``caller_breaks``, a
:class:`CallerBreak`: the caller's decisions kept and dropped, and which
scheduled rows break it), or, for one vLLM's evidence contradicts, how every review
campaign draws vLLM's behaviour (``caller_draws``), so no module needs to know an
assumption by name.
An :class:`AssumptionSet` is a set of them needed only jointly.

Every list of assumptions a command uses (``fuzz --drop``'s choices, the
rows the callers check, review's probes and their reach, the equivalence
obligation's optional hypotheses) is a view of these records:
``spec/assumptions.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .geometry import Conventions, Geometry
from .ghost_row import GhostRow, RowContext
from .provenance import CONTRADICTED, Provenance
from .vocab import Cond

T = TypeVar("T")

LAUNCH = "launch"
PER_REQUEST = "per-request"
SYSTEM = "system"
SCOPES = {
    LAUNCH: "a fact of one launch's inputs as a whole (geometry, buffers, tables): no request breaks it alone",
    PER_REQUEST: "about one request's row: a caller can break it in one row while the other rows keep it",
    SYSTEM: "about the scheduler or the block pool across requests, groups and steps",
}
"""Who can break an assumption, by :attr:`Assumption.scope`."""


class Chooser(Protocol):
    """How a breaker picks among the rows that break its assumption: the
    fuzzers' draws (``fuzz/caller_policy.py``), or any other source of
    choices. The first option is the simplest."""

    def integer(self, lo: int, hi: int) -> int:
        """One of ``lo .. hi``."""

    def boolean(self) -> bool:
        """Yes or no."""

    def element(self, options: Sequence[T]) -> T:
        """One of ``options`` (non-empty)."""


Breaker = Callable[[RowContext, GhostRow, Chooser], "GhostRow | None"]
"""The row a caller schedules instead of ``row`` to break one assumption
while keeping every other (None: this row cannot)."""


def everywhere(_: Any) -> bool:
    """A :class:`Reach` condition that every system meets."""
    return True


@dataclass(frozen=True)
class Reach:
    """The systems where a caller can break an assumption: the conventions,
    the geometries, and the longest request in blocks (None: the campaign's
    default)."""

    conventions: Callable[[Conventions], bool] = everywhere
    geometry: Callable[[Geometry], bool] = everywhere
    model_blocks: int | None = None


EVERYWHERE = Reach()


@dataclass(frozen=True)
class ScheduledRow:
    """One scheduled row of a step as the review's caller model ran it: the row
    (``row``, a :class:`~.ghost_row.GhostRow`) and what the scheduler did around it."""

    row: GhostRow
    moves_between_blocks: bool
    """Its live column moves from one real block to another (in the first cache group)."""
    trackers_copied: bool
    """The scheduler's block copy of that move carried the trackers."""
    past_table: bool
    """Its live column is past the block table the kernels see."""
    live_null_in_some_groups: bool = False
    """Its live column holds the null block in some cache groups and a real block in others."""
    live_block_taken: bool = False
    """Its newly allocated live block is one another running request's block table still names."""


Decisions = tuple[tuple[str, Any], ...]
"""Decisions of the callers' policy, as ``(field, value)`` pairs of ``fuzz/caller_policy.CallerPolicy``."""


@dataclass(frozen=True)
class CallerBreak:
    """How the review's caller model breaks an assumption (or a set needed only
    jointly) when a probe drops it: ``statement`` in vLLM's terms, the callers'
    policy decisions while it is ``kept`` and while it is ``dropped``
    (:data:`Decisions`), ``broken_by``, whether one scheduled row broke it, and
    ``restored_by``, how a probe's counterexample is rewritten to keep it (one of
    :data:`RESTORATIONS`)."""

    statement: str
    broken_by: Callable[[ScheduledRow], bool]
    kept: Decisions = ()
    dropped: Decisions = ()
    restored_by: str = "rows"

    def __post_init__(self) -> None:
        if self.restored_by not in RESTORATIONS:
            raise ValueError(f"restored_by must be one of {', '.join(RESTORATIONS)}; got {self.restored_by!r}")


RESTORATIONS = {
    "rows": "each row that broke it is rewritten to keep it (review/attribution.py)",
    "copies": "the schedule is kept and the scheduler's copies are put back as the kept decisions make them "
              "(the trackers a block copy carries, the state copied on a live move)",
}
"""How a probe's counterexample is rewritten to keep the assumption it dropped (:attr:`CallerBreak.restored_by`)."""


@dataclass(frozen=True)
class Assumption:
    """A named caller obligation: ``holds`` is a vocabulary predicate and
    ``provenance`` says whether vLLM guarantees it, and where. ``built_in``
    lists the repository files whose caller model keeps it by construction
    (not as a droppable hypothesis); the other fields are the faces the
    module docstring lists, each read by the views of ``spec/assumptions.py``."""

    name: str
    statement: str
    holds: Callable[..., Cond]
    provenance: Provenance
    built_in: tuple[str, ...] = ()
    scope: str = LAUNCH
    """One of :data:`SCOPES`."""
    on_row: Callable[[RowContext, GhostRow], Cond] | None = None
    """The predicate on one scheduled row in its context, for an assumption
    every row the callers generate keeps (checked on each)."""
    breaker: Breaker | None = None
    """How one row breaks it and keeps every other (``fuzz --drop``, review's probes),
    but those of :attr:`co_broken`."""
    co_broken: tuple["Assumption", ...] = ()
    """The assumptions a row its breaker returns may break with it, because
    they speak of rows it rules out (a decode row's accepted count and length
    are bounded for a row that runs a token): the breaker keeps every other."""
    reach: Reach = EVERYWHERE
    """Where its breaker, or the caller model, can break it."""
    behavioural: bool = False
    """The kernels' equivalence obligation does not assume it: a kernel equal
    to the spec only under it is reported with it."""
    caller_breaks: CallerBreak | None = None
    """How the system's caller model (a review campaign) breaks it when it is
    dropped; None when it cannot."""
    caller_draws: Decisions = ()
    """For an assumption vLLM's evidence contradicts: the callers' policy decisions
    (:data:`Decisions`) with which every review campaign draws vLLM's behaviour that
    breaks it, so each version is judged under it (never probed: vLLM does it)."""

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"{self.name}: scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if self.breaker is not None and self.scope != PER_REQUEST:
            raise ValueError(f"{self.name}: only a {PER_REQUEST} assumption has a row breaker")
        if self.caller_draws and (self.provenance.status != CONTRADICTED or self.droppable):
            raise ValueError(f"{self.name}: only a contradicted assumption that no probe drops is drawn by the "
                             f"campaigns (caller_draws)")

    def __call__(self, *args: Any) -> Cond:
        return self.holds(*args)

    @property
    def droppable(self) -> bool:
        """A caller can break it on purpose: one row (a breaker) or the caller model."""
        return self.breaker is not None or self.caller_breaks is not None


@dataclass(frozen=True)
class AssumptionSet:
    """Assumptions needed only jointly: each implies what a step needs of the
    others, so only breaking all of them together shows a counterexample.
    ``caller_breaks`` and ``reach`` as for one :class:`Assumption`."""

    members: tuple[Assumption, ...]
    caller_breaks: CallerBreak
    reach: Reach = EVERYWHERE

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.members)
