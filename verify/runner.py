"""The proof scheduler: which obligations run where, in what order, and what
the run reports.

:func:`discharge` proves a list of obligations with ``jobs`` worker
processes and yields each :class:`~replayssm.verify.obligation.Result` as it
finishes. Two things shape the schedule:

- *sharding*: a ``shardable`` obligation's cases are shared by ``jobs``
  shards; each shard takes the next case index not yet taken from one
  counter in shared memory (so the shards finish within a case of each
  other), and a failing shard stops the others taking more;
- *lemmas*: an obligation whose ``lemmas`` are in the run waits for them and
  does not re-solve the goal parts they proved verbatim.

:class:`Report` gathers a run's results in catalog order for the summary
line and the JSON file.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replayssm.base.interrupts import stop_children

from .obligation import REGISTRY, Result, merge_shards, prove
from .proof_cache import ProofCache

DEFAULT_JOBS_CAP = 16
"""The default worker count stops here: the scaling was measured up to 16
processes (docs/system.md), and the affinity mask does not see a
container's CPU quota."""

MAX_JOBS = 256
"""The most workers ``--jobs`` accepts: one worker holds about 80 MB and the
largest obligation has 78 cases, so more only costs memory and start-up."""

PROGRESS_AFTER_S = 5.0
"""An obligation still running this long gets a progress line, and another
each time this long passes again (:func:`discharge`'s ``progress``)."""

REPORT_SCHEMA = "replayssm-prove/1"
"""The ``schema`` of :meth:`Report.as_json`: bumped when a field changes meaning."""


def usable_cpus() -> int:
    """The CPUs this process may run on (all of them where the OS cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_jobs() -> int:
    """One worker per usable CPU, at most :data:`DEFAULT_JOBS_CAP`."""
    return min(usable_cpus(), DEFAULT_JOBS_CAP)


_NEXT_CASE: dict[str, tuple[Any, ...]] = {}
"""Per shardable obligation of a :func:`discharge` run, one counter per
shard's share (the cases ``i`` with ``i % shards == k`` are share ``k``: the
counter holds the next index of its share not yet taken) and one flag per
share, set once a shard has made it its own: shared memory the forked
workers inherit."""

_WORKER: dict[str, int] = {}
"""This worker's number (``"id"``: 0, 1, ... in the order the pool started
its workers), set by :func:`_worker_init`; absent in the main process."""

_PROGRESS: dict[str, Any] = {}
"""Per obligation of a :func:`discharge` run, a pair of shared values: when
its first shard began (``time.time()``, 0 before), and how many of its cases
are done: what the progress lines report."""

NO_CASE_LEFT = 2**31 - 1
"""A share's counter once a shard has failed: past every case index."""


@dataclass(frozen=True)
class CaseShare:
    """How one shard of an obligation takes its cases (:func:`case_share`):
    ``take`` hands out the next index of its own share, ``steal(count)`` an
    index below ``count`` of another share not taken yet (None: none left)."""

    take: Callable[[], int]
    steal: Callable[[int], int | None]


def case_share(name: str, shards: int) -> CaseShare:
    """Obligation ``name``'s cases for a shard of this process: its share is
    the one numbered as this worker (the same share of every obligation, so
    a worker proves the cases whose programs it built for the obligation
    before, as the row-blocked kernel's four obligations share their cases),
    or the first no other shard has made its own. Each case index is handed
    out once, by its share's counter."""
    counters, owned = _NEXT_CASE[name]
    order = [(_WORKER.get("id", 0) + k) % shards for k in range(shards)]
    with owned.get_lock():
        home = next(k for k in order if not owned[k])
        owned[home] = 1

    def next_of(k: int, count: int) -> int | None:
        """The next index of share ``k`` below ``count``, taken; None when there is none (or a shard failed)."""
        counter = counters[k]
        with counter.get_lock():
            index = counter.value
            if index >= min(count, NO_CASE_LEFT):
                return None
            counter.value = index + shards
            return index

    def take() -> int:
        index = next_of(home, NO_CASE_LEFT)
        return NO_CASE_LEFT if index is None else index

    def steal(count: int) -> int | None:
        for k in order:
            if k != home and (index := next_of(k, count)) is not None:
                return index
        return None

    return CaseShare(take, steal)


def share_cases(names: list[str], shards: int = 2) -> None:
    """Give each shardable obligation of ``names`` its ``shards`` share
    counters in shared memory (:data:`_NEXT_CASE`), and each obligation its
    progress values, for the workers forked after this call."""
    context = multiprocessing.get_context("fork")
    _NEXT_CASE.clear()
    _NEXT_CASE.update({n: (tuple(context.Value("i", k) for k in range(shards)), context.Array("b", shards))
                       for n in names if REGISTRY[n].shardable})
    _PROGRESS.clear()
    _PROGRESS.update({n: (context.Value("d", 0.0), context.Value("i", 0)) for n in names})


