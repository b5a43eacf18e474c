"""Supervised child processes: a hang or a dead worker is a finding, not a lost run.

Every worker (a campaign's share, or a replay) runs in a child process that is
the leader of its own process group and talks to the parent over its own pipe
(a worker that dies mid-message damages only its own pipe). The child reports:

* ``("ready",)`` once it has set up (loaded the target): a child that dies
  before that failed to start, which is a set-up error, not a finding,
* ``("unusable", text)`` instead when the target is no input it can judge
  (a set-up error whose message is ``text``),
* ``("example", params)`` when a new example starts (the first launch of it),
* ``("launch", action)`` before it hands a launch action to the implementation,
  ``("landed",)`` once that returned,
* ``("stats", {...})`` now and then, ``("failing", {kind, reason, ...})`` at its first failure,
* anything else its body sends (``("finding", ...)``, ``("line", ...)``),
* ``("result", value)`` last, or ``("error", text)`` when its body raised,
  or ``("target", {kind, reason, error})`` when the target (in its own
  process, :mod:`.isolation`) ended, hung or misbehaved at import: a fault
  like a dead worker's, with the action log up to that point.

The parent keeps each child's current example as an *action log*. A launch
that has not landed ``watchdog`` seconds after it was announced is a hang; a
child whose process ends without a result died (an exit status or a signal).
Either way the parent kills the child's whole process group and hands back the
log up to that launch, which is the finding's trace. SIGINT and SIGTERM stop
every child the same way and end the supervision early (a caller then raises
:class:`~replayssm.base.interrupts.Interrupted`, as :func:`.replay.replay` does).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from replayssm.base import fork_server
from replayssm.base.interrupts import SIGNALS

from replayssm.base.isolation import TargetFault, TargetGone, describe_exit

STATS_EVERY_SECONDS = 1.0
"""How often a child sends its statistics (for the progress line)."""

POLL_SECONDS = 0.25
"""The parent's longest wait between checks of the watchdog and of signals."""


