"""The target's own process (started by :class:`.isolation.TargetHost`): it
imports the target and launches its kernels when asked, and says what the
target changed in the process after each step.

``python -m replayssm.base.target_host FD``: ``FD`` is this end of the
socket to the judging process; every message is a JSON header and raw
buffers (:func:`.isolation.send_frames`). The process ends when that socket
closes, or with its parent (``PR_SET_PDEATHSIG``), or on ``exit``: an orderly
end (:meth:`.isolation.TargetHost.shutdown`) that waits for the device's
work, answers, and exits with status 0, a fresh interpreter through its
normal exit (``atexit``, the CUDA context torn down: what a tool that
watches the process, such as ``compute-sanitizer``, reports on).

Requests: ``load`` (import the target), ``launch`` (one kernel on the
storages sent), and for the target's objects ``share`` (copies of the
judging process's storages), ``get``, ``set``, ``call`` and ``forget``
(:class:`Objects`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import operator
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

WATCHED = ("numpy", "torch", "builtins", "os", "os.path", "sys", "math", "json", "threading", "time")
"""Modules whose functions the target must leave as they are."""


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Functions:
    """The functions of one namespace (a module's, an object's attributes) as
    they were, held so that none of them is freed: one is replaced where the
    name holds another object now (compared by identity, which a replacement
    cannot fake). Checked after every launch, so the usual case, nothing
    replaced, is one pass in C over the names."""

    def __init__(self, namespace: dict) -> None:
        self.names = tuple(k for k, v in namespace.items() if callable(v) and not k.startswith("__"))
        self.functions = tuple(namespace[k] for k in self.names)
        self.ids = tuple(map(id, self.functions))
        self._get = operator.itemgetter(*self.names) if len(self.names) > 1 else None

    def replaced(self, namespace: dict) -> list[str]:
        """The names whose function is not the one held (a name deleted is not counted)."""
        if self._get is not None:
            try:
                if tuple(map(id, self._get(namespace))) == self.ids:
                    return []
            except KeyError:
                pass
        return sorted(k for k, f in zip(self.names, self.functions) if namespace.get(k, f) is not f)


class Baseline:
    """What the process is before the target: working directory, environment,
    the watched modules' functions, the threads."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.env = dict(os.environ)
        self.functions = {m: Functions(vars(sys.modules[m])) for m in WATCHED if m in sys.modules}
        self.functions.update({m: Functions(vars(o)) for m, o in _watched_objects().items()})
        self.threads = {t.ident for t in threading.enumerate()}

    def changes(self) -> list[str]:
        """How the process differs from the baseline, in words."""
        out = []
        if os.getcwd() != self.cwd:
            out.append(f"it changed the working directory to {os.getcwd()}")
            os.chdir(self.cwd)
        env = dict(os.environ)
        changed = sorted(k for k in set(env) | set(self.env) if env.get(k) != self.env.get(k))
        if changed:
            out.append(f"it changed the environment ({', '.join(changed[:5])})")
        objects = _watched_objects()
        for m, before in self.functions.items():
            replaced = before.replaced(vars(objects[m] if m in objects else sys.modules[m]))
            if replaced:
                out.append(f"it replaced {', '.join(f'{m}.{k}' for k in replaced[:5])}")
        threads = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive() and not t.daemon]
        if threads:
            out.append(f"it left non-daemon thread(s) running: {', '.join(t.name for t in threads[:5])}")
        return out


