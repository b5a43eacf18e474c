"""A fuzz campaign's configuration: profiles, :class:`CampaignConfig`, set-up checks, the share-out.

What a campaign is asked to do and whether it can start: the profiles'
budgets, watchdogs and shrinking limits, the scenario classes it must reach,
the checks that turn bad options into a :class:`SetupError` before any work,
and how its examples are shared out (:func:`combinations_of`,
:func:`examples_per_combination`, :func:`example_seed`). The worker that
runs a share is :mod:`.campaign_worker`; the parent that schedules the
workers and keeps the findings, :mod:`.campaign`.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from functools import cache
from itertools import combinations
from typing import Any

from replayssm.base.reports import check_output_folder
from replayssm.spec.geometry import Conventions

from .containment import check_drop
from .lockstep import check_systems
from .target import DEFAULT_TARGET, load_target

PROFILES = {
    "ci": {"examples": 128, "max_steps": 12},
    "dev": {"examples": 150, "max_steps": 20},
    "nightly": {"examples": 2000, "max_steps": 40},
}

WATCHDOG_SECONDS = {
    "cpu": {"ci": 10.0, "dev": 20.0, "nightly": 60.0},
    "cuda": {"ci": 300.0, "dev": 300.0, "nightly": 300.0},
}
"""Default per-launch watchdog by device and profile (``--watchdog`` overrides).
CPU: the slowest launch of a ci campaign under the Triton interpreter takes
well under a second (``slowest_launch_seconds`` in the summary, docs/fuzz.md);
ci keeps a hang's time to kill short, the longer unattended profiles trade
that for a wider margin against a loaded machine. CUDA: the first launch of
each of the 32 constexpr combinations compiles its kernels."""

SHRINK_SECONDS = {"ci": 5.0, "dev": 30.0, "nightly": 300.0}
"""How long Hypothesis may shrink a finding, per profile (``--shrink-seconds``):
ci reports fast (a partly shrunk trace still replays), nightly shrinks as far
as Hypothesis's own limit."""

MAX_JOBS = len(Conventions.all())
"""A worker takes whole convention combinations: more workers than the 32 would idle."""

SCENARIOS = (
    "checkpoint",
    "ring wrap",
    "boundary with checkpoint",
    "boundary without checkpoint",
    "live == destination publish",
    "multi-column prefill reset",
    "prefix hit",
    "migration to a fresh slot",
    "migration to a copied slot",
    "padding row",
    "null column",
    "table full",
    "live column is the last column",
    "stale slot past the live column",
    "block size 1",
    "one-column table",
    "mode-none chunk past the first block",
    "prompt tail as decode",
    "all mode under a host that does not publish",
    *(f"conventions {c.label()}" for c in Conventions.all()),
)
"""Every scenario class a campaign must reach."""


def required_scenarios(drop: str | None) -> tuple[str, ...]:
    """:data:`SCENARIOS`, and under ``--drop NAME`` a row that broke it."""
    return SCENARIOS + ((f"broke {drop}",) if drop else ())