def _begun(name: str) -> Callable[[], None] | None:
    """Marks ``name`` begun now (unless a shard of it began before) and
    returns the callback that counts its finished cases; None outside a
    :func:`discharge` run."""
    if name not in _PROGRESS:
        return None
    began, done = _PROGRESS[name]
    with began.get_lock():
        if began.value == 0.0:
            began.value = time.time()

    def case_done() -> None:
        with done.get_lock():
            done.value += 1

    return case_done


def progress_line(finished: set[str], now: float | None = None) -> str | None:
    """The progress line of the obligations begun at least
    :data:`PROGRESS_AFTER_S` ago and not ``finished``: each one's seconds so
    far and cases done; None when there is none."""
    now = time.time() if now is None else now
    slow = []
    for name, (began, done) in _PROGRESS.items():
        if name not in finished and began.value and now - began.value >= PROGRESS_AFTER_S:
            slow.append(f"{name} ({now - began.value:.0f} s, {done.value} cases done)")
    return f"  ... still proving {', '.join(slow)}" if slow else None


def prove_named(name: str, shard: tuple[int, int] = (0, 1), lemmas: tuple[str, ...] = (),
                shared_cases: bool = False, cache: str | None = None) -> Result:
    """Prove shard ``shard = (i, n)`` of the registered obligation ``name``
    (with ``shared_cases``, the cases of its :func:`case_share`), reusing the parts the proved obligations ``lemmas``
    state and the cases the proof cache in folder ``cache`` holds. A failure
    stops the obligation's other shards taking cases."""
    from .catalog import obligations

    obligations()
    share = case_share(name, shard[1]) if shared_cases else None
    result = prove(REGISTRY[name], shard, [REGISTRY[n] for n in lemmas], share.take if share else None,
                   ProofCache(cache) if cache is not None else None, case_done=_begun(name),
                   steal=share.steal if share else None)
    if shared_cases and result.status != "proved":
        for counter in _NEXT_CASE[name][0]:
            with counter.get_lock():
                counter.value = NO_CASE_LEFT
    return result


class LemmaCycle(ValueError):
    """Obligations that wait on each other's lemmas, so none can start."""


def _worker_init(started: Any) -> None:
    """A worker takes its number from the shared count of ``started``
    workers (:data:`_WORKER`), leaves interrupts to the main process (a
    terminal's Ctrl-C reaches the whole foreground group) and ends on SIGTERM."""
    with started.get_lock():
        _WORKER["id"] = started.value
        started.value += 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End every worker of ``pool`` now (SIGTERM, then SIGKILL to those
    still alive a second later) and drop the work not started."""
    stop_children()
    pool.shutdown(wait=False, cancel_futures=True)


def _crashed(name: str, e: BaseException) -> Result:
    """A shard whose worker process died (killed for memory, a crash in the
    solver) as its obligation's failure."""
    return Result(name, "failed", 0.0, [], detail=f"the worker proving it ended abnormally: {type(e).__name__}: {e}")


