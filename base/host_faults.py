"""What a target host reports besides results: the target's faults, which are
findings, and the harness's, which are set-up errors.

:class:`TargetFault`: the target ended its process, hung, raised or changed
its process; :class:`TargetGone`: such a fault that ended or hung the host
(the launch cannot be judged); :class:`HostFault`: the harness failed in
the host (a CPython, Triton-interpreter, fork-server or host-code fault),
never a finding.
"""

from __future__ import annotations

import signal

from .escape import one_line, printable


class TargetFault(Exception):
    """The target did something a conforming target does not: a finding of the
    target. ``kind``: ``crash`` (it ended its process), ``hang`` (a watchdog
    ran out), ``exception`` (it raised), ``tampering`` (it changed its
    process); ``phase``: ``import`` or the kernel launched; ``output``: the
    tail of what it printed. Its texts come from the target: their control
    characters (a terminal's ``ESC``, a NUL) are kept as visible escapes
    (:func:`.escape.printable`), for the terminal, the JSON and the JUnit
    file; the reason is one line (its newlines escaped too: a line of its
    own cannot pass for the tool's)."""

    def __init__(self, kind: str, phase: str, reason: str, output: str = "", detail: str = "") -> None:
        reason, output, detail = one_line(reason), printable(output), printable(detail)
        super().__init__(reason)
        self.kind, self.phase, self.reason, self.output, self.detail = kind, phase, reason, output, detail
        self.kernel = phase

    def report(self) -> str:
        """The reason, the target's traceback and the tail of its output, for a report."""
        parts = [self.reason]
        if self.detail:
            parts.append(self.detail.rstrip())
        if self.output.strip():
            parts.append("what the target printed (last lines):\n" + self.output.rstrip())
        return "\n".join(parts)


class HostFault(BaseException):
    """A fault of the harness in the target's process, not the target's: the
    host did not start, its own code failed, its interpreter failed its
    health check (:func:`.target_host.interpreter_fault`), or the fork server
    ended or failed. A set-up error (exit 2), never a finding: a
    ``BaseException``, so that no ``except Exception`` that reads an
    implementation's raise as its finding (a harness, Hypothesis) takes it."""


class TargetGone(BaseException):
    """The target's process ended or hung (:attr:`fault` says how): the
    launch cannot be judged, and a state machine must not retry it."""

    def __init__(self, fault: TargetFault) -> None:
        super().__init__(str(fault))
        self.fault = fault


def describe_exit(code: int | None) -> str:
    """``exit status 0`` or ``signal SIGKILL`` for a process's return code (a
    ``multiprocessing`` exit code reads the same: negative for a signal)."""
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"
