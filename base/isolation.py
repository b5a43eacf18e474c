"""The target in a process of its own: it is imported and launched there, judged here.

A target (an ``--impl`` under ``fuzz``, ``replay`` or ``prove --kernels``, a
version under ``review``) is code under review: it may end its process, hang,
start threads, change the working directory, the environment or a library
(``numpy.nonzero`` replaced), or raise any ``BaseException``. None of that may
reach the verdict, so the verdict's process (the spec, the comparison, the
guards' checks, the report) never imports it. :class:`TargetHost` starts a
process (:mod:`.target_host`) in a temporary working directory of its own,
with a copy of the environment and its standard output and error captured
to files, that imports the target and launches its kernels on request: on
CPU forked by the fork server (:mod:`.fork_server`: a fresh interpreter with
torch and triton imported, never the judging process, whose state would run
in the target's process), for CUDA a fresh interpreter of its own; both in the sandbox
(:mod:`.sandbox`); or, ``forked``, outside it, a fork of one that only imported (:mod:`.forked_host`).
:class:`~.remote.RemoteModule` stands for the target here: its Triton kernels
are :class:`~.remote.RemoteKernel` objects with the kernels' parameter names, and
``kernel[grid](*args, **kwargs)`` sends the launch there and waits for it.

Only plain buffers cross the boundary (:func:`send_frames`): a JSON header and
raw bytes, never a pickle, so the host cannot run code here. A launch sends
every storage its tensor arguments view (each once, so aliasing views stay
aliased), the host rebuilds them, moves the addresses an int64 argument holds
(the pointer tables) from our storages to its own copies and back, launches,
and sends the storages back; we copy them into ours, so red zones, poison and
inputs are judged here by the guards as for a launch in this process.

The context level calls the target's Python objects
(``ReplaySSMModelContext.create(...)``, ``ctx.postprocess(...)``): there
:class:`~.remote.RemoteObject` stands for an object of the target (a handle into the
host's table), and every tensor that crosses either way is *shared*: its
storage has a copy in each process, and before and after each request the
copies whose bytes changed are sent across (:meth:`TargetHost.request`), so
the harness reads and writes the target's buffers, and its guards judge
them, here. Addresses in the int64 views of shared storages (pointer tables)
are translated between the two copies on the way. Our own code that must run
there (a planted fault, a loader) is named as an :class:`ImportRef`, never
sent as code.

Everything the host reports about the target is a :class:`TargetFault`
(a finding of the target, never a set-up error of ours): it ended its
process (an exit status or a signal), did not finish within a watchdog
(``load_seconds`` at import, ``launch_seconds`` per launch), raised (any
``BaseException``, named as raised), or left its process changed (a
non-daemon thread, another working directory, a changed environment variable,
a replaced function of ``numpy``, ``torch``, ``os``, ...). A fault that ends
or hangs the host is a :class:`TargetGone` (a ``BaseException``, so that
Hypothesis does not shrink it); the next use starts a fresh host. A fault of
the harness in the host (it does not start, its own code fails, its
interpreter fails its health check before the target's import or after the
target raised, the fork server ends) is a :class:`HostFault`: a set-up
error, never the target's finding.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import fork_server, forked_host, sandbox
from .host_channel import recv_frames, send_frames
from .host_faults import HostFault, TargetFault, TargetGone, describe_exit
from .remote import RemoteModule, RemoteObject

LOAD_SECONDS = 120.0
"""How long a target may take to import (torch and triton are imported
before the target, outside this bound); ``$REPLAYSSM_TARGET_LOAD_SECONDS``
overrides it (the tests' looping import)."""


def load_seconds() -> float:
    """The load watchdog: :data:`LOAD_SECONDS` unless the environment says
    otherwise; a ``ValueError`` naming the variable for anything but a
    finite number of seconds > 0 (``nan`` would turn the watchdog off)."""
    text = os.environ.get("REPLAYSSM_TARGET_LOAD_SECONDS")
    if text is None:
        return LOAD_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ValueError(f"$REPLAYSSM_TARGET_LOAD_SECONDS must be a number of seconds > 0, got {text!r}")
    return value

START_SECONDS = 120.0
"""How long the host may take to start and import torch and triton."""

PARTIAL_SECONDS = 60.0
"""How long a host may take to finish a message it has begun, where its
request has no watchdog of its own: a message begun and not finished is a hang."""


@dataclass(frozen=True)
class ImportRef:
    """A function of ours that the target's process imports by name
    (``module:name``) and calls with ``args`` (then the request's) bound: how
    the harness puts code of its own there, e.g. a planted fault."""

    target: str
    args: tuple = ()


@dataclass
class _Shared:
    """One storage shared with the host: ours, the host's copy's address,
    the int64 spans (byte offset, byte count) that hold addresses, and its
    bytes as last synchronized."""

    storage: Any
    child_base: int | None = None
    spans: set = field(default_factory=set)
    synced: bytes | None = None


def _storage_bytes(storage: Any) -> bytes:
    import torch

    return bytes(torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage).cpu().numpy().tobytes())


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class TargetHost:
    """One target's process. :meth:`load` imports it (``name``: a module or a
    ``.py``/``.txt`` file; ``label``: the option that named it, for messages);
    :meth:`launch` runs one of its kernels; :meth:`close` ends it. Its
    standard output and error go to files in its own working directory."""

    name: str
    label: str = "--impl"
    cuda: bool = False
    load_seconds: float | None = None
    """The load watchdog (None: :func:`load_seconds`)."""
    launch_seconds: float | None = None
    forked: bool = False
    """Fork the host from this process (:mod:`.forked_host`: only where it has done nothing but import)."""
    process: subprocess.Popen | fork_server.ServedHost | forked_host.ForkedHost | None = None
    conn: Connection | None = None
    folder: Path | None = None
    description: dict = field(default_factory=dict)
    launches: int = 0
    shared: dict[int, _Shared] = field(default_factory=dict)
    """Storages shared with the host, by id (ours from 0 up, the host's below 0)."""
    generation: int = 0
    """Counts the host's starts: a :class:`RemoteObject` of an earlier one is stale."""
    owner: int = field(default_factory=os.getpid)
    """The process that started the host (a copy of this object in a process forked since leaves it alone)."""

    def start(self) -> None:
        """Start the host and wait until it has imported torch and triton: on
        CPU forked by the fork server (:mod:`.fork_server`: a fresh interpreter
        with torch and triton imported, none of this process's state), for
        CUDA a fresh interpreter of its own (``forked``: a fork of this one). A
        :class:`HostFault` when it does not start."""
        self.generation += 1
        self.shared = {}
        self.owner = os.getpid()
        _LIVE[id(self)] = self
        self.folder = fork_server.host_folder() if not self.cuda else Path(tempfile.mkdtemp(prefix="replayssm-target-"))
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["REPLAYSSM_TARGET_DEVICE"] = "cuda" if self.cuda else "cpu"
        env["PYTHONUNBUFFERED"] = "1"  # what it prints reaches its files even when it ends with os._exit
        env["TMPDIR"] = str(self.folder)  # its temporary files in its folder: removed with it
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p or ".") for p in sys.path)  # a module name: as here
        if not self.cuda:
            env["TRITON_INTERPRET"] = "1"
        in_group = os.getpgid(0) == os.getpid()  # a supervised worker: a watchdog kills its whole group
        try:
            if self.forked or not self.cuda:  # a fork of this process, or of the fork server
                starter = forked_host if self.forked else fork_server
                self.process = starter.fork_host(self.folder, env, theirs.fileno(), os.getpgid(0) if in_group else None)
            else:  # in the sandbox where it runs CUDA (sandbox.unavailable), else said once
                wrapper = sandbox.command(str(self.folder), cuda=True)
                popen = sandbox.SandboxedProcess if wrapper else subprocess.Popen
                with open(self.folder / "stdout.txt", "wb") as out, open(self.folder / "stderr.txt", "wb") as err:
                    self.process = popen(
                        [*wrapper, sys.executable, "-m", "replayssm.base.target_host", str(theirs.fileno())],
                        cwd=self.folder, env=sandbox.host_environment(env, str(self.folder)) if wrapper else env,
                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                        pass_fds=(theirs.fileno(),), process_group=None if in_group else 0)
        except HostFault:
            theirs.close()
            ours.close()
            self.close()
            raise
        theirs.close()
        self.conn = Connection(ours.detach())
        try:
            self._judge(self._reply("start", START_SECONDS)[0], "start")
        except TargetGone as e:  # before the target is imported: our failure, not the target's
            raise HostFault(f"the target's process did not start: {e.fault.report()}") from None

    @property
    def output(self) -> str:
        """The tail of what the host printed (standard output, then error)."""
        if self.folder is None:
            return ""
        return "\n".join(x for x in (_tail(self.folder / "stdout.txt"), _tail(self.folder / "stderr.txt")) if x)

    def _gone(self, phase: str, how: str) -> TargetGone:
        """The target ended its process. When the fork server ended first (the
        host ends with it): in the sandbox only a target can end it, so that
        is the target's too; outside it a :class:`HostFault` is raised."""
        lost = getattr(self.process, "lost", False)
        sandboxed = getattr(self.process, "sandboxed", False)
        output = self.output
        self.close()
        if lost and not sandboxed:
            raise HostFault(f"the fork server ended while the target's process ran ({phase})")
        if lost:
            how = "the fork server it ran under ended (in the sandbox, only a target can end it)"
        where = "at import" if phase == "import" else ("while starting" if phase == "start"
                                                       else f"during launch {self.launches} ({phase})")
        return TargetGone(TargetFault("crash", phase, f"the target ended the process {where}: {how}", output))

    def _send(self, phase: str, header: dict, buffers: Sequence[bytes] = ()) -> None:
        """:func:`send_frames` to the host; a host that ended meanwhile is a
        :class:`TargetGone`, any other failure to write a :class:`HostFault`."""
        assert self.conn is not None and self.process is not None
        try:
            send_frames(self.conn, header, buffers)
        except OSError as e:
            try:
                code = self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.close()
                raise HostFault(f"could not write to the target's process ({phase}): {e}") from None
            raise self._gone(phase, describe_exit(code)) from None

    def _reply(self, phase: str, seconds: float | None) -> tuple[dict, list[bytes]]:
        """The host's next message, within ``seconds`` (None: no bound); a
        :class:`TargetGone` when it ends or does not answer in time."""
        assert self.conn is not None and self.process is not None
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.conn.poll(0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic()))):
            code = self.process.poll()
            if code is not None and not self.conn.poll():
                raise self._gone(phase, describe_exit(code))
            if deadline is not None and time.monotonic() >= deadline:
                what = "finish its import" if phase == "import" else f"return from launch {self.launches} ({phase})"
                output = self.output
                self.close()
                raise TargetGone(TargetFault("hang", phase, f"the target did not {what} within the {seconds:g} s "
                                             "watchdog", output))
        try:
            return recv_frames(self.conn, max(0.0, deadline - time.monotonic()) if deadline is not None
                               else PARTIAL_SECONDS)
        except TimeoutError:
            output = self.output
            self.close()
            raise TargetGone(TargetFault("hang", phase, f"the target's process began a message and did not finish it "
                                         f"({phase})", output)) from None
        except (EOFError, OSError, ValueError):
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
            raise self._gone(phase, describe_exit(self.process.poll())) from None

    def _judge(self, header: dict, phase: str) -> None:
        """Raise the fault a host's answer reports, if any (a :class:`HostFault`
        for a failure of the host's own code, which is not the target's)."""
        if header.get("internal"):
            self.close()
            raise HostFault(f"the target's process failed outside the target ({phase}):\n{header['internal']}")
        if header.get("raised"):
            reason = header["raised"] if phase == "import" else f"{header['raised']} (launch {self.launches}: {phase})"
            raise TargetFault("crash" if header.get("exited") else "exception", phase, reason, self.output,
                              header.get("traceback", ""))
        if header.get("changed"):
            what = "at import" if phase == "import" else f"in {phase}"
            raise TargetFault("tampering", phase, f"the target changed its process {what}: "
                              + "; ".join(header["changed"]), self.output)

    def load(self) -> dict:
        """Import the target; its description: ``kernels`` (name -> parameter
        names) and ``names`` (its other top-level names). A :class:`TargetFault`
        when it misbehaves at import; a ``ValueError`` (the host's
        :class:`~.targets.TargetError` message) when it is no input at all."""
        if self.process is None:
            self.start()
        assert self.conn is not None
        self._send("import", {"op": "load", "name": self.name, "label": self.label})
        header, _ = self._reply("import", self.load_seconds if self.load_seconds is not None else load_seconds())
        self._judge({"internal": header["internal"]} if header.get("internal") else {}, "import")
        if header.get("unusable"):
            self.close()
            raise ValueError(header["unusable"])
        self._judge(header, "import")
        self.description = {"kernels": header["kernels"], "names": header["names"]}
        return self.description

    def launch(self, kernel: str, grid: tuple, args: tuple, kwargs: dict, also: Sequence[Any] = (),
               watch: ImportRef | None = None) -> Any:
        """Launch ``kernel[grid](*args, **kwargs)`` there; every tensor argument's
        storage (and those of the tensors ``also`` lists, which the pointer
        tables may point into) comes back with what the launch left in it.
        ``watch``: a context manager of ours entered there around the launch,
        called with the addresses of its arguments moved to the host's copies
        (:func:`watched_launch`); what it yields is returned (JSON)."""
        import torch

        if self.process is None:  # a fresh host after one that ended
            self.load()
        assert self.conn is not None
        storages: list[Any] = []
        index: dict[int, int] = {}

        def plain(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                s = value.untyped_storage()
                if s.data_ptr() not in index:
                    index[s.data_ptr()] = len(storages)
                    storages.append(s)
                return {"tensor": index[s.data_ptr()], "offset": value.storage_offset(), "shape": list(value.shape),
                        "stride": list(value.stride()), "dtype": str(value.dtype).removeprefix("torch.")}
            if value is None or isinstance(value, (bool, int, float, str)):
                return {"value": value}
            raise TypeError(f"a launch argument of type {type(value).__name__} cannot cross to the target's process")

        header = {"op": "launch", "kernel": kernel, "grid": [int(g) for g in grid],
                  "args": [plain(a) for a in args], "kwargs": {k: plain(v) for k, v in kwargs.items()}}
        for t in also:
            plain(t)
        if watch is not None:
            header["watch"] = {"target": watch.target, "args": list(watch.args)}
        header["storages"] = [{"base": s.data_ptr(), "nbytes": s.nbytes()} for s in storages]
        raw = [bytes(torch.empty(0, dtype=torch.uint8, device=s.device).set_(s).cpu().numpy().tobytes())
               for s in storages]
        self._send(kernel, header, raw)
        self.launches += 1
        reply, back = self._reply(kernel, self.launch_seconds)
        if len(back) == len(storages):
            for s, data in zip(storages, back):
                if len(data) == s.nbytes():
                    target = torch.empty(0, dtype=torch.uint8, device=s.device).set_(s)
                    target.copy_(torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()))
        self._judge(reply, kernel)
        return reply.get("watched")

    # -- the target's objects (the context level) ----------------------------------
    def request(self, header: dict, phase: str, generation: int | None = None) -> Any:
        """One request about the target's objects (``get``, ``set``, ``call``,
        ``forget``): the shared storages synchronized both ways around it, its
        value decoded (:class:`RemoteObject` for an object of the target); a
        :class:`TargetFault` as :meth:`launch` raises."""
        if generation is not None and generation != self.generation:
            raise RuntimeError(f"{phase}: an object of the target's process that has ended since")
        if self.process is None:
            self.load()
        assert self.conn is not None
        new: list[int] = []
        header = {**header, **{k: self._encode(header[k], new) for k in ("value", "args", "kwargs") if k in header}}
        if new:  # the host's copies first, so that addresses into them can be translated
            self._send(phase, {"op": "share", "sizes": [[i, self.shared[i].storage.nbytes()] for i in new]})
            reply, _ = self._reply(phase, self.launch_seconds)
            self._judge(reply, phase)
            for i, base in reply["bases"]:
                self.shared[i].child_base = base
        ids, raw = [], []
        for i, sh in self.shared.items():
            now = _storage_bytes(sh.storage)
            if now != sh.synced:
                ids.append(i)
                raw.append(self._translate(now, sh, to_host=True))
                sh.synced = now
        if header["op"] == "call":
            self.launches += 1
        self._send(phase, {**header, "sync": ids}, raw)
        reply, back = self._reply(phase, self.launch_seconds)
        import torch

        device = torch.device("cuda" if self.cuda else "cpu")
        for i, nbytes, base in reply.get("new", ()):  # the host's storages that crossed for the first time
            self.shared[i] = _Shared(torch.empty(nbytes, dtype=torch.uint8, device=device).untyped_storage(), base)
        value = None
        if "value" in reply and not reply.get("raised"):  # decoded first: its int64 views say what to translate
            value = self._decode(reply["value"], None if header["op"] == "call" else phase)
        self._synchronize(reply, back)
        if reply.get("missing"):
            raise AttributeError(reply["missing"])
        self._judge(reply, phase)
        return value

    def _synchronize(self, reply: dict, back: list[bytes]) -> None:
        """Copy the changed bytes of the shared storages the host sent into ours."""
        import torch

        for i, data in zip(reply.get("sync", ()), back):
            sh = self.shared[i]
            mine = self._translate(data, sh, to_host=False)
            torch.empty(0, dtype=torch.uint8, device=sh.storage.device).set_(sh.storage).copy_(
                torch.from_numpy(np.frombuffer(mine, dtype=np.uint8).copy()))
            sh.synced = mine

    def _translate(self, data: bytes, sh: _Shared, to_host: bool) -> bytes:
        """``data`` (a shared storage's bytes) with the addresses its int64 spans
        hold into shared storages moved to the other process's copies."""
        if not sh.spans:
            return data
        ranges = [(s.storage.data_ptr(), s.child_base, s.storage.nbytes()) for s in self.shared.values()
                  if s.child_base is not None]
        out = bytearray(data)
        for offset, nbytes in sh.spans:
            values = np.frombuffer(data, dtype=np.int64, count=nbytes // 8, offset=offset)
            moved = values.copy()
            for ours, theirs, size in ranges:
                lo, new = (ours, theirs) if to_host else (theirs, ours)
                inside = (values >= lo) & (values < lo + size)
                moved = np.where(inside, values - lo + new, moved)
            out[offset:offset + nbytes] = moved.tobytes()
        return bytes(out)

    def _share(self, tensor: Any, new: list[int]) -> int:
        """The id of ``tensor``'s storage among the shared ones (shared now if it was not)."""
        import torch

        storage = tensor.untyped_storage()
        found = next((i for i, sh in self.shared.items() if sh.storage.data_ptr() == storage.data_ptr()
                      and sh.storage.nbytes() == storage.nbytes()), None)
        if found is None:
            found = max([-1, *self.shared]) + 1
            self.shared[found] = _Shared(storage)
            new.append(found)
        if tensor.dtype == torch.int64 and tensor.numel():
            last = tensor.storage_offset() + sum((n - 1) * st for n, st in zip(tensor.shape, tensor.stride()))
            span = (tensor.storage_offset() * 8, (last - tensor.storage_offset() + 1) * 8)
            if span not in self.shared[found].spans:  # sent again, its addresses translated now
                self.shared[found].spans.add(span)
                self.shared[found].synced = None
        return found

    def _encode(self, value: Any, new: list[int]) -> Any:
        """``value`` as plain data for the host (see :func:`.target_host.decode`)."""
        import torch

        if isinstance(value, torch.Tensor):
            return {"t": self._share(value, new), "offset": value.storage_offset(), "shape": list(value.shape),
                    "stride": list(value.stride()), "dtype": str(value.dtype).removeprefix("torch.")}
        if isinstance(value, RemoteObject):
            return {"h": value._remote[1]}
        if isinstance(value, ImportRef):
            return {"import": value.target, "args": [self._encode(a, new) for a in value.args]}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"v": value}
        if isinstance(value, (list, tuple)):
            return {"tuple" if isinstance(value, tuple) else "list": [self._encode(v, new) for v in value]}
        if isinstance(value, dict):
            return {"dict": {str(k): self._encode(v, new) for k, v in value.items()}}
        attrs = {k: getattr(value, k) for k in dir(value) if not k.startswith("__")}
        return {"obj": {k: self._encode(v, new) for k, v in attrs.items() if not callable(v) or isinstance(
            v, (torch.Tensor, RemoteObject))}}

    def _decode(self, value: Any, label: str | None) -> Any:
        """What the host's :func:`.target_host.encode` sent, as our objects."""
        import torch

        if value is None or "v" in value:
            return None if value is None else value["v"]
        if "t" in value:
            sh = self.shared[value["t"]]
            dtype = getattr(torch, value["dtype"])
            t = torch.empty(0, dtype=dtype, device=sh.storage.device).set_(sh.storage, value["offset"],
                                                                          value["shape"], value["stride"])
            if dtype == torch.int64:
                self._share(t, [])
            return t
        if "h" in value:
            return RemoteObject(self, value["h"], label or value.get("type", "object"))
        if "list" in value or "tuple" in value:
            items = [self._decode(v, label) for v in value.get("list", value.get("tuple"))]
            return items if "list" in value else tuple(items)
        if "dict" in value:
            return {k: self._decode(v, label) for k, v in value["dict"].items()}
        raise ValueError(f"not a value from the target's process: {value!r:.200}")

    def forget(self) -> None:
        """Drop every object and storage shared with the host (a new system starts)."""
        if self.process is not None:
            self.request({"op": "forget"}, "forget")
        self.shared = {}

    def shutdown(self, seconds: float = 120.0) -> int | None:
        """End the host in order within ``seconds`` (its interpreter's end, a sanitizer's report): it waits
        for the device, answers ``exit``, exits 0; :meth:`close`. Its status (``-SIGKILL``: late); None: none ran."""
        if (process := self.process) is None or self.conn is None:
            return None
        try:
            self._send("exit", {"op": "exit"})
            self._reply("exit", seconds)
            status: int | None = process.wait(seconds)
        except (TargetGone, HostFault, subprocess.TimeoutExpired):
            status = process.poll()
        self.close()
        return status

    def close(self) -> None:
        """End the host (its whole process group when it has one) and remove its
        folder. The host is forgotten first, so that a signal that cuts this
        short leaves a host that the next use starts afresh, never half closed."""
        conn, process, folder = self.conn, self.process, self.folder
        self.conn, self.process, self.folder = None, None, None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        if self.owner != os.getpid():  # a copy in a process forked since (a worker): the host is not its to end
            return
        if process is not None:
            if process.poll() is None:
                try:
                    if isinstance(process, fork_server.ServedHost):
                        process.kill()
                    elif os.getpgid(process.pid) == process.pid:
                        os.killpg(process.pid, signal.SIGKILL)
                    else:
                        process.kill()
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def __del__(self) -> None:
        self.close()


