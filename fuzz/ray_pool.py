"""Campaign workers as Ray tasks (``fuzz --ray [ADDRESS]``): one per GPU, on any number of machines.

:class:`RayPool` stands where the local pool's :class:`~.workers.Supervisor`
stands in :func:`~.campaign.run_campaign`, with the same interface
(``start``, ``run``, ``stop``, ``children``, ``signal``) and the same
callbacks, so statistics, findings, traces, the summary and the exit status
are made by the same code:

* Each worker is a Ray task holding one GPU (``--device cuda``) or one CPU.
  Inside it, a :class:`~.workers.Supervisor` runs the worker's share
  (:func:`~.campaign_worker.run_worker`) in a child process, exactly as the local
  pool does: a launch past the watchdog is a ``hang``, a child that dies is a
  ``crash``, each with the action log up to that launch; the task hands back
  its child's record (:func:`_record`), which becomes a
  :class:`~.workers.Child` on the driver.
* The tasks and the driver talk through one actor, the :class:`Hub`, placed
  on the driver's machine: the tasks post their statistics (for the progress
  line) and their first failure (so the driver stops the other workers while
  the finder shrinks, as locally); the driver posts stop requests, which each
  task reads every :data:`~.workers.POLL_SECONDS`.
* The Hub also holds the example database (``--database DIR``: a folder on
  the driver's machine, :mod:`.example_db`), which the child processes reach
  through their task; no shared file system is needed.
* Each task's record on the driver (:attr:`RayPool.tasks`, the summary's
  ``ray_tasks``) names its node, the GPU ids Ray gave it, the
  ``CUDA_VISIBLE_DEVICES`` it saw, how many example-database calls its child
  made, and its examples and request-steps.
* :data:`CPU_GPUS_VARIABLE` declares GPUs on a local Ray that computes on the
  CPU, so the one-task-per-GPU scheduling runs (in tests) without GPUs.
* SIGINT and SIGTERM on the driver ask every task to stop its child and
  return what it has (:data:`STOP_GRACE_SECONDS`), then cancel the tasks that
  did not; the partial summary follows as for the local pool. A task's child
  dies with the task's process (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from replayssm.base.interrupts import SIGNALS

from .workers import POLL_SECONDS, STATS_EVERY_SECONDS, Child, Reporter, Supervisor, catch_interrupts, restore_handlers

INSTALL_HINT = ("pip install 'replayssm-verify[cluster]' (in a checkout: pip install -e '.[cluster]'), "
                "on the driver and on every machine of the cluster")

STOP_GRACE_SECONDS = 15.0
"""After an interrupt, how long the driver waits for the tasks to stop their
children and hand back their records before it cancels them."""

CPU_GPUS_VARIABLE = "REPLAYSSM_RAY_CPU_GPUS"
"""When set to N >= 1 with ``--device cpu``: the local Ray this process starts
declares N GPUs (``ray.init(num_gpus=N)``; with an ADDRESS, the GPUs the
cluster declares, e.g. ``ray start --num-gpus N``), and each task holds one of
them, as under ``--device cuda``: Ray assigns it a GPU id and sets
``CUDA_VISIBLE_DEVICES``, while the worker computes on the CPU. It exercises
the per-GPU scheduling where there are no GPUs; the numbers are CPU numbers."""


def cpu_gpus(device: str) -> int:
    """The GPUs :data:`CPU_GPUS_VARIABLE` declares (0 when unset), or a ``ValueError`` naming it."""
    value = os.environ.get(CPU_GPUS_VARIABLE, "")
    if not value:
        return 0
    if not value.isdigit() or int(value) < 1 or device != "cpu":
        raise ValueError(f"{CPU_GPUS_VARIABLE}={value!r}: allowed is a whole number >= 1, with --device cpu only")
    return int(value)


def require_ray() -> Any:
    """The ``ray`` module, or a ``ValueError`` naming ``--ray`` and how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ValueError(f"--ray needs Ray, which is not installed ({e}): {INSTALL_HINT}") from None
    return ray


