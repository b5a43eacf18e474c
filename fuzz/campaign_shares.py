"""A campaign's Hypothesis runs ("shares") and how its workers take them.

Each convention combination runs ``examples_per_combination`` examples. With
many examples per combination they are split into several Hypothesis runs of
at least :data:`SHARE_EXAMPLES` examples each (no more runs than
:data:`SHARES_PER_WORKER` per worker in all), so that the local workers can
take the next run when they finish one and none idles at the campaign's end
waiting for a worker that drew long examples (measured on the H200 at 1,024
examples: one combination took 56 s, another 15; docs/gpu.md, 2026-12-06).
Part 0 of combination ``n`` is seeded as the combination's one run was
(``example_seed(seed, n)``), part ``p`` ``example_seed(seed, n + 32 p)``; a
run of fewer examples draws other examples than the one long run did
(Hypothesis's generation depends on its ``max_examples``), so a split
campaign runs other examples than an unsplit one of the same size. With one
part per combination the shares are the combinations themselves, the same
runs as before the split, in :func:`.campaign_config.combinations_of`'s order.

:func:`shares` lists every run in the order they are taken: the workers'
first combinations (so each worker starts with the combination
:func:`.campaign_config.combinations_of` gives it first, meeting each pair of
flag values early), round by round, part 0 of every combination before part
1. Local workers take their first share by index and the rest from one
shared counter (:class:`SharedCounter`); Ray tasks, which share no memory,
take every ``jobs``-th (:func:`static_shares`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replayssm.spec.geometry import Conventions

from .campaign_config import combinations_of, examples_per_combination

SHARE_EXAMPLES = 8
"""The fewest examples of one Hypothesis run of a split combination."""

SHARES_PER_WORKER = 8
"""How many runs per worker a campaign is split into at most (the last one a
worker takes bounds its wait at the end, so smaller is better balanced; each
run also starts with Hypothesis's simplest example)."""


@dataclass(frozen=True)
class Share:
    """One Hypothesis run: ``examples`` examples of convention combination
    ``combination`` (an index into ``Conventions.all()``), part ``part``."""

    combination: int
    part: int
    examples: int

    @property
    def index(self) -> int:
        """Its index for :func:`.campaign_config.example_seed` (the combination for part 0)."""
        return self.combination + len(Conventions.all()) * self.part


def parts_of(examples: int, jobs: int) -> int:
    """Into how many runs each combination's examples are split."""
    per = examples_per_combination(examples)
    return max(1, min(per // SHARE_EXAMPLES, -(-SHARES_PER_WORKER * jobs // len(Conventions.all()))))


def shares(examples: int, jobs: int) -> list[Share]:
    """Every run of a campaign of ``examples`` on ``jobs`` workers, in the order they are taken."""
    per, parts = examples_per_combination(examples), parts_of(examples, jobs)
    own = [combinations_of(w, jobs) for w in range(jobs)]
    order = [c[r] for r in range(max(map(len, own))) for c in own if r < len(c)]
    sizes = [per // parts + (p < per % parts) for p in range(parts)]
    return [Share(n, p, sizes[p]) for p in range(parts) for n in order]


def static_shares(worker: int, jobs: int, examples: int) -> list[Share]:
    """Worker ``worker``'s runs when workers share no counter: every ``jobs``-th, from its own index
    (with one part per combination: :func:`.campaign_config.combinations_of`'s combinations, in its order)."""
    return shares(examples, jobs)[worker::jobs]


class SharedCounter:
    """The next share to take, in memory the local workers share (a
    ``multiprocessing`` ``Value`` made by the campaign's process context and
    handed to each worker when it starts). Worker ``w`` takes share ``w``
    first, then whichever is next."""

    def __init__(self, context: Any, jobs: int) -> None:
        self.value = context.Value("i", jobs)

    def take(self) -> int:
        """The next share's index (past the end once every share is taken)."""
        with self.value.get_lock():
            index = self.value.value
            self.value.value += 1
        return index


def taken_shares(worker: int, jobs: int, examples: int, counter: SharedCounter | None):
    """The shares ``worker`` runs, one at a time: with a ``counter``, its own
    first and then the next free one until none is left; without, :func:`static_shares`."""
    if counter is None:
        yield from static_shares(worker, jobs, examples)
        return
    every = shares(examples, jobs)
    index = worker
    while index < len(every):
        yield every[index]
        index = counter.take()