def _watched_objects() -> dict[str, Any]:
    """Objects whose methods the target must leave as they are: Triton's
    interpreter builder (playback watches its loads and stores through it)."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    builder = getattr(interpreter, "interpreter_builder", None)
    return {"triton.runtime.interpreter.interpreter_builder": builder} if builder is not None else {}


CANARY = "\n".join(f"x{i} = {i}" for i in range(400))
"""Source of some thousand AST nodes for :func:`interpreter_fault`: its
conversion to AST objects allocates enough to run the cyclic collector inside
it, and all at the same few levels of nesting, so that a parse run there
cannot leave the depth counter where it found it by chance (with nesting
that varies, one conversion in three did)."""


def interpreter_fault(rounds: int = 1) -> str | None:
    """What is wrong with this interpreter's parser and compiler, if anything
    (a health check of the host, not of the target): the canary parsed to AST
    objects and compiled from them, ``rounds`` times (one takes about 10 ms). CPython 3.11's AST
    conversion raises ``SystemError: AST constructor recursion depth
    mismatch`` when Python code that parses runs inside it (gh-106905), e.g.
    a finalizer run by the collector; a host where that happens would
    report Triton's interpreter's failure to read a kernel as the target's."""
    import ast

    try:
        for _ in range(rounds):
            compile(ast.parse(CANARY), "<canary>", "exec", dont_inherit=True)
    except BaseException as e:  # noqa: BLE001 - any failure here is the interpreter's, said as such
        return f"{type(e).__name__}: {e}"
    return None


def _checked(reply: dict) -> dict:
    """``reply``, or when the target raised and this interpreter fails its
    health check now, a report of that instead: the harness's fault, which
    the raise may well be too."""
    if reply.get("raised"):
        fault = interpreter_fault(3)
        if fault:
            return {"internal": f"the interpreter of the target's process fails its health check after "
                                f"{reply['raised']}: {fault}\n{reply.get('traceback', '')}"}
    return reply


def _import(target: str) -> Any:
    """Our function ``module:name`` (an :class:`.isolation.ImportRef`)."""
    module, _, name = target.partition(":")
    return functools.reduce(getattr, name.split("."), importlib.import_module(module))


def _raised(e: BaseException) -> dict:
    """A header naming what the target raised, ``BaseException`` s included."""
    if isinstance(e, SystemExit):
        what = f"the target called sys.exit({e.code!r})"
    else:
        what = f"the target raised {type(e).__name__}: {e}".rstrip(": ")
    return {"raised": what[:2000], "exited": isinstance(e, SystemExit), "traceback": traceback.format_exc()[-6000:]}


def is_jit(value: Any) -> bool:
    """A ``@triton.jit`` function: a ``JITFunction``, or under ``TRITON_INTERPRET=1`` an ``InterpretedFunction``."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(value, (triton.runtime.jit.JITFunction, InterpretedFunction))


def _launchable(value: Any) -> bool:
    """A kernel as the harnesses launch one (``kernel[grid](...)``): a Triton
    JIT function, or any other object that takes a grid that way."""
    from types import ModuleType

    if is_jit(value):
        return True
    return (callable(getattr(type(value), "__getitem__", None))
            and not isinstance(value, (type, ModuleType, dict, list, tuple, str, bytes)))


def _load(header: dict, baseline: Baseline) -> tuple[dict, Any]:
    from replayssm.base.targets import TargetError, load_target

    try:
        module = load_target(header["name"], label=header["label"], raw=True)
    except TargetError as e:
        return {"unusable": str(e)}, None
    except BaseException as e:  # noqa: BLE001 - whatever the target raises at import is reported
        reply = _raised(e)
        return {**reply, "raised": reply["raised"] + " at import"}, None
    kernels = {k: list(v.arg_names) if is_jit(v) else None for k, v in vars(module).items()
               if not k.startswith("__") and _launchable(v)}
    names = sorted(k for k in vars(module) if not k.startswith("__") and k not in kernels)
    return {"kernels": kernels, "names": names, "changed": baseline.changes()}, module


def _launch(header: dict, buffers: list[bytes], module: Any, device: Any, baseline: Baseline) -> tuple[dict, list]:
    import numpy as np
    import torch

    storages = [torch.from_numpy(np.frombuffer(b, dtype=np.uint8).copy()).to(device) for b in buffers]
    moves = [(s["base"], s["nbytes"], t.data_ptr()) for s, t in zip(header["storages"], storages)]
    relocated = []

    def value(spec: dict) -> Any:
        if "value" in spec:
            return spec["value"]
        dtype = getattr(torch, spec["dtype"])
        base = storages[spec["tensor"]]
        t = torch.empty(0, dtype=dtype, device=device).set_(base.untyped_storage(), spec["offset"], spec["shape"],
                                                            spec["stride"])
        if dtype == torch.int64 and t.numel():
            before = t.clone()
            after = before.clone()
            for old, size, new in moves:
                inside = (before >= old) & (before < old + size)
                after = torch.where(inside, before - old + new, after)
            t.copy_(after)
            relocated.append((t, before, after))
        return t

    args = [value(a) for a in header["args"]]
    kwargs = {k: value(v) for k, v in header["kwargs"].items()}
    reply: dict = {}

    def relocate(address: int) -> int:
        """A judging process's address inside a storage sent, as this process's copy's."""
        return next((address - old + new for old, size, new in moves if old <= address < old + size), address)

    watch = header.get("watch")
    watched: dict = {}
    try:
        with (_import(watch["target"])(*watch["args"], relocate=relocate) if watch else _nothing()) as watched:
            getattr(module, header["kernel"])[tuple(header["grid"])](*args, **kwargs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except BaseException as e:  # noqa: BLE001 - the target's raise is reported, whatever it is
        reply = _raised(e)
    if watch:
        reply["watched"] = watched
    for t, before, after in relocated:  # our addresses back where the launch left them unchanged
        t.copy_(torch.where(t == after, before, t))
    reply["changed"] = baseline.changes()
    return reply, [s.cpu().numpy().tobytes() for s in storages]


@contextlib.contextmanager
def _nothing() -> Iterator[dict]:
    yield {}


class Objects:
    """The target's objects and the storages shared with the judging process
    (:meth:`.isolation.TargetHost.request`): handle 0 is the target module;
    a shared storage has the id the judging process gave it (ours: below 0)."""

    def __init__(self, module: Any, device: Any) -> None:
        self.device = device
        self.handles: dict[int, Any] = {0: module}
        self.shared: dict[int, Any] = {}
        self.synced: dict[int, bytes] = {}
        self.new: list[list[int]] = []

    def share(self, sizes: list) -> dict:
        import torch

        for i, nbytes in sizes:
            self.shared[i] = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
            self.synced[i] = b""
        return {"bases": [[i, self.shared[i].data_ptr()] for i, _ in sizes]}

    def take(self, ids: list[int], buffers: list[bytes]) -> None:
        """The judging process's changed bytes of shared storages, copied in place."""
        import numpy as np
        import torch

        for i, data in zip(ids, buffers):
            self.shared[i].copy_(torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()))
            self.synced[i] = data

    def changed(self) -> tuple[list[int], list[bytes]]:
        """The shared storages whose bytes changed since they were last synchronized."""
        ids, raw = [], []
        for i, t in self.shared.items():
            now = t.cpu().numpy().tobytes()
            if now != self.synced[i]:
                ids.append(i)
                raw.append(now)
                self.synced[i] = now
        return ids, raw

    def decode(self, value: dict) -> Any:
        """Plain data from :meth:`.isolation.TargetHost._encode` as objects here."""
        import torch
        from types import SimpleNamespace

        from replayssm.impl.pointers import register_tensor

        if "v" in value:
            return value["v"]
        if "t" in value:
            t = torch.empty(0, dtype=getattr(torch, value["dtype"]), device=self.device).set_(
                self.shared[value["t"]].untyped_storage(), value["offset"], value["shape"], value["stride"])
            register_tensor(t)  # the torch materialize backend resolves the address tables a target builds
            return t
        if "h" in value:
            return self.handles[value["h"]]
        if "import" in value:
            fn = _import(value["import"])
            return functools.partial(fn, *[self.decode(a) for a in value["args"]]) if value["args"] else fn
        if "list" in value:
            return [self.decode(v) for v in value["list"]]
        if "tuple" in value:
            return tuple(self.decode(v) for v in value["tuple"])
        if "dict" in value:
            return {k: self.decode(v) for k, v in value["dict"].items()}
        return SimpleNamespace(**{k: self.decode(v) for k, v in value["obj"].items()})

    def encode(self, value: Any, typed: bool = False) -> dict:
        """``value`` as plain data: a tensor by its shared storage (shared now
        if it was not), an object of the target by a new handle."""
        import torch

        if value is None or isinstance(value, (bool, int, float, str)):
            return {"v": value}
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            found = next((i for i, t in self.shared.items() if t.data_ptr() == storage.data_ptr()
                          and t.numel() == storage.nbytes()), None)
            if found is None:
                found = min([0, *self.shared]) - 1
                self.shared[found] = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
                self.synced[found] = b""
                self.new.append([found, storage.nbytes(), storage.data_ptr()])
            return {"t": found, "offset": value.storage_offset(), "shape": list(value.shape),
                    "stride": list(value.stride()), "dtype": str(value.dtype).removeprefix("torch.")}
        if isinstance(value, (list, tuple)):
            return {"tuple" if isinstance(value, tuple) else "list": [self.encode(v) for v in value]}
        n = max(self.handles) + 1
        self.handles[n] = value
        return {"h": n, "type": type(value).__name__}

    def serve(self, header: dict, buffers: list[bytes], baseline: Baseline) -> tuple[dict, list[bytes]]:
        """One request about the target's objects; the reply and the changed shared bytes."""
        import torch

        if header["op"] == "share":
            return self.share(header["sizes"]), []
        if header["op"] == "forget":
            self.handles = {0: self.handles[0]}
            self.shared, self.synced = {}, {}
            return {}, []
        self.take(header["sync"], buffers)
        reply: dict = {}
        obj = self.handles[header["h"]]
        try:
            if header["op"] == "get":
                try:
                    reply["value"] = self.encode(getattr(obj, header["name"]))
                except AttributeError:
                    reply["missing"] = header["name"]
            elif header["op"] == "set":
                setattr(obj, header["name"], self.decode(header["value"]))
            else:
                args, kwargs = self.decode(header["args"]), self.decode(header["kwargs"])
                reply["value"] = self.encode(obj(*args, **kwargs))
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
        except BaseException as e:  # noqa: BLE001 - the target's raise is reported, whatever it is
            reply = _raised(e)
        reply["changed"] = baseline.changes()
        reply["new"], self.new = self.new, []
        ids, raw = self.changed()
        reply["sync"] = ids
        return reply, raw