class Hub:
    """The actor between the driver and the tasks: events, stop requests, the example database."""

    def __init__(self, database: str | None) -> None:
        from hypothesis.database import DirectoryBasedExampleDatabase, InMemoryExampleDatabase

        self.database = DirectoryBasedExampleDatabase(database) if database else InMemoryExampleDatabase()
        self.events: list[tuple] = []
        self.stopped: set[int] = set()
        self.all_stopped = False

    def post(self, worker: int, kind: str, payload: Any) -> None:
        """A task's event: ``stats`` (its child's counts) or ``failing`` (its first failure)."""
        self.events.append((worker, kind, payload))

    def take_events(self) -> list[tuple]:
        events, self.events = self.events, []
        return events

    def stop(self, worker: int | None) -> None:
        """Ask one task (None: every task) to stop its child and return."""
        if worker is None:
            self.all_stopped = True
        else:
            self.stopped.add(worker)

    def should_stop(self, worker: int) -> bool:
        return self.all_stopped or worker in self.stopped

    def database_call(self, operation: str, args: tuple) -> Any:
        from .example_db import apply

        return apply(self.database, operation, args)


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when the process that started it ends
    (a cancelled task's child must not outlive it). Elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child_body(body: Callable[..., Any], args: tuple, database_conn: Any, reporter: Reporter) -> Any:
    """The task's child process: the worker's share with the Hub's example database."""
    from .example_db import PipeDatabase

    _die_with_parent()
    return body(*args, reporter, database=PipeDatabase(database_conn))


def _record(child: Child, supervisor: Supervisor) -> dict:
    """What the driver needs of the task's child (every field of :class:`Child` but its process and pipe)."""
    fields = {f.name: getattr(child, f.name) for f in dataclasses.fields(Child)
              if f.name not in ("name", "process", "conn", "done")}
    if supervisor.signal is not None and fields["result"] is None and fields["error"] is None:
        fields["error"] = f"the task was stopped by {signal.Signals(supervisor.signal).name} on its machine"
    return fields


def run_task(work: bytes, worker: int, device: str, watchdog: float, hub: Any) -> dict:
    """One Ray task: ``body(*args)`` (pickled in ``work``) in a supervised child
    process, its events posted to the ``hub``; returns the child's record and where it ran."""
    import multiprocessing

    import ray

    # Triton picks interpreter or compiler when it is imported, which unpickling the work does.
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    body, args = pickle.loads(work)
    database_calls = [0]

    def database_call(operation: str, call_args: tuple) -> Any:
        database_calls[0] += 1
        return ray.get(hub.database_call.remote(operation, call_args))

    context = multiprocessing.get_context("fork" if device == "cpu" else "spawn")
    ours, theirs = context.Pipe(duplex=True)
    from .example_db import serve_database

    threading.Thread(target=serve_database, daemon=True,
                     args=(ours, database_call)).start()
    posted: dict = {"stats": None, "at": 0.0}

    def tick() -> None:
        child = supervisor.children[0]
        now = time.monotonic()
        if child.stats and child.stats is not posted["stats"] and now - posted["at"] >= STATS_EVERY_SECONDS:
            posted.update(stats=child.stats, at=now)
            hub.post.remote(worker, "stats", child.stats)
        if not child.done and ray.get(hub.should_stop.remote(worker)):
            supervisor.stop(child)

    supervisor = Supervisor(context, watchdog, on_failing=lambda c: hub.post.remote(worker, "failing", c.failing),
                            on_tick=tick)
    supervisor.start(worker, _child_body, (body, args, theirs))
    theirs.close()
    supervisor.run()
    ours.close()
    gpus = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
    return {"child": _record(supervisor.children[0], supervisor), "node": ray.util.get_node_ip_address(),
            "gpus": [str(g) for g in gpus], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "database_calls": database_calls[0]}


class RayPool:
    """A campaign's workers as Ray tasks (the module docstring); ``config.jobs``
    counted from the cluster when None. Connects at construction: a cluster
    that cannot be reached, or one without a GPU for ``--device cuda`` (or
    :data:`CPU_GPUS_VARIABLE`), is a ``SetupError``."""

    def __init__(self, config: Any, out: TextIO) -> None:
        from .campaign_config import MAX_JOBS, SetupError

        self.ray = require_ray()
        self.out = out
        self.signal: int | None = None
        where = config.ray or "a local Ray"
        self._handlers = {s: signal.getsignal(s) for s in SIGNALS}
        try:
            declared = cpu_gpus(config.device)
        except ValueError as e:
            raise SetupError(str(e)) from None
        self.task_gpus = 1 if config.device == "cuda" or declared else 0
        started = time.perf_counter()
        try:
            self.ray.init(address=config.ray or None, include_dashboard=False, logging_level=logging.ERROR,
                          configure_logging=True, **({"num_gpus": declared} if declared and not config.ray else {}))
        except Exception as e:  # noqa: BLE001 - any failure to connect is a set-up error
            raise SetupError(f"--ray {config.ray or '(local)'}: cannot start or reach Ray: "
                             f"{type(e).__name__}: {e}") from None
        resources = self.ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
        nodes = len([n for n in self.ray.nodes() if n.get("Alive")])
        unit = "GPU" if self.task_gpus else "CPU"
        available = gpus if self.task_gpus else cpus
        if available < 1:
            self.close()
            holder = f"{CPU_GPUS_VARIABLE} holds" if declared else f"--device {config.device} runs"
            raise SetupError(f"--ray {config.ray or '(local)'}: the cluster reports no {unit}; {holder} "
                             f"each worker on one {unit}")
        self.config = config if config.jobs is not None else dataclasses.replace(
            config, jobs=min(available, MAX_JOBS))
        print(f"Ray: {where} ({'reached' if config.ray else 'started'} in {time.perf_counter() - started:.1f} s), "
              f"{nodes} node(s), {gpus} GPU(s), {cpus} CPU(s); {self.config.jobs} task(s) of one {unit} each"
              + (f" ({available} {unit}(s): the rest wait for a free one)" if self.config.jobs > available else "")
              + (f" (GPUs held by {CPU_GPUS_VARIABLE}; the workers compute on the CPU)" if declared else ""),
              file=out, flush=True)
        catch_interrupts(self._on_signal)  # after ray.init, which sets its own for SIGTERM
        self.children: list[Child] = []
        self.tasks: list[dict] = []
        """One record per returned task, in the order they returned (the module docstring)."""
        self._tasks: dict[Any, Child] = {}
        self.hub: Any = None

    def supervisor(self, on_fault: Callable[[Child], None], on_failing: Callable[[Child], None],
                   on_tick: Callable[[], None]) -> RayPool:
        """This pool, with the local pool's callbacks; the Hub starts on the driver's machine."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.on_fault, self.on_failing, self.on_tick = on_fault, on_failing, on_tick
        here = NodeAffinitySchedulingStrategy(self.ray.get_runtime_context().get_node_id(), soft=False)
        database = str(Path(self.config.database).resolve()) if self.config.database else None
        self.hub = self.ray.remote(Hub).options(num_cpus=0, scheduling_strategy=here).remote(database)
        return self

    def start(self, name: int, body: Callable[..., Any], args: tuple) -> Child:
        """Submit worker ``name``'s task: ``body(*args, reporter, database=...)`` on one GPU or CPU."""
        c = self.config
        task = self.ray.remote(run_task).options(
            num_gpus=self.task_gpus, num_cpus=1 - self.task_gpus, max_retries=0)
        child = Child(name, None, None)
        self.children.append(child)
        work = pickle.dumps((body, args))  # unpickled after the task has set Triton's mode
        self._tasks[task.remote(work, name, c.device, c.watchdog_seconds, self.hub)] = child
        return child

    def stop(self, child: Child) -> None:
        """Ask a task to stop its child (it returns what it has at its next poll)."""
        if not child.done:
            self.hub.stop.remote(child.name)

    def run(self) -> None:
        """Follow the tasks until each has returned or a signal arrived (then
        every task is stopped, :data:`STOP_GRACE_SECONDS` at most, and the rest cancelled)."""
        try:
            while self._tasks and self.signal is None:
                ready, _ = self.ray.wait(list(self._tasks), num_returns=1, timeout=POLL_SECONDS)
                self._events()
                for ref in ready:
                    self._returned(ref)
                self.on_tick()
            if self.signal is not None and self._tasks:
                self.hub.stop.remote(None)
                deadline = time.monotonic() + STOP_GRACE_SECONDS
                while self._tasks and time.monotonic() < deadline:
                    ready, _ = self.ray.wait(list(self._tasks), num_returns=1, timeout=POLL_SECONDS)
                    for ref in ready:
                        self._returned(ref)
                self._events()
                for ref, child in list(self._tasks.items()):
                    self.ray.cancel(ref, force=True)
                    child.done = True
                self._tasks.clear()
        finally:
            restore_handlers(self._handlers)  # those from before ray.init

    def close(self) -> None:
        """Disconnect (and stop the Ray this process started)."""
        self.ray.shutdown()

    def _events(self) -> None:
        for worker, kind, payload in self.ray.get(self.hub.take_events.remote()):
            child = self.children[worker]
            if kind == "stats" and not child.done:
                child.stats = payload
            elif kind == "failing":
                self._failing(child, payload)

    def _failing(self, child: Child, described: dict) -> None:
        if child.failing is None:
            child.failing = described
            self.on_failing(child)

    def _returned(self, ref: Any) -> None:
        """A task ended: its child's record on the driver; a fault or a failure reported as locally."""
        child = self._tasks.pop(ref)
        try:
            value = self.ray.get(ref)
        except Exception as e:  # noqa: BLE001 - the task itself failed (its machine, Ray): not a finding
            child.error = f"the Ray task of worker {child.name} failed: {type(e).__name__}: {e}"
            child.done = True
            return
        record, failing = value["child"], value["child"].pop("failing")
        for name, field_value in record.items():
            setattr(child, name, field_value)
        child.done = True
        if failing is not None:
            self._failing(child, failing)
        if child.fault is not None:
            self.on_fault(child)
        stats = child.result["stats"] if isinstance(child.result, dict) else child.stats or {}
        task = {"worker": child.name, "node": value["node"], "gpus": value["gpus"],
                "cuda_visible_devices": value["cuda_visible_devices"], "database_calls": value["database_calls"],
                "examples": stats.get("examples", 0), "request_steps": stats.get("request_steps", 0)}
        self.tasks.append(task)
        gpus = f", GPU {','.join(task['gpus'])}" if task["gpus"] else ""
        print(f"  worker {child.name} ({task['node']}{gpus}) ended: {task['examples']} examples, "
              f"{task['request_steps']} request-steps, {task['database_calls']} database calls",
              file=self.out, flush=True)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signal = signum