def discharge(names: list[str], jobs: int, cache: str | Path | None = None,
              reuse_whole: bool = True, progress: Callable[[str], None] | None = None) -> Iterator[Result]:
    """Prove each named obligation, ``jobs`` processes at a time (``jobs <= 1``:
    in this process), yielding results as they finish. A shardable
    obligation runs as ``jobs`` shards sharing its cases; an obligation with
    lemmas in the run starts once they are done and reuses the parts they
    proved. With a ``cache`` folder (:mod:`.proof_cache`), a case whose
    exact query was proved is not solved again, and (with ``reuse_whole``:
    only for obligations built from this tree alone) an obligation proved
    on this very source tree is reported from it without building its claims.
    With ``progress``, every :data:`PROGRESS_AFTER_S` seconds while some
    obligation has run that long, it is handed :func:`progress_line`.
    Raises :class:`LemmaCycle` when some obligations can never start.
    Closing the generator (an interrupt) ends the workers at once."""
    from .catalog import obligations

    obligations()
    kept = ProofCache(cache) if cache is not None else None
    folder = str(cache) if cache is not None else None
    waits = {n: [m for m in REGISTRY[n].lemmas if m in names] for n in names}
    status: dict[str, str] = {}
    started: set[str] = set()

    def ready() -> list[tuple[str, tuple[str, ...]]]:
        out = [(n, tuple(m for m in waits[n] if status[m] == "proved")) for n in names
               if n not in status and n not in started and all(m in status for m in waits[n])]
        started.update(n for n, _ in out)
        return out

    def stuck() -> LemmaCycle:
        return LemmaCycle(f"obligations waiting on each other's lemmas: {sorted(set(names) - set(status))}")

    def finished(r: Result) -> Result:
        status[r.name] = r.status
        if kept is not None and reuse_whole and r.status == "proved" and not r.cached:
            kept.keep_obligation(r.as_json())
        return r

    if kept is not None and reuse_whole:
        for n in names:
            r = kept.proved_result(n)
            if r is not None:
                started.add(n)
                yield finished(r)
    share_cases(names, max(jobs, 1))
    if jobs <= 1:
        yield from _in_this_process(names, status, ready, stuck, finished, folder, progress)
        return
    fork = multiprocessing.get_context("fork")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=fork, initializer=_worker_init,
                               initargs=(fork.Value("i", 0),))
    try:
        futures: dict = {}
        shards_of: dict[str, list[Result]] = {}

        def submit() -> None:
            # whole obligations first: the shards after them share their cases
            for n, lemmas in sorted(ready(), key=lambda item: REGISTRY[item[0]].shardable):
                count = jobs if REGISTRY[n].shardable else 1
                shards_of[n] = []
                for i in range(count):
                    futures[pool.submit(prove_named, n, (i, count), lemmas, count > 1, folder)] = (n, count)

        submit()
        while futures:
            done, _ = wait(futures, timeout=PROGRESS_AFTER_S if progress else None, return_when=FIRST_COMPLETED)
            line = progress_line(set(status)) if progress is not None and not done else None
            if progress is not None and line:
                progress(line)
            for f in done:
                n, count = futures.pop(f)
                try:
                    shards_of[n].append(f.result())
                except Exception as e:  # noqa: BLE001 - a dead worker fails its obligation, not the run
                    shards_of[n].append(_crashed(n, e))
                if len(shards_of[n]) == count:
                    yield finished(merge_shards(shards_of[n]))
            submit()
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown()
    if len(status) < len(names):
        raise stuck()


def _in_this_process(names: list[str], status: dict[str, str], ready: Callable[[], list],
                     stuck: Callable[[], LemmaCycle], finished: Callable[[Result], Result], folder: str | None,
                     progress: Callable[[str], None] | None) -> Iterator[Result]:
    """:func:`discharge` with one job: each obligation proved in this
    process, in turn; the progress lines (with ``progress``) from a thread
    of this process that only reads the shared progress values."""
    stop = threading.Event()
    if progress is not None:
        def report() -> None:
            while not stop.wait(PROGRESS_AFTER_S):
                line = progress_line(set(status))
                if line:
                    progress(line)

        threading.Thread(target=report, name="prove-progress", daemon=True).start()
    try:
        while len(status) < len(names):
            batch = ready()
            if not batch:
                raise stuck()
            for n, lemmas in batch:
                yield finished(prove_named(n, (0, 1), lemmas, cache=folder))
    finally:
        stop.set()


def proved_on_this_tree(cache: str | Path, only: str | None = None) -> list[Result] | None:
    """The results of the catalog's obligations (those whose name contains
    ``only``) when the cache holds every one as proved on this very source
    tree, else None; reads neither the catalog nor a claim, so a warm run
    imports none of the obligation modules."""
    kept = ProofCache(cache)
    chosen = [(n, sources) for n, sources in kept.catalog() or () if only is None or only in n]
    results = [kept.proved_result(n, sources) for n, sources in chosen]
    return results if chosen and all(r is not None for r in results) else None  # type: ignore[return-value]


@dataclass
class Report:
    """A ``prove`` run: its results in the order the obligations were asked
    for, its wall time, and whether it was cut short."""

    order: list[str]
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False

    def add(self, result: Result) -> None:
        self.results.append(result)
        rank = {n: i for i, n in enumerate(self.order)}
        self.results.sort(key=lambda r: rank[r.name])

    @property
    def failed(self) -> list[Result]:
        """The results that are not proofs (failed, unknown, or an error)."""
        return [r for r in self.results if r.status != "proved"]

    def summary(self) -> str:
        """The closing line: how many of the obligations asked for were proved."""
        line = f"{len(self.results) - len(self.failed)}/{len(self.results)} obligations proved in {self.seconds:.2f} s"
        if self.interrupted:
            line += f" (interrupted: {len(self.order) - len(self.results)} of {len(self.order)} not finished)"
        return line

    def as_json(self) -> dict:
        return {"schema": REPORT_SCHEMA, "obligations": [r.as_json() for r in self.results],
                "seconds": round(self.seconds, 3), "interrupted": self.interrupted,
                "not_finished": [n for n in self.order if n not in {r.name for r in self.results}]}