_LIVE: "weakref.WeakValueDictionary[int, TargetHost]" = weakref.WeakValueDictionary()
"""The hosts started in this process (a CUDA host is a process of its own, not the fork server's)."""


def end_targets() -> None:
    """End every process a target started in this process tree, and wait for
    them, before the judge writes its reports: each host started here (its
    process group), then every process of the fork server's hosts
    (:func:`.fork_server.end_hosts`): in the sandbox every process of its PID
    namespace, a ``setsid`` grandchild included; outside the sandbox (said
    once when the server started) its hosts' process groups, and a process
    that left its group is beyond reach. The server stays, warm."""
    for host in list(_LIVE.values()):
        if host.owner == os.getpid():
            host.close()
    fork_server.end_hosts()


def load_isolated(name: str, label: str = "--impl", *, cuda: bool = False, launch_seconds: float | None = None,
                  load_seconds: float | None = None, forked: bool = False) -> RemoteModule:
    """The target ``name`` imported in a :class:`TargetHost` of its own (``forked``: see there), as a
    :class:`RemoteModule`; a :class:`TargetFault` (a finding) or a
    ``ValueError`` (no usable input) as :meth:`TargetHost.load` raises."""
    host = TargetHost(absolute_target(name), label, cuda, load_seconds, launch_seconds, forked)
    try:
        host.load()
    except TargetGone as e:
        raise e.fault from None
    except BaseException:
        host.close()
        raise
    return RemoteModule(host)


def absolute_target(name: str) -> str:
    """A file target's absolute path (the host runs in another folder), its
    links followed where they can be (a loop of them: the path as given,
    made absolute, which the host then says does not exist); a module name as it is."""
    if not name.endswith((".py", ".txt")):
        return name
    try:
        return str(Path(name).resolve())
    except (RuntimeError, OSError):  # Python 3.11 says "Symlink loop" with a RuntimeError
        return os.path.abspath(name)
