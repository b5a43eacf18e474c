"""How every subcommand stops on SIGINT or SIGTERM.

The contract (docs/cli.md): the workers are ended, what was done so far is
summarised, the JSON says ``"interrupted": true`` and the JUnit file marks
what did not finish, every finding so far is kept, and the exit status is
128 + the signal's number (:data:`replayssm.base.reports.EXIT_SIGINT`,
:data:`~replayssm.base.reports.EXIT_SIGTERM`).

Within :func:`interruptible` either signal raises :class:`Interrupted` in
the main thread, wherever it is (``prove``, ``review``); a piece of work that
knows what it had done when it was cut short attaches that to the exception
(:attr:`Interrupted.partial`) and lets it pass. A loop that must not be cut
mid-call (``fuzz``'s supervisor, which drains its children's pipes first)
records the signal itself and raises :class:`Interrupted` once its children
are stopped. :func:`stop_children` ends the worker processes left.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that interrupt a run (and give its partial report)."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: stop, report what was done, exit :attr:`status`.

    Not an ``Exception``, so that no obligation or campaign takes it for a
    failure of its own; a ``KeyboardInterrupt``, which the libraries a run
    goes through let pass as it is (Hypothesis records any other exception
    raised inside a test as that test's outcome, and may replace it with one
    of its own)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.partial: Any = None
        """What the piece of work it cut short had done (its own partial
        result, for the caller's partial report), where that piece says."""

    @property
    def status(self) -> int:
        """The exit status: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


@contextmanager
def interruptible() -> Iterator[None]:
    """Within: the first SIGINT or SIGTERM raises :class:`Interrupted` in the
    main thread; a later one is ignored while the partial report is written,
    so that a second Ctrl-C cannot cut that short. On leaving, the previous
    handlers are back."""

    global _arrived

    def raise_interrupted(signum: int, frame: Any) -> None:
        global _arrived
        stop_interrupting()
        _arrived = signum
        raise Interrupted(signum)

    previous = {s: signal.signal(s, raise_interrupted) for s in SIGNALS}
    try:
        yield
    finally:
        _arrived = None
        for s, handler in previous.items():
            signal.signal(s, handler)


_arrived: int | None = None
"""The signal that arrived within :func:`interruptible`, if one did."""


def raise_if_interrupted() -> None:
    """Raise :class:`Interrupted` again where a signal arrived within
    :func:`interruptible` but its exception was lost: raised while a finalizer
    ran (Python prints "Exception ignored in ..." and goes on), the run would
    go on with the signals ignored. A long loop calls this at points where
    stopping is safe."""
    if _arrived is not None:
        raise Interrupted(_arrived)


@contextmanager
def signal_first() -> Iterator[None]:
    """Within: an exception that leaves after a signal arrived (within
    :func:`interruptible`) is that signal's :class:`Interrupted`, the exception
    its cause. A library cut short by the signal's exception may raise one of
    its own in its place (Hypothesis's engine, interrupted in its bookkeeping,
    fails an internal ``assert``), which a campaign would otherwise take for the
    target's finding."""
    try:
        yield
    except Interrupted:
        raise
    except BaseException as e:
        if _arrived is None:
            raise
        raise Interrupted(_arrived) from e


def stop_interrupting() -> None:
    """From now until :func:`interruptible` is left, SIGINT and SIGTERM are
    ignored: the work is over (done or interrupted) and its report is being
    written, which a signal must not cut short."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def stop_children(grace: float = 1.0) -> int:
    """End every worker process this process started (through
    :mod:`multiprocessing`, pools included): SIGTERM to each, to its whole
    process group where it leads one; SIGKILL to those still alive ``grace``
    seconds later. Returns how many there were. (A child of
    :func:`subprocess.run` is killed by ``subprocess`` itself when
    :class:`Interrupted` passes through it.)"""
    children = multiprocessing.active_children()
    for p in children:
        _signal_group(p.pid, signal.SIGTERM)
    for p in children:
        p.join(grace)
        if p.is_alive():
            _signal_group(p.pid, signal.SIGKILL)
            p.join()
    return len(children)


def _signal_group(pid: int | None, signum: int) -> None:
    """Send ``signum`` to the process group ``pid`` leads, else to ``pid`` alone."""
    if pid is None:
        return
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
