"""Hostile targets against the sandbox (issue 39): a target that tries to
reach the judge (ptrace, a signal, its standard output through ``/proc``), to
write the tool's installation or its reports, or to outlive the run with a
``setsid`` grandchild, is refused each time, and the verdict and the reports
are the judge's. Skipped, with the reason, where the sandbox cannot start
(``base/sandbox.py``: no ``bwrap``, no namespaces)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replayssm.base import sandbox
from replayssm.base.isolation import TargetFault, load_isolated
from fuzz_processes import REPO, running

WHY = sandbox.unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"no sandbox on this machine: {WHY}")

HOSTILE = '''
import ctypes, errno, os, time

_libc = ctypes.CDLL(None, use_errno=True)
_JUDGE = {judge}
_OUTCOMES = []


def _try(name, action):
    try:
        action()
        _OUTCOMES.append(f"{{name}}: done")
    except OSError as e:
        _OUTCOMES.append(f"{{name}}: refused ({{errno.errorcode.get(e.errno, e.errno)}})")


def _ptrace():
    if _libc.ptrace(16, _JUDGE, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    time.sleep(0.1)
    _libc.ptrace(17, _JUDGE, 0, 0)  # PTRACE_DETACH: never leave the judge stopped


def _write(path):
    with open(path, "a") as f:
        f.write("")


_try("ptrace the judge", _ptrace)
_try("signal the judge", lambda: os.kill(_JUDGE, 0))
_try("write the judge's standard output", lambda: _write(f"/proc/{{_JUDGE}}/fd/1"))
_try("write the installed package", lambda: _write({installed!r}))
_try("write the report", lambda: _write({report!r}))
_try("read this user's key", lambda: open({key!r}, "rb").read())

if os.fork() == 0:  # a setsid grandchild that waits, then tries to rewrite the report
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", "sleep {nap}; echo forged > {report}; sleep 60", "{token}"])
    os._exit(0)
os.wait()
raise SystemExit("; ".join(_OUTCOMES))  # a BaseException at import: the target's finding
'''


def hostile(tmp_path: Path, judge: int, report: Path, token: str, nap: float = 3) -> Path:
    path = tmp_path / "hostile.py"
    from replayssm.base import secret_key

    assert secret_key.key() is not None  # the key the proof cache signs with exists: the target must not read it
    path.write_text(HOSTILE.format(judge=judge, installed=str(REPO / "fuzz" / "launcher.py"), report=str(report),
                                   token=token, nap=nap, key=str(secret_key.folder() / secret_key.NAME)))
    return path


def test_a_hostile_target_cannot_reach_the_judge_or_its_files(tmp_path: Path) -> None:
    """Every attempt refused (its `sys.exit` at import says how each went);
    reading the proof cache's key too (the sandbox covers its folder: before,
    the read succeeded)."""
    report = tmp_path / "report.json"
    report.write_text("{}")
    token = f"replayssm-hostile-{os.getpid()}-a"
    with pytest.raises(TargetFault) as raised:
        load_isolated(str(hostile(tmp_path, os.getpid(), report, token, nap=60)))
    reason = raised.value.reason
    for attempt in ("ptrace the judge", "signal the judge", "write the judge's standard output",
                    "write the installed package", "write the report", "read this user's key"):
        assert f"{attempt}: refused" in reason, reason
    assert report.read_text() == "{}"


def test_a_setsid_grandchild_dies_with_the_run_and_the_reports_are_the_judges(tmp_path: Path) -> None:
    """``fuzz`` of the hostile target in a process of its own: exit 1 with the
    target's finding at import, the JSON the judge's, and once the tool has
    ended no process of the target is left (its grandchild would have
    rewritten the JSON 3 s later)."""
    out = tmp_path / "s.json"
    token = f"replayssm-hostile-{os.getpid()}-b"
    target = hostile(tmp_path, os.getpid(), out, token)
    proc = subprocess.run([sys.executable, "-m", "replayssm.cli", "fuzz", "--impl", str(target), "--jobs", "1",
                           "--examples", "16", "--failures", str(tmp_path / "f"), "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert not running(token), "a process of the target outlived the run"
    time.sleep(4)
    summary = json.loads(out.read_text())
    (finding,) = summary["findings"]
    assert "write the report: refused" in finding["reason"], finding


def test_a_cuda_hosts_options_bind_the_gpus_devices_and_keep_the_rest_read_only(tmp_path: Path) -> None:
    """The options of a CUDA host's sandbox (no GPU here: the device list is
    given): each device bound where present (``--dev-bind-try``, after the
    fresh ``/dev``), bwrap's own init with ``--die-with-parent`` instead of
    ``--as-pid-1``, the key's folder covered, the rest as the fork server's."""
    from replayssm.base import secret_key

    devices = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    options = sandbox._options(str(tmp_path), devices)
    at = options.index("--dev")
    assert options[at + 2:at + 11] == [a for d in devices for a in ("--dev-bind-try", d, d)], options
    assert "--die-with-parent" in options and "--as-pid-1" not in options
    assert ["--tmpfs", os.path.realpath(secret_key.folder())] == options[3:5]
    server = sandbox._options(str(tmp_path))
    assert "--as-pid-1" in server and "--dev-bind-try" not in server
    assert [o for o in options if o not in devices and o not in ("--dev-bind-try", "--die-with-parent")] == \
        [o for o in server if o != "--as-pid-1"]


SANDBOXED_VIEW = '''
import os
_OUTCOMES = [f"pid {os.getpid()}", f"device {os.path.exists(DEVICE)}", f"absent {os.path.exists('/dev/nvidia0')}",
             f"triton cache {os.environ.get('TRITON_CACHE_DIR', '').startswith(os.getcwd())}"]
try:
    open(INSTALLED, "a").close()
    _OUTCOMES.append("installation: written")
except OSError as e:
    _OUTCOMES.append(f"installation: refused ({e.strerror})")
raise SystemExit("; ".join(_OUTCOMES))
'''


def test_a_cuda_host_runs_in_the_sandbox_with_the_devices_bound(tmp_path: Path, monkeypatch) -> None:
    """A CUDA host's start path on this CPU machine, the CUDA probe taken as
    passed and ``/dev/kvm`` standing for a GPU's device (a dry run): the
    target runs under bwrap (not pid 1: bwrap's init is), sees the bound
    device and not an absent one, has its Triton cache in its own folder and
    cannot write the installation; a target's signal death reads as the
    signal, not bwrap's ``128 + N``."""
    from replayssm.base.isolation import TargetGone, TargetHost

    device = "/dev/kvm" if os.path.exists("/dev/kvm") else "/dev/loop-control"
    if not os.path.exists(device):
        pytest.skip("no device file here to stand for a GPU's")
    monkeypatch.setattr(sandbox, "gpu_devices", lambda: [device, "/dev/nvidia0"])
    probed = sandbox.unavailable
    monkeypatch.setattr(sandbox, "unavailable", lambda cuda=False: None if cuda else probed())
    target = tmp_path / "view.py"
    target.write_text(SANDBOXED_VIEW.replace("DEVICE", repr(device)).replace(
        "INSTALLED", repr(str(REPO / "fuzz" / "launcher.py"))))
    host = TargetHost(str(target), cuda=True)
    with pytest.raises(TargetFault) as raised:
        host.load()
    assert isinstance(host.process, sandbox.SandboxedProcess) or host.process is None
    reason = raised.value.reason
    assert "pid 2" in reason and "device True" in reason and "absent False" in reason, reason
    assert "triton cache True" in reason and "installation: refused (Read-only file system)" in reason, reason
    crash = tmp_path / "crash.py"
    crash.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    with pytest.raises(TargetGone) as crashed:
        TargetHost(str(crash), cuda=True).load()
    assert crashed.value.fault.reason.endswith("signal SIGSEGV"), crashed.value.fault.reason