class Reporter:
    """The child's side of the pipe (see the module docstring)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._example: object = None
        self._failing = False
        self._stats_at = 0.0

    def send(self, *message: Any) -> None:
        self.conn.send(message)

    def launching(self, trace: dict, action: dict) -> None:
        """Announce ``action`` of the example whose trace dict is ``trace``."""
        if trace is not self._example:
            self._example = trace
            self.send("example", trace["params"])
        self.send("launch", action)

    def landed(self) -> None:
        self.send("landed")

    def ready(self) -> None:
        self.send("ready")

    def failing(self, described: dict) -> None:
        """The first failure of this child (later ones, e.g. while shrinking, are
        not sent): a dict with at least ``kind`` and ``reason``."""
        if not self._failing:
            self._failing = True
            self.send("failing", described)

    def stats(self, counts: Callable[[], dict]) -> None:
        """Send ``counts()`` when :data:`STATS_EVERY_SECONDS` have passed since the last."""
        now = time.monotonic()
        if now - self._stats_at >= STATS_EVERY_SECONDS:
            self._stats_at = now
            self.send("stats", counts())


def _end_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent ``parent`` ends
    (``PR_SET_PDEATHSIG``): a child leads a process group of its own, so a
    parent SIGKILLed with its group (a CI job's time-out) would leave it
    running, holding the fork server open and its hosts and folders with it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the request took effect
        os._exit(1)


def _child_main(body: Callable[..., Any], args: tuple, conn: Connection, parent: int | None = None) -> None:
    """Entry point of a child: its own process group, ended with its parent
    (the pid ``parent``), default signal dispositions, ``body(*args,
    reporter)``'s value sent as the result."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    if parent is not None:
        _end_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    reporter = Reporter(conn)
    try:
        reporter.send("result", body(*args, reporter))
    except (TargetGone, TargetFault) as e:  # the target's process ended, hung or misbehaved at import
        fault = e.fault if isinstance(e, TargetGone) else e
        reporter.send("target", {"kind": fault.kind, "reason": fault.reason, "error": fault.report()[:4000]})
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which decides
        reporter.send("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    finally:
        conn.close()


@dataclass
class Child:
    """The parent's record of one child process."""

    name: int
    process: Any
    conn: Connection
    params: dict | None = None
    actions: list = field(default_factory=list)
    launch_started: float | None = None
    slowest_launch: float = 0.0
    """The longest a launch of this child took, as the parent saw it (seconds)."""
    stats: dict = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    failing: dict | None = None
    failing_log: dict | None = None
    fault: dict | None = None
    done: bool = False
    ready: bool = False
    unusable: str | None = None
    """Why the target is no input this child can judge (a set-up error), if it said so."""

    def log(self) -> dict | None:
        """The current example as ``{"params", "actions"}`` (None before its first launch)."""
        if self.params is None:
            return None
        return {"params": self.params, "actions": list(self.actions)}


def catch_interrupts(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    """Route SIGINT and SIGTERM (:data:`~replayssm.base.interrupts.SIGNALS`) to
    ``handler``; the handlers they had. Off the main thread nothing changes
    (signals stay with the caller) and it is empty."""
    previous = {}
    for s in SIGNALS:
        try:
            previous[s] = signal.signal(s, handler)
        except ValueError:
            pass
    return previous


def restore_handlers(previous: dict[int, Any]) -> None:
    """Put back the handlers ``previous`` names (those not set from Python, or
    off the main thread, stay as they are)."""
    for s, h in previous.items():
        try:
            signal.signal(s, h)
        except (ValueError, TypeError):
            pass


def kill_group(process: Any) -> None:
    """SIGKILL the process group the child leads (the child alone if it has none yet)."""
    if process.pid is None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            process.kill()
        except (ProcessLookupError, AttributeError):
            pass
    process.join(5)


class Supervisor:
    """Start children, follow their messages, turn hangs and deaths into faults.

    ``on_message(child, message)`` sees every message that is not protocol
    (see the module docstring); ``on_fault(child)`` is called once a child
    hung or died (``child.fault`` says which) and ``on_failing(child)`` at a
    child's first failure, so the caller may stop the others (:meth:`stop`).
    """

    def __init__(self, context: Any, watchdog: float | None,
                 on_message: Callable[[Child, tuple], None] = lambda c, m: None,
                 on_fault: Callable[[Child], None] = lambda c: None,
                 on_failing: Callable[[Child], None] = lambda c: None,
                 on_tick: Callable[[], None] = lambda: None) -> None:
        self.context, self.watchdog = context, watchdog
        self.on_message, self.on_fault, self.on_failing, self.on_tick = on_message, on_fault, on_failing, on_tick
        self.children: list[Child] = []
        self.signal: int | None = None

    def start(self, name: int, body: Callable[..., Any], args: tuple) -> Child:
        if self.context.get_start_method() == "fork":  # the children's target hosts: from one fork server
            fork_server.prepare()
        parent_end, child_end = self.context.Pipe(duplex=False)
        # A fork server's child has the server for its parent, not this process: it is not asked to end with us.
        parent = None if self.context.get_start_method() == "forkserver" else os.getpid()
        process = self.context.Process(target=_child_main, args=(body, args, child_end, parent), daemon=True)
        process.start()
        child_end.close()
        try:
            os.setpgid(process.pid, process.pid)
        except OSError:
            pass  # the child did it already (or exec'd: spawn); it does it itself too
        child = Child(name, process, parent_end)
        self.children.append(child)
        return child

    def stop(self, child: Child) -> None:
        """Kill a child that is still running; it ends without a fault."""
        if not child.done:
            child.done = True
            kill_group(child.process)
            child.conn.close()

    def stop_all(self) -> None:
        for child in self.children:
            self.stop(child)

    def _handle(self, child: Child, message: tuple) -> None:
        kind = message[0]
        if kind == "ready":
            child.ready = True
        elif kind == "unusable":
            child.unusable = message[1]
        elif kind == "example":
            child.params, child.actions = message[1], []
        elif kind == "launch":
            child.actions.append(message[1])
            child.launch_started = time.monotonic()
        elif kind == "landed":
            if child.launch_started is not None:
                child.slowest_launch = max(child.slowest_launch, time.monotonic() - child.launch_started)
            child.launch_started = None
        elif kind == "stats":
            child.stats = message[1]
        elif kind == "failing":
            child.failing, child.failing_log = message[1], child.log()
            self.on_failing(child)
        elif kind == "result":
            child.result = message[1]
        elif kind == "error":
            child.error = message[1]
        elif kind == "target":
            child.fault = {**message[1], "log": child.log()}
            self.on_fault(child)
        else:
            self.on_message(child, message)

    def _drain(self, child: Child) -> None:
        try:
            while child.conn.poll():
                self._handle(child, child.conn.recv())
        except (EOFError, OSError):
            pass

    def _ended(self, child: Child) -> None:
        """The child's process is gone: a fault unless it sent its result or an error."""
        self._drain(child)
        child.process.join(5)
        child.done = True
        child.conn.close()
        if child.fault is not None or child.unusable is not None:  # reported before the worker ended
            return
        if child.result is None and child.error is None and not child.ready:
            child.error = f"the worker process died ({describe_exit(child.process.exitcode)}) while it set up"
        elif child.result is None and child.error is None:
            how = describe_exit(child.process.exitcode)
            if child.launch_started is not None:
                where = f"during launch {len(child.actions) - 1} ({child.actions[-1].get('name')})"
            else:
                where = "outside a launch"
            child.fault = {"kind": "crash", "reason": f"the process running the implementation died ({how}) {where}",
                           "log": child.log()}
            self.on_fault(child)

    def _hung(self, child: Child) -> None:
        kill_group(child.process)
        child.done = True
        child.conn.close()
        action = child.actions[-1]
        child.fault = {"kind": "hang", "reason": f"launch {len(child.actions) - 1} ({action.get('name')}) did not "
                       f"return within the {self.watchdog:g} s watchdog", "log": child.log()}
        self.on_fault(child)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signal = signum

    def run(self) -> None:
        """Follow the children until each has ended or a signal arrived
        (then every child is stopped and ``self.signal`` says which)."""
        handlers = catch_interrupts(self._on_signal)
        try:
            while self.signal is None:
                live = [c for c in self.children if not c.done]
                if not live:
                    break
                waitables = {c.conn: c for c in live}
                waitables.update({c.process.sentinel: c for c in live})
                for ready in wait(list(waitables), timeout=POLL_SECONDS):
                    child = waitables[ready]
                    if child.done:
                        continue
                    if ready is child.conn:
                        self._drain(child)
                    else:
                        self._ended(child)
                now = time.monotonic()
                for child in live:
                    if (not child.done and self.watchdog is not None and child.launch_started is not None
                            and now - child.launch_started > self.watchdog):
                        self._drain(child)
                        if child.launch_started is not None and not child.done:
                            self._hung(child)
                self.on_tick()
            if self.signal is not None:
                for child in self.children:
                    if not child.done:
                        self._drain(child)
                self.stop_all()
        finally:
            restore_handlers(handlers)
