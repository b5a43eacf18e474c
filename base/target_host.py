"""The target's own process (started by :class:`.isolation.TargetHost`): it
imports the target and launches its kernels when asked, and says what the
target changed in the process after each step.

``python -m replayssm.base.target_host FD``: ``FD`` is this end of the
socket to the judging process; every message is a JSON header and raw
buffers (:func:`.isolation.send_frames`). The process ends when that socket
closes, or with its parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

WATCHED = ("numpy", "torch", "builtins", "os", "os.path", "sys", "math", "json", "threading", "time")
"""Modules whose functions the target must leave as they are."""


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _functions(module: Any) -> dict[str, int]:
    return {k: id(v) for k, v in vars(module).items() if callable(v) and not k.startswith("__")}


class Baseline:
    """What the process is before the target: working directory, environment,
    the watched modules' functions, the threads."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.env = dict(os.environ)
        self.functions = {m: _functions(sys.modules[m]) for m in WATCHED if m in sys.modules}
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
        for m, before in self.functions.items():
            now = _functions(sys.modules[m])
            replaced = sorted(k for k in before if now.get(k, before[k]) != before[k])
            if replaced:
                out.append(f"it replaced {', '.join(f'{m}.{k}' for k in replaced[:5])}")
        threads = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive() and not t.daemon]
        if threads:
            out.append(f"it left non-daemon thread(s) running: {', '.join(t.name for t in threads[:5])}")
        return out


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
    try:
        getattr(module, header["kernel"])[tuple(header["grid"])](*args, **kwargs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except BaseException as e:  # noqa: BLE001 - the target's raise is reported, whatever it is
        reply = _raised(e)
    for t, before, after in relocated:  # our addresses back where the launch left them unchanged
        t.copy_(torch.where(t == after, before, t))
    reply["changed"] = baseline.changes()
    return reply, [s.cpu().numpy().tobytes() for s in storages]


def main(fd: int) -> None:
    """Serve the judging process on socket ``fd`` until it closes."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judging process decides when this one ends
    conn = Connection(fd)
    import numpy  # noqa: F401 - imported before the baseline, as the target will find them
    import torch
    import triton  # noqa: F401

    from replayssm.base.isolation import recv_frames, send_frames

    device = torch.device(os.environ.get("REPLAYSSM_TARGET_DEVICE", "cpu"))
    baseline = Baseline()
    send_frames(conn, {"started": True})
    module = None
    while True:
        try:
            header, buffers = recv_frames(conn)
        except (EOFError, OSError):
            os._exit(0)
        try:
            if header["op"] == "load":
                reply, module = _load(header, baseline)
                send_frames(conn, reply)
            elif header["op"] == "launch":
                reply, back = _launch(header, buffers, module, device, baseline)
                send_frames(conn, reply, back)
        except Exception:  # noqa: BLE001 - this module's own failure, not the target's: said as such
            send_frames(conn, {"internal": traceback.format_exc()[-6000:]})


if __name__ == "__main__":
    main(int(sys.argv[1]))