@dataclass(frozen=True)
class CampaignConfig:
    """One campaign's parameters. ``watchdog`` and ``shrink_seconds`` default
    to the ``profile``'s (:data:`WATCHDOG_SECONDS`, :data:`SHRINK_SECONDS`)."""

    impl: str | None
    device: str
    examples: int
    max_steps: int
    seed: int
    jobs: int
    failures_dir: str
    level: str = "kernel"
    profile: str = "ci"
    watchdog: float | None = None
    shrink_seconds: float | None = None
    drop: str | None = None
    """A per-request caller assumption broken on purpose (:mod:`.containment`)."""
    database: str | None = None
    """The folder of the Hypothesis example database the workers share (:mod:`.example_db`); None: none."""
    ray: str | None = None
    """Run the workers as Ray tasks (:mod:`.ray_pool`): a cluster's address, or "" for a local Ray;
    None: the local process pool. With Ray, ``jobs`` None is one worker per GPU (cuda) or CPU the cluster has."""
    systems: int = 1
    """Independent small systems per launch, driven in lockstep (:mod:`.lockstep`)."""

    @property
    def watchdog_seconds(self) -> float:
        """``watchdog``, else the profile's; on CPU times ``systems // 4`` from 8
        systems on (the interpreter's time grows with a launch's rows)."""
        if self.watchdog is not None:
            return self.watchdog
        scale = max(1, self.systems // 4) if self.device == "cpu" else 1
        return WATCHDOG_SECONDS[self.device][self.profile] * scale

    @property
    def shrink_limit(self) -> float:
        return self.shrink_seconds if self.shrink_seconds is not None else SHRINK_SECONDS[self.profile]

    def as_json(self) -> dict:
        return {"impl": self.impl or DEFAULT_TARGET, "level": self.level, "device": self.device, "seed": self.seed,
                "profile": self.profile, "budget": {"examples": self.examples, "max_steps": self.max_steps},
                "jobs": self.jobs, "watchdog_seconds": self.watchdog_seconds, "shrink_seconds": self.shrink_limit,
                "drop": self.drop, "database": self.database, "systems": self.systems,
                **({"ray": self.ray} if self.ray is not None else {})}


class SetupError(ValueError):
    """The campaign cannot start (device, target, level, output paths): not a finding."""


def example_seed(seed: int, share: int) -> int:
    """The Hypothesis seed of share ``share`` of a campaign seeded ``seed``: a
    fuzz campaign's convention combination, a numeric campaign's, a review
    campaign's turn. Shares below 1000 of different campaign seeds never meet.
    A finding's trace is named by it (:func:`.report.unique_name`, the review
    traces), so the name says which run to repeat."""
    return seed * 1000 + share


def examples_per_combination(examples: int) -> int:
    """Each convention combination runs the same number of examples, at least
    one: ``examples`` rounded up to a multiple of the combination count."""
    return max(1, -(-examples // len(Conventions.all())))


def combinations_of(worker: int, jobs: int) -> list[int]:
    """The convention combinations (indices into ``Conventions.all()``) that
    ``worker`` of ``jobs`` runs, in order. The workers take turns picking,
    each the combination that adds the most value pairs of two flags to those
    its own earlier ones cover (lowest index on ties): every worker meets each
    pair of flag values within its first few combinations, so a bug that
    needs two flags set some way is met early by whichever worker runs, and
    together the workers run each combination once."""
    return list(_taken(jobs)[worker])


@cache
def _taken(jobs: int) -> tuple[tuple[int, ...], ...]:
    """Each of ``jobs`` workers' combinations (:func:`combinations_of`), picked once per count of workers
    (a campaign's shares ask for every worker's, once per worker)."""
    def pairs(flags: tuple) -> set[tuple[int, int, bool, bool]]:
        return {(i, j, flags[i], flags[j]) for i, j in combinations(range(len(flags)), 2)}

    pairs_of = [pairs(astuple(c)) for c in Conventions.all()]  # each combination's, made once
    every_pair = set().union(*pairs_of)
    remaining = list(range(len(pairs_of)))
    covered: list[set[tuple[int, int, bool, bool]]] = [set() for _ in range(jobs)]
    taken: list[list[int]] = [[] for _ in range(jobs)]
    turn = 0
    while remaining:
        best = max(remaining, key=lambda n: (len(pairs_of[n] - covered[turn]), -n))
        covered[turn] |= pairs_of[best]
        if covered[turn] == every_pair:
            covered[turn] = set()
        taken[turn].append(best)
        remaining.remove(best)
        turn = (turn + 1) % jobs
    return tuple(map(tuple, taken))


def check_device(device: str) -> None:
    """A :class:`SetupError` unless ``device`` is ``cpu``, or ``cuda`` with a CUDA device present."""
    import torch

    if device not in ("cpu", "cuda"):
        raise SetupError(f"--device must be cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise SetupError("--device cuda: this torch sees no CUDA device")


def check_budget(examples: object, max_steps: object) -> None:
    """A :class:`SetupError` unless both are ints >= 1 (named as ``fuzz``'s options)."""
    for option, value in (("--examples", examples), ("--max-steps", max_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SetupError(f"{option} must be >= 1 (an int), got {value!r}")


def check_setup(config: CampaignConfig, load: bool = True) -> Any:
    """The campaign's target (``load`` false: None, the options only), or a
    :class:`SetupError` naming what is wrong with the device, the budget, the
    output folders, the target or the level (the report files are the command
    line's to check)."""
    if config.ray is None or config.device != "cuda":  # under Ray the workers' machines need CUDA, not this one
        check_device(config.device)
    check_budget(config.examples, config.max_steps)
    if config.ray is not None and config.jobs is None:
        pass  # one worker per GPU or CPU of the cluster, counted once connected (.ray_pool)
    elif isinstance(config.jobs, bool) or not isinstance(config.jobs, int) or not 1 <= config.jobs <= MAX_JOBS:
        raise SetupError(f"--jobs must be in [1, {MAX_JOBS}] (one worker per convention combination at most), "
                         f"got {config.jobs!r}")
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) or config.seed < 0:
        raise SetupError(f"seed must be an int >= 0, got {config.seed!r}")
    try:
        check_drop(config.drop)
        check_systems(config.systems, config.drop)
    except ValueError as e:
        raise SetupError(str(e)) from e
    if config.profile not in PROFILES:
        raise SetupError(f"--profile must be one of {sorted(PROFILES)}, got {config.profile!r}")
    for name in ("watchdog", "shrink_seconds"):
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise SetupError(f"--{name.replace('_', '-')} must be a number of seconds > 0, got {value!r}")
    try:
        check_output_folder(config.failures_dir, "--failures")
        if config.database is not None:
            check_output_folder(config.database, "--database")
        if config.ray is not None:
            from .ray_pool import require_ray

            require_ray()
        if not isinstance(config.impl, (str, type(None))) or config.impl is not None and not config.impl.strip():
            raise ValueError(f"--impl must name a module or a .py file, got {config.impl!r}")
        if not load:
            return None
        return load_target(config.impl, cuda=config.device == "cuda" and config.ray is None, level=config.level)
    except ValueError as e:
        raise SetupError(str(e)) from e
