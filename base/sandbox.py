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

The judging process also makes itself non-dumpable (:func:`protect_judge`:
``PR_SET_DUMPABLE`` 0), which keeps a process of the same user without
``CAP_SYS_PTRACE`` from attaching to it, sandbox or not.

``$REPLAYSSM_SANDBOX``: ``auto`` (the default: the sandbox where ``bwrap``
works, else the hosts run as before and the tool says so once), ``require``
(no working ``bwrap`` is a set-up error, exit 2) or ``off``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

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


def _options(folder: str) -> list[str]:
    return ["--ro-bind", "/", "/", *_hidden(), "--dev", "/dev", "--proc", "/proc", "--bind", folder, folder,
            "--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-net", "--new-session",
            "--cap-drop", "ALL", "--chdir", folder]


def unavailable() -> str | None:
    """Why the sandbox cannot run on this machine (None: it can): no
    ``bwrap``, or one that fails to start a trivial command (no user or PID
    namespaces here)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if bwrap not in _PROBED:
        folder = tempfile.mkdtemp(prefix="replayssm-sandbox-")
        try:
            proc = subprocess.run([bwrap, *_options(folder), "true"], capture_output=True, text=True, timeout=30,
                                  stdin=subprocess.DEVNULL)
            _PROBED[bwrap] = None if proc.returncode == 0 else f"bwrap cannot start here: {proc.stderr.strip()}"
        except (OSError, subprocess.TimeoutExpired) as e:
            _PROBED[bwrap] = f"bwrap cannot start here: {e}"
        finally:
            os.rmdir(folder)
    return _PROBED[bwrap]


def command(folder: str) -> list[str]:
    """The ``bwrap`` command line that runs what follows it in the sandbox,
    ``folder`` its only writable place; empty where the sandbox is off or
    cannot run (said once on standard error; with ``require`` a
    :class:`HostFault`)."""
    global _SAID
    choice = setting()
    if choice == "off":
        return []
    why = unavailable()
    if why is None:
        return [str(shutil.which("bwrap")), *_options(folder)]
    if choice == "require":
        raise HostFault(f"${SETTING}=require, but the target's process cannot be sandboxed: {why}")
    if not _SAID:
        _SAID = True
        print(f"note: the target's process runs without a sandbox ({why}): it runs as this user and could reach "
              f"this tool; ${SETTING}=require makes that an error", file=sys.stderr)
    return []


def protect_judge() -> None:
    """Make this process non-dumpable (``PR_SET_DUMPABLE`` 0): a process of
    the same user without ``CAP_SYS_PTRACE`` cannot attach to it or read its
    memory; inherited by the processes it forks."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass
