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
