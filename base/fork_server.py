"""Clean target hosts, forked on request from a fresh interpreter: the fork server.

A target host forked from the judging process would inherit the judge's
Python state: its heap (with the finalizers of its garbage), pytest's and
Hypothesis's hooks, trace functions, signal handlers. That is the judge's
code running inside the target's process, beside the target: on CPython
3.11 a finalizer that parses Python while Triton's interpreter converts a
kernel's source to AST objects makes that conversion raise ``SystemError:
AST constructor recursion depth mismatch`` (gh-106905: the depth counter is
one per interpreter, not per call), and the host reported it as the
target's ``exception``, on correct kernels too. A fresh interpreter per
host is clean but pays torch's and triton's import each time.

The fork server is that fresh interpreter, started once per judging process
tree (:func:`prepare`, or lazily by the first host): it imports numpy, torch,
triton and :mod:`.target_host`, and nothing of the judge's, then forks a
host per request (:func:`fork_host`), each in its own folder, environment,
``sys.path`` and process group, with only its socket to the judge left
open. It reaps its hosts and sends each one's exit status to the process
that asked for it, over that request's connection (:class:`ServedHost`); a
host whose requester's connection closes is killed. Processes forked from
the one that started it (the fuzz workers) use the same server. It ends,
killing its hosts, when the process that started it closes its end (at
exit, or when that process dies).

``python -m replayssm.base.fork_server LISTEN_FD OWNER_FD [--sandboxed]``:
the listening socket and the owner's socket, both made by :func:`prepare`;
``--sandboxed`` when it runs in the sandbox (:mod:`.sandbox`).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import sandbox
from .host_faults import HostFault
from .sandbox import protect_judge

START_SECONDS = 120.0
"""How long the server may take to import torch and triton and answer its first request."""

FOLDER_PREFIX = "replayssm-hosts-"
"""The name of the server's temporary folder begins so (its hosts' folders are in it)."""

MAX_REQUEST = 1 << 22
"""The largest request (a host's folder, environment and ``sys.path``, as JSON)."""


# -- the judge's side --------------------------------------------------------------


@dataclass
class _Server:
    """A server this process tree started: its owner (the pid that started
    it), the path of its socket, the owner's end of the owner socket, its process."""

    owner: int
    path: str
    folder: str
    owner_end: socket.socket
    process: subprocess.Popen
    sandboxed: bool
    info: int
    """The read end of bwrap's ``--info-fd`` (its JSON names the sandbox's init, ``child-pid``)."""
    ready: bool = False
    """Whether its ``R`` (imports done, serving) was read from the owner's socket."""

    def is_ready(self) -> bool:
        """Whether it serves (its ``R`` read now if it came): one that does not has no host yet."""
        if not self.ready and select.select([self.owner_end], [], [], 0)[0]:
            self.ready = self.owner_end.recv(1) == b"R"
        return self.ready

    def sandbox_init(self) -> int | None:
        """The pid (here) of the sandbox's init, the server itself (``--as-pid-1``):
        when it ends, the kernel ends every process of the sandbox."""
        if not self.sandboxed:
            return None
        try:
            data = os.read(self.info, 65536)
            return int(json.loads(data)["child-pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def ended(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is not None


_SERVER: _Server | None = None

_LOCK = threading.Lock()
"""Held while :data:`_SERVER` is read or changed (hosts may start from several threads at once)."""


def prepare() -> None:
    """Start the fork server unless this process (or the one it was forked
    from) has one: at once, without waiting for its imports (its listening
    socket exists before it starts, so a request waits in its queue)."""
    with _LOCK:
        _prepare()


def _prepare() -> _Server:
    global _SERVER
    if _SERVER is not None and not _SERVER.ended():
        return _SERVER
    protect_judge()
    folder = os.path.realpath(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    try:
        wrapper = sandbox.command(folder)
    except HostFault:
        os.rmdir(folder)
        raise
    path = os.path.join(folder, "server.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    owner_end, server_end = socket.socketpair()
    info_r, info_w = os.pipe()  # bwrap says there which process is the sandbox's init
    if wrapper:  # in the sandbox the folder is a mount point, which the server cannot remove: a shell outside
        # does once the sandbox has ended (also when the judge was SIGKILLed and never could)
        wrapper = ["/bin/sh", "-c", '"$@"; code=$?; rm -rf -- "$0"; exit $code', folder,
                   *wrapper, "--info-fd", str(info_w)]
    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "1"  # its hosts run on CPU, under Triton's interpreter
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p or ".") for p in sys.path)
    with open(os.path.join(folder, "server.txt"), "wb") as log:
        process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "replayssm.base.fork_server", str(listener.fileno()),
             str(server_end.fileno()), *(["--sandboxed"] if wrapper else [])],
            cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            pass_fds=(listener.fileno(), server_end.fileno(), info_w), process_group=0)
    listener.close()
    server_end.close()
    os.close(info_w)
    _SERVER = _Server(os.getpid(), path, folder, owner_end, process, bool(wrapper), info_r)
    return _SERVER


def stop() -> None:
    """End this process's fork server (its hosts with it) and wait for it;
    nothing when another process started it (that one ends it)."""
    with _LOCK:
        _stop(_SERVER)


def _stop(server: _Server | None) -> None:
    """:func:`stop` of ``server``, if it is still this process's."""
    global _SERVER
    if server is None or server is not _SERVER:
        return
    _SERVER = None
    if server.owner != os.getpid():
        server.owner_end.close()  # this process's copies only
        os.close(server.info)
        return
    if not server.is_ready():
        server.process.kill()  # still importing torch: it has no host yet, and would end only after its imports
    server.owner_end.close()
    init = server.sandbox_init()
    os.close(server.info)
    if init is not None:  # every process left in the sandbox (a target's setsid grandchild) ends with it
        try:
            os.kill(init, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    shutil.rmtree(server.folder, ignore_errors=True)  # with any host folder left in it


atexit.register(stop)

END_SECONDS = 60.0
"""How long the server may take to end every process of its hosts when asked (:func:`end_hosts`)."""


def end_hosts() -> None:
    """End every process the server's hosts started, and wait until they are
    gone, keeping the server (the next host starts warm): in the sandbox
    every process of its PID namespace but the server; outside it its hosts'
    process groups. Nothing when this process did not start the server; a
    server that does not answer within :data:`END_SECONDS` is stopped."""
    with _LOCK:
        server = _SERVER
        if server is None or server.owner != os.getpid() or server.ended() or not server.is_ready():
            return  # a server still importing has no host yet
        try:
            server.owner_end.sendall(b"K")
            answered = select.select([server.owner_end], [], [], END_SECONDS)[0] and server.owner_end.recv(1) == b"K"
        except OSError:
            answered = False
        if not answered:
            _stop(server)


def _server_output(server: _Server) -> str:
    try:
        return Path(server.folder, "server.txt").read_text(errors="replace")[-3000:]
    except OSError:
        return ""


def host_folder() -> Path:
    """A new folder for a host, inside the server's (in the sandbox, the one place a host may write)."""
    with _LOCK:
        server = _prepare()
    return Path(tempfile.mkdtemp(prefix="replayssm-target-", dir=server.folder))


def fork_host(folder: Path, env: dict, fd: int, group: int | None) -> "ServedHost":
    """A target host forked by the server: in ``folder``, with ``env`` and this
    process's ``sys.path``, standard output and error to files there, the
    socket ``fd`` (sent to the server) its only other descriptor, in process
    group ``group`` (None: one of its own), running :func:`.target_host.main`.
    A :class:`HostFault` when the server cannot be reached or fails (one
    server that ended is replaced once)."""
    request = json.dumps({"folder": str(folder), "env": env, "path": [os.path.abspath(p or ".") for p in sys.path],
                          "group": group}).encode() + b"\n"
    for attempt in (1, 2):
        with _LOCK:
            server = _prepare()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(START_SECONDS)
        try:
            conn.connect(server.path)
            sent = socket.send_fds(conn, [request], [fd])
            conn.sendall(request[sent:])
            reply = _read_line(conn)
        except OSError as e:
            reply = {"error": f"{type(e).__name__}: {e}"}
        if "pid" in reply:
            conn.settimeout(None)
            conn.setblocking(False)
            return ServedHost(reply["pid"], conn, server.sandboxed)
        conn.close()
        if attempt == 2 or (server.owner == os.getpid() and server.process.poll() is None):
            raise HostFault(f"the fork server could not start a target host: {reply.get('error', reply)}\n"
                            + _server_output(server))
        with _LOCK:  # it ended (killed?), or the one of the process this was forked from did: a fresh one, once
            _stop(server)
    raise AssertionError("unreachable")


def _read_line(conn: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return {"error": "the fork server closed the connection"}
        data += chunk
    return json.loads(data)


class ServedHost:
    """A host the server forked, as :class:`.isolation.TargetHost` keeps one
    (what ``subprocess.Popen`` offers it): ``poll``, ``wait``, ``kill``. Its
    exit status comes from the server; ``lost`` when the server ended first.
    ``pid`` is the server's (in the sandbox, of its PID namespace)."""

    def __init__(self, pid: int, conn: socket.socket, sandboxed: bool) -> None:
        self.pid = pid
        self.conn = conn
        self.sandboxed = sandboxed
        """Whether it runs in the sandbox (:mod:`.sandbox`)."""
        self.returncode: int | None = None
        self.lost = False
        self._data = b""

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                chunk = self.conn.recv(4096)
            except BlockingIOError:
                return None
            except OSError:
                chunk = b""
            if chunk:
                self._data += chunk
                if self._data.endswith(b"\n"):
                    self.returncode = int(json.loads(self._data)["exited"])
            else:  # the server ended before the host did: a harness fault, the host killed with it
                self.lost, self.returncode = True, -signal.SIGKILL
            if self.returncode is not None:
                self.conn.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"target host {self.pid}", timeout or 0)
            select.select([self.conn], [], [], 0.1 if left is None else min(0.1, left))
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """Have the server kill the host (and its process group when it leads
        one): its pid is the server's, in the sandbox's PID namespace."""
        try:
            self.conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def __del__(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


# -- the server's side -------------------------------------------------------------


def _kill(pid: int) -> None:
    """SIGKILL a host: its process group when it leads one, else itself."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def serve_host(request: dict, fd: int) -> None:
    """The forked child: a clean host (never returns)."""
    try:
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL)
        try:
            os.setpgid(0, request["group"] or 0)
        except OSError:  # the judge's group is gone: one of its own
            os.setpgid(0, 0)
        os.chdir(request["folder"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = request["path"]
        import importlib

        importlib.invalidate_caches()
        for target, name, flags in ((0, os.devnull, os.O_RDONLY), (1, "stdout.txt", os.O_WRONLY | os.O_CREAT),
                                    (2, "stderr.txt", os.O_WRONLY | os.O_CREAT)):
            opened = os.open(name, flags, 0o600)
            os.dup2(opened, target)
            os.close(opened)
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        import io

        sys.stdin = open(0, closefd=False)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        from .target_host import main

        main(fd)
    finally:
        os._exit(70)


def _accept(listener: socket.socket) -> tuple[socket.socket, dict, int] | None:
    """One request: its connection, its JSON and the host socket sent with it."""
    conn, _ = listener.accept()
    conn.settimeout(10.0)
    fds: list[int] = []
    try:
        data, fds, _, _ = socket.recv_fds(conn, 65536, 1)
        while data and not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        request = json.loads(data)
        if len(fds) != 1 or not isinstance(request, dict):
            raise ValueError("a request names a folder, an environment and a path, and sends one socket")
        return conn, request, fds[0]
    except (OSError, ValueError) as e:
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode() + b"\n")
        except OSError:
            pass
        conn.close()
        return None


def _warm_up() -> None:
    """Run what every host's first launch would pay for once here, so that
    its forks start warm: Triton's interpreter on a small kernel (its
    patching of ``triton.language``, its AST rewrite, numpy and torch ops on
    small tensors, below the sizes at which torch starts its thread pool)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _warm(x, y, n: tl.constexpr, size: tl.constexpr):
        lane = tl.arange(0, size)
        inside = lane < n
        value = tl.load(x + lane, mask=inside, other=0)
        total = tl.sum(tl.where(inside, value * 2 + 1, 0), axis=0)
        for i in range(2):
            tl.store(y + lane, value + total + i, mask=inside)

    x = torch.arange(8, dtype=torch.int32)
    y = torch.empty_like(x)
    _warm[(1,)](x, y, 6, 8)
    torch.cumsum(torch.where(y > 3, y, 0).to(torch.int64), 0).index_select(0, x[:4].long()).sum().item()


def _descendants() -> list[int]:
    """The live processes below this one (zombies left out), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError, IndexError):
                continue
            if state != "Z":
                children.setdefault(int(ppid), []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _end_all(hosts: dict[int, socket.socket], sandboxed: bool) -> None:
    """Kill every host (its process group) and every other process below this
    one: in the sandbox, as its init, every process of the namespace; outside
    it every descendant (a subreaper, so a ``setsid`` orphan is one too),
    until none is left; reap them, each host's status sent to the process
    that asked for it."""
    for pid in hosts:
        _kill(pid)
    if sandboxed and os.getpid() == 1:
        try:
            os.kill(-1, signal.SIGKILL)  # all but this process
        except ProcessLookupError:
            pass
    else:
        for _ in range(100):  # a process may fork while the others are killed: again until none is left
            found = _descendants()
            if not found:
                break
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    while True:  # until every child (an orphan re-parented here included) is reaped
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        _reaped(hosts, pid, status)


def _reaped(hosts: dict[int, socket.socket], pid: int, status: int) -> None:
    """A child reaped: when it is a host, its exit status sent to the process that asked for it."""
    conn = hosts.pop(pid, None)
    if conn is not None:
        try:
            conn.sendall(json.dumps({"exited": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        except OSError:
            pass
        conn.close()


def serve(listen_fd: int, owner_fd: int, sandboxed: bool = False) -> None:
    """Fork hosts on request until the owner's socket closes; then kill the
    hosts left (``sandboxed``: every process of the sandbox). Non-dumpable,
    as its hosts are (they inherit it): a host, without ``CAP_SYS_PTRACE``
    in the sandbox, cannot attach to it (``gdb -p``) or to another host."""
    protect_judge()
    if not sandboxed:  # orphans of its hosts (a setsid grandchild) become its children, ended with them
        try:
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass
    import numpy  # noqa: F401 - imported once here, by every host
    import torch  # noqa: F401
    import triton  # noqa: F401

    from . import target_host  # noqa: F401
    from replayssm.impl import pointers  # noqa: F401 - what a host decodes the context level's tensors with

    _warm_up()

    listener = socket.socket(fileno=listen_fd)
    owner = socket.socket(fileno=owner_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judge decides when this ends
    hosts: dict[int, socket.socket] = {}  # pid -> the connection of the process that asked for it
    killed: set[int] = set()
    owner.sendall(b"R")  # ready: what stop() waits for before it lets this end by itself
    try:
        while True:
            watched: list[Any] = [listener, owner, wake_r, *hosts.values()]
            readable, _, _ = select.select(watched, [], [], 1.0)
            if owner in readable:
                asked = owner.recv(1)
                if not asked:  # the owner closed it, or ended
                    return
                if asked == b"K":  # the judge writes its reports: every process of the hosts goes first
                    _end_all(hosts, sandboxed)
                    hosts.clear()
                    killed.clear()
                    owner.sendall(b"K")
                    continue
            if wake_r in readable:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
            while True:  # its hosts, and in the sandbox every orphan there (it is the namespace's init)
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if not pid:
                    break
                killed.discard(pid)
                _reaped(hosts, pid, status)
            for pid, conn in list(hosts.items()):
                if conn in readable and pid not in killed:  # the judge closed it (or asks it killed): it goes
                    killed.add(pid)
                    _kill(pid)
            if listener in readable:
                accepted = _accept(listener)
                if accepted is not None:
                    conn, request, fd = accepted
                    pid = os.fork()
                    if pid == 0:
                        serve_host(request, fd)
                    os.close(fd)
                    hosts[pid] = conn
                    try:
                        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                    except OSError:
                        _kill(pid)
    finally:  # every process a target started (a setsid grandchild) goes too
        _end_all(hosts, sandboxed)
        folder = os.getcwd()  # its own folder, with any host folder left in it: nothing stays behind, also when
        if os.path.basename(folder).startswith(FOLDER_PREFIX):  # the judge was SIGKILLed and could not remove it
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] == ["--sandboxed"])
