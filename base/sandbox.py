"""The target hosts' sandbox: bubblewrap around the fork server, and the judge kept out of reach.

Every CPU target host is forked by the fork server (:mod:`.fork_server`); the
server runs inside `bubblewrap <https://github.com/containers/bubblewrap>`_
(``bwrap``), so every host and every process a target starts is there too:

* its own PID namespace (``--unshare-pid``): the judge's processes do not
  exist there, so a target cannot ptrace, signal or read ``/proc`` of the
  tool (``/proc`` is the namespace's own); the server is the namespace's
  init (``--as-pid-1``), so no process there can kill or stop it (the
  kernel drops SIGKILL, SIGSTOP and every signal it has no handler for
  when they come from inside), and it reaps every orphan there; when it
  ends (the process that started it closed its socket, or died: not when
  the thread that started it ends, hence no ``--die-with-parent``), the
  kernel kills every process left in the namespace, a ``setsid``
  grandchild included;
* no capabilities (``--cap-drop ALL``), its own IPC and network namespaces
  (it talks to the judge only through its socket), a session of its own;
* the whole file system read-only (``--ro-bind / /``) but for the server's
  folder, where each host has its own: a target cannot write the tool's
  installation, caches, traces or reports; the folder of this user's secret
  key (:mod:`.secret_key`, what the proof cache's entries are signed with)
  covered with an empty one: a target cannot read it.

A CUDA host (a fresh interpreter of its own, not forked by the server)
runs in a sandbox of its own (:func:`command` with ``cuda``): the same
options but bwrap's own init (``--die-with-parent``: it ends with bwrap,
which the judge kills), the GPU's device files bound
(``--dev-bind-try``: :func:`gpu_devices`), the CUDA libraries read-only
as every file is, Triton's and CUDA's compile caches in its folder
(:func:`host_environment`); where CUDA does not run there
(:data:`CUDA_PROBE`, once per process) it is as a missing ``bwrap``.

The judging process also makes itself non-dumpable (:func:`protect_judge`:
``PR_SET_DUMPABLE`` 0), which keeps a process of the same user without
``CAP_SYS_PTRACE`` from attaching to it, sandbox or not.

``$REPLAYSSM_SANDBOX``: ``auto`` (the default: the sandbox where ``bwrap``
works, else the hosts run as before and the tool says so once), ``require``
(no working ``bwrap`` is a set-up error, exit 2) or ``off``.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from . import secret_key
from .host_faults import HostFault

SETTING = "REPLAYSSM_SANDBOX"
CHOICES = ("auto", "require", "off")

_PROBED: dict[str, str | None] = {}
"""``bwrap``'s path -> why it cannot run here (None: it can), probed once per process."""

_SAID = False


def setting() -> str:
    """``$REPLAYSSM_SANDBOX``, checked: a :class:`HostFault` naming the allowed values otherwise."""
    value = os.environ.get(SETTING, "auto")
    if value not in CHOICES:
        raise HostFault(f"${SETTING} must be one of {', '.join(CHOICES)}, got {value!r}")
    return value


def _hidden() -> list[str]:
    """The options that cover this user's secret key's folder (:mod:`.secret_key`, made here if it
    is not there) with an empty one: nothing in the sandbox can read the key."""
    where = secret_key.prepared_folder()
    return [] if where is None else ["--tmpfs", os.path.realpath(where)]


GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps/*")
"""The device files a CUDA process opens (the driver's control, UVM and one per GPU; MIG's capabilities)."""

CUDA_PROBE = "import torch; torch.zeros(1, device='cuda').add_(1).item()"
"""What a CUDA host must be able to run in the sandbox (torch's CUDA context and a kernel)."""


def gpu_devices() -> list[str]:
    """The GPU device files of this machine (none on a CPU-only one)."""
    return sorted({path for pattern in GPU_DEVICES for path in glob.glob(pattern)})


def _options(folder: str, devices: Sequence[str] | None = None) -> list[str]:
    """``bwrap``'s options: the fork server's (``devices`` None: it is the
    sandbox's init), or a CUDA host's (``devices``: each bound where present,
    ``--dev-bind-try``; the host under bwrap's own init, ended with bwrap).
    The CUDA libraries, like every file, are there read-only."""
    gpu = [] if devices is None else [a for d in devices for a in ("--dev-bind-try", d, d)]
    init = ["--as-pid-1"] if devices is None else ["--die-with-parent"]
    return ["--ro-bind", "/", "/", *_hidden(), "--dev", "/dev", *gpu, "--proc", "/proc", "--bind", folder, folder,
            "--unshare-pid", *init, "--unshare-ipc", "--unshare-net", "--new-session",
            "--cap-drop", "ALL", "--chdir", folder]


def unavailable(cuda: bool = False) -> str | None:
    """Why the sandbox cannot run on this machine (None: it can): no
    ``bwrap``, or one that fails to start a trivial command (no user or PID
    namespaces here); ``cuda``: or one where :data:`CUDA_PROBE` fails."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    key = f"{bwrap} cuda" if cuda else bwrap
    if key not in _PROBED:
        folder = tempfile.mkdtemp(prefix="replayssm-sandbox-")
        probe = [sys.executable, "-c", CUDA_PROBE] if cuda else ["true"]
        try:
            proc = subprocess.run([bwrap, *_options(folder, gpu_devices() if cuda else None), *probe],
                                  capture_output=True, text=True, timeout=300 if cuda else 30,
                                  stdin=subprocess.DEVNULL, env=host_environment(dict(os.environ), folder))
            _PROBED[key] = None if proc.returncode == 0 else (
                f"bwrap cannot start here: {proc.stderr.strip()[-2000:]}" if not cuda else
                f"CUDA does not run in bwrap here (devices {', '.join(gpu_devices()) or 'none'}): "
                f"{proc.stderr.strip()[-2000:]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            _PROBED[key] = f"bwrap cannot start here: {e}"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return _PROBED[key]


def host_environment(env: dict[str, str], folder: str) -> dict[str, str]:
    """``env`` for a CUDA host in the sandbox: Triton's and CUDA's compile
    caches in its own ``folder`` (the user's are read-only there; a shared
    writable one would let a target plant compiled kernels for later runs)."""
    return {**env, "TRITON_CACHE_DIR": os.path.join(folder, "triton-cache"),
            "CUDA_CACHE_PATH": os.path.join(folder, "cuda-cache")}


def command(folder: str, cuda: bool = False) -> list[str]:
    """The ``bwrap`` command line that runs what follows it in the sandbox,
    ``folder`` its only writable place (``cuda``: a CUDA host's, with the
    GPU's devices; its environment from :func:`host_environment`); empty
    where the sandbox is off or cannot run (said once on standard error;
    with ``require`` a :class:`HostFault`)."""
    global _SAID
    choice = setting()
    if choice == "off":
        return []
    why = unavailable(cuda)
    if why is None:
        return [str(shutil.which("bwrap")), *_options(folder, gpu_devices() if cuda else None)]
    if choice == "require":
        raise HostFault(f"${SETTING}=require, but the target's process cannot be sandboxed: {why}")
    if not _SAID:
        _SAID = True
        print(f"note: the target's process runs without a sandbox ({why}): it runs as this user and could reach "
              f"this tool; ${SETTING}=require makes that an error", file=sys.stderr)
    return []


class SandboxedProcess(subprocess.Popen):
    """A CUDA host run by ``bwrap``, which exits ``128 + N`` when its command
    is killed by signal ``N``: its status read as that signal (``-N``, as
    ``subprocess`` gives it), so a target's crash reads the same in the
    sandbox (a target's own ``exit(128 + N)`` reads as that signal too)."""

    sandboxed = True

    def poll(self) -> int | None:
        return _as_signal(super().poll())

    def wait(self, timeout: float | None = None) -> int:
        code = _as_signal(super().wait(timeout))
        assert code is not None
        return code


def _as_signal(code: int | None) -> int | None:
    return -(code - 128) if code is not None and 128 < code < 128 + 65 else code


def protect_judge() -> None:
    """Make this process non-dumpable (``PR_SET_DUMPABLE`` 0): a process of
    the same user without ``CAP_SYS_PTRACE`` cannot attach to it or read its
    memory; inherited by the processes it forks."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass
