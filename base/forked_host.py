"""A target host forked from the process that will judge it, before that process does anything.

A CUDA host is otherwise a fresh interpreter that imports torch and triton
(3.8-4.3 s each, 8 at once, on the H100 machine: ``docs/gpu.md``, 2026-12-06),
and the wide runner's processes pay that at their start. A process that was
itself just forked from one that imported the harness (the wide runner's fork
server, :mod:`replayssm.fuzz.wide_start`) has torch and triton already: its
fork is a host at once. :func:`fork_host` forks it there and the child
becomes the host exactly as the fork server's children do
(:func:`.fork_server.serve_host`: its own folder, environment, ``sys.path``,
process group, standard output and error to files, the socket its only other
descriptor), so nothing the judging process holds is open in it. The caller
must have made no CUDA context (a CUDA context does not survive a fork;
refused, a :class:`.host_faults.HostFault`) and hold no judging state yet;
no sandbox (as for the fresh CUDA interpreter).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from . import fork_server
from .host_faults import HostFault


def fork_host(folder: os.PathLike | str, env: dict, fd: int, group: int | None) -> "ForkedHost":
    """A host forked from this process: in ``folder``, with ``env`` and this process's ``sys.path``,
    the socket ``fd``, in process group ``group`` (None: one of its own), running
    :func:`.target_host.main`. A :class:`HostFault` when this process has a CUDA context."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise HostFault("a target host cannot be forked from a process that has made a CUDA context")
    request = {"folder": str(folder), "env": env, "path": [os.path.abspath(p or ".") for p in sys.path],
               "group": group}
    pid = os.fork()
    if pid == 0:  # the child: a host (never returns)
        fork_server.serve_host(request, fd)
    return ForkedHost(pid)


class ForkedHost:
    """The forked host as :class:`.isolation.TargetHost` keeps one (what ``subprocess.Popen``
    offers it): ``pid``, ``poll``, ``wait``, ``kill``; it is this process's child."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone, its status unknown
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"target host {self.pid}", timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