def _exit_in_order(conn: Connection, device: Any, fresh: bool) -> None:
    """The ``exit`` request: wait for the device's work, answer, and end with status 0 (never returns).
    A fresh interpreter exits normally (``SystemExit``: its ``atexit`` handlers run, its CUDA context is
    torn down); a fork (of the fork server) leaves with ``os._exit``, as at its socket's end."""
    import torch

    from replayssm.base.host_channel import send_frames

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    send_frames(conn, {"exiting": 0})
    conn.close()
    if fresh:
        sys.exit(0)
    os._exit(0)


def main(fd: int, fresh: bool = False) -> None:
    """Serve the judging process on socket ``fd`` until it closes or asks ``exit``
    (``fresh``: this is an interpreter of its own, not a fork)."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judging process decides when this one ends
    conn = Connection(fd)
    import numpy  # noqa: F401 - imported before the baseline, as the target will find them
    import torch
    import triton  # noqa: F401

    from replayssm.base.host_channel import recv_frames, send_frames

    device = torch.device(os.environ.get("REPLAYSSM_TARGET_DEVICE", "cpu"))
    baseline = Baseline()
    fault = interpreter_fault()
    if fault:
        send_frames(conn, {"internal": f"the interpreter of the target's process fails its health check "
                                       f"before the target is imported: {fault}"})
        os._exit(0)
    send_frames(conn, {"started": True})
    module = None
    objects = Objects(None, device)
    while True:
        try:
            header, buffers = recv_frames(conn)
        except (EOFError, OSError):
            os._exit(0)
        if header["op"] == "exit":
            _exit_in_order(conn, device, fresh)
        try:
            if header["op"] == "load":
                reply, module = _load(header, baseline)
                objects = Objects(module, device)
                send_frames(conn, _checked(reply))
            elif header["op"] == "launch":
                reply, back = _launch(header, buffers, module, device, baseline)
                send_frames(conn, _checked(reply), back)
            else:
                reply, back = objects.serve(header, buffers, baseline)
                send_frames(conn, _checked(reply), back)
        except Exception:  # noqa: BLE001 - this module's own failure, not the target's: said as such
            send_frames(conn, {"internal": traceback.format_exc()[-6000:]})


if __name__ == "__main__":
    main(int(sys.argv[1]), fresh=True)
