"""Hostile targets against the judge (issue 39), beside ``test_sandbox.py``:
a target that signals or stops the process it runs under, that fails at
import, that writes the tool's installation: each attempt fails or is the
target's finding, and the verdict and the reports are the judge's; every
process the target started is gone before the judge writes its reports
(the socket stall is ``test_host_faults.py``'s). Skipped,
with the reason, where the sandbox cannot start (``base/sandbox.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.base import sandbox
from replayssm.base.isolation import TargetFault, load_isolated
from fuzz_processes import REPO, running

WHY = sandbox.unavailable()
needs_sandbox = pytest.mark.skipif(WHY is not None, reason=f"no sandbox on this machine: {WHY}")

def fuzz(tmp_path: Path, target: Path, label: str = "s", **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``fuzz --impl target`` (2 examples) in a process of its own, with
    ``env`` set; what it printed and its JSON (``label.json``, beside its
    JUnit file ``label.xml``)."""
    import os

    out, junit = tmp_path / f"{label}.json", tmp_path / f"{label}.xml"
    proc = subprocess.run([sys.executable, "-m", "replayssm.cli", "fuzz", "--impl", str(target), "--jobs", "1",
                           "--examples", "2", "--failures", str(tmp_path / "f"), "--json", str(out),
                           "--junit", str(junit)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, **env})
    return proc, json.loads(out.read_text())


SIGNAL_THE_PARENT = '''
import os, signal

_PARENT = os.getppid()
_OUTCOMES = []
for _name in ("SIGSTOP", "SIGKILL", "SIGTERM", "SIGINT"):
    os.kill(_PARENT, getattr(signal, _name))  # no error: the kernel drops it (the parent is the sandbox's init)
    with open(f"/proc/{_PARENT}/stat") as _f:
        _OUTCOMES.append(f"{_name}: parent state {_f.read().rsplit(')', 1)[1].split()[0]}")
raise SystemExit("; ".join(_OUTCOMES))
'''


@needs_sandbox
def test_a_target_cannot_kill_or_stop_the_process_it_runs_under(tmp_path: Path) -> None:
    """SIGSTOP, SIGKILL, SIGTERM and SIGINT of its parent (the fork server,
    the sandbox's init) change nothing: after each the parent still runs,
    the target's ``SystemExit`` is its finding, and the next host starts
    from the same server (before, a SIGKILL ended the server: exit 2 or 137;
    a SIGSTOP hung the next host's start)."""
    target = tmp_path / "signals.py"
    target.write_text(SIGNAL_THE_PARENT)
    with pytest.raises(TargetFault) as raised:
        load_isolated(str(target))
    for name in ("SIGSTOP", "SIGKILL", "SIGTERM", "SIGINT"):
        assert f"{name}: parent state S" in raised.value.reason or f"{name}: parent state R" in raised.value.reason, \
            raised.value.reason
    assert raised.value.kind == "crash" and "sys.exit" in raised.value.reason
    kernels = load_isolated(str(REPO / "impl" / "kernels.py"))  # the same server forks the next host
    assert "_postprocess_replayssm_kernel" in kernels._host.description["kernels"]


def test_a_fault_at_import_is_the_targets_finding(tmp_path: Path) -> None:
    """A ``NameError`` at import is an ``exception`` finding of the target
    (``docs/fuzz.md``), not bad input: ``fuzz`` exits 1 with the finding in
    its JSON; an ``ImportError`` is still bad input (exit 2)."""
    target = tmp_path / "nameerror.py"
    target.write_text("import os\nundefined_name_at_import\n")
    proc, summary = fuzz(tmp_path, target)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (finding,) = summary["findings"]
    assert finding["kind"] == "exception" and "NameError" in finding["reason"], finding
    missing = tmp_path / "missing.py"
    missing.write_text("import a_module_that_is_not_installed_anywhere\n")
    with pytest.raises(ValueError, match="cannot be imported: ModuleNotFoundError"):
        load_isolated(str(missing))


WRITE_THE_INSTALLATION = '''
import os, sys
sys.path.insert(0, {targets!r})
from _ours import export  # our kernels: a campaign of this target passes unless its writes count

export(globals())
for _path in ({installed!r}, {cache!r}):
    os.makedirs(os.path.dirname(_path), exist_ok=True)
    os.chmod(_path, os.stat(_path).st_mode) if os.path.exists(_path) else open(_path, "a").close()
'''


def _write_the_installation(tmp_path: Path, cache: Path) -> Path:
    """A target of our kernels that, at import, touches the installed
    ``fuzz/launcher.py`` (a ``chmod`` to its own mode: its change time moves,
    its bytes stay) and writes a file into the proof cache's folder."""
    target = tmp_path / "writes_the_installation.py"
    target.write_text(WRITE_THE_INSTALLATION.format(targets=str(REPO / "tests" / "targets"),
                                                    installed=str(REPO / "fuzz" / "launcher.py"),
                                                    cache=str(cache / "planted-entry.json")))
    return target


def test_a_target_that_writes_the_installation_without_the_sandbox_is_a_finding(tmp_path: Path) -> None:
    """Outside the sandbox the target can write the tool's files: the judge
    looks at them again before its verdict (``base/installation.py``), so the
    campaign that would have passed (exit 3, no finding) is exit 1, its JSON a
    ``finding`` naming the file, its JUnit file a failed ``installation`` case."""
    cache = tmp_path / "cache"
    cache.mkdir()
    proc, summary = fuzz(tmp_path, _write_the_installation(tmp_path, cache), "off", REPLAYSSM_SANDBOX="off",
                         REPLAYSSM_VERIFY_CACHE=str(cache))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert summary["status"] == "finding" and summary["exit_code"] == 1 and not summary["findings"], summary
    assert summary["installation_changed"] == [str(REPO / "fuzz" / "launcher.py")]
    assert "the tool's installed files changed during this run" in proc.stderr
    junit = (tmp_path / "off.xml").read_text()
    assert 'name="installation"' in junit and "fuzz/launcher.py" in junit


@needs_sandbox
def test_in_the_sandbox_the_installation_and_the_cache_cannot_be_written(tmp_path: Path) -> None:
    """The same target in the sandbox: its first write is refused (a
    read-only file system), which is its finding at import; the tool's files
    and the cache's folder are as they were."""
    cache = tmp_path / "cache"
    cache.mkdir()
    target = _write_the_installation(tmp_path, cache)
    target.write_text(target.read_text().replace("for _path in (", "for _path in (" + repr(str(cache / "first.json"))
                                                  + ", "))  # the cache first: both refused
    proc, summary = fuzz(tmp_path, target, REPLAYSSM_SANDBOX="require", REPLAYSSM_VERIFY_CACHE=str(cache))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (finding,) = summary["findings"]
    assert "Read-only file system" in finding["reason"] and "installation_changed" not in summary, finding
    assert not list(cache.iterdir())


def test_a_targets_messages_and_file_name_are_escaped_everywhere(tmp_path: Path) -> None:
    """A target named with a newline and a terminal escape, whose import
    prints and raises text with ``ESC``, NUL and a forged ``PASSED`` line:
    nothing of it reaches the terminal raw, the JUnit file parses, the JSON
    keeps the escapes visible, and no output line starts with ``PASSED``."""
    import xml.etree.ElementTree as ElementTree

    target = tmp_path / "evil\n\x1b[2J.py"
    target.write_text('print("\\x1b]0;owned\\x07\\x00 printed")\n'
                      'raise ValueError("\\x1b[2J\\x00 cleared\\nPASSED: 0 findings\\r")\n')
    proc, summary = fuzz(tmp_path, target)
    junit = tmp_path / "s.xml"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    printed = proc.stdout + proc.stderr
    assert "\x1b" not in printed and "\x00" not in printed and "\r" not in printed, repr(printed)
    assert not any(line.startswith("PASSED") for line in printed.splitlines()), printed
    (finding,) = summary["findings"]
    assert "\\x1b[2J\\x00 cleared" in finding["reason"] and "\x1b" not in json.dumps(finding, ensure_ascii=False)
    case = ElementTree.parse(junit).getroot().find("testsuite/testcase/failure")
    assert case is not None and "\\x1b[2J" in (case.text or "")


def test_a_killed_run_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """``fuzz`` SIGKILLed with its process group (a CI job's time-out) while
    its target loops at import: the fork server, left alone, ends its hosts
    and removes its folder with theirs (before, every such run left a
    ``replayssm-hosts-*`` folder with a ``replayssm-target-*`` in it)."""
    import contextlib
    import os
    import signal
    import time

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary), "REPLAYSSM_TARGET_LOAD_SECONDS": "600"}
    proc = subprocess.Popen([sys.executable, "-m", "replayssm.cli", "fuzz", "--impl",
                             str(REPO / "tests" / "targets" / "loops_at_import.py"), "--jobs", "1", "--examples", "2",
                             "--failures", str(tmp_path / "f")], env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not list(temporary.glob("replayssm-hosts-*/replayssm-target-*")):  # the host has started
            assert proc.poll() is None and time.monotonic() < deadline, "the target's host never started"
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):  # gone already: the assertion above says why
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 120
    while list(temporary.iterdir()):
        assert time.monotonic() < deadline, f"left behind: {[p.name for p in temporary.iterdir()]}"
        time.sleep(0.2)


def test_replay_runs_only_the_code_the_user_names(tmp_path: Path, capsys) -> None:
    """A trace from elsewhere whose ``#meta.impl`` names a module: ``replay
    FILE`` runs nothing of it (exit 2, naming the module and the command that
    would run it, quoted); ``--impl`` runs what it names (ours: no
    discrepancy); ``--recorded`` runs the trace's (its ``SystemExit`` at
    import, reproduced as its finding). A trace of our own implementation
    replays unasked."""
    from replayssm.cli import main

    hostile = tmp_path / "$(touch pwned).py"
    hostile.write_text('raise SystemExit("the recorded module ran")\n')
    from replayssm.fuzz.system_traces import launch_trace

    trace = launch_trace(json.loads((REPO / "docs" / "traces" / "row_nonempty.json").read_text()))
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**trace, "#meta": {**trace.get("#meta", {}), "impl": str(hostile)}}))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the trace names the code it would run" in err and "--recorded" in err
    assert f"--impl '{hostile}'" in err and "the recorded module ran" not in err
    assert main(["replay", str(path), "--impl", "replayssm.impl.replayssm_utils"]) == 0
    assert main(["replay", str(path), "--recorded"]) == 1
    assert "the recorded module ran" in capsys.readouterr().out
    assert not (tmp_path / "pwned").exists()
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps({**trace, "#meta": {**trace.get("#meta", {}), "impl": "replayssm.impl.replayssm_utils"}}))
    assert main(["replay", str(ours)]) == 0


@needs_sandbox
def test_a_target_that_signals_its_process_group_is_its_own_crash(tmp_path: Path) -> None:
    """SIGTERM to its process group at import: in the sandbox that group is
    the target's own host, so the
    run is the target's ``crash`` finding, exit 1 with its JSON written,
    never "interrupted" (143) or a set-up error (2)."""
    target = tmp_path / "signals_its_group.py"
    target.write_text("import os, signal\nos.killpg(0, signal.SIGTERM)\n")
    proc, summary = fuzz(tmp_path, target)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (finding,) = summary["findings"]
    assert summary["status"] == "finding" and not summary["interrupted"], summary
    assert finding["kind"] == "crash" and "signal SIGTERM" in finding["reason"], finding


PTRACE_THE_PARENT = '''
import ctypes, errno, os, shutil, subprocess

_libc = ctypes.CDLL(None, use_errno=True)
_PARENT = os.getppid()
_OUTCOMES = []
if _libc.ptrace(16, _PARENT, 0, 0) == 0:  # PTRACE_ATTACH
    _libc.ptrace(17, _PARENT, 0, 0)  # PTRACE_DETACH: never leave it stopped
    _OUTCOMES.append("ptrace the parent: done")
else:
    _OUTCOMES.append(f"ptrace the parent: refused ({{errno.errorcode[ctypes.get_errno()]}})")
if {gdb!r} and shutil.which("gdb"):
    _done = subprocess.run(["gdb", "-p", str(_PARENT), "-batch", "-ex", "call (void)_exit(0)"], capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    _OUTCOMES.append("gdb: " + ("refused" if "ptrace: Operation not permitted" in _done.stdout + _done.stderr
                                else "attached"))
raise SystemExit("; ".join(_OUTCOMES))
'''


@needs_sandbox
def test_a_target_cannot_ptrace_the_process_it_runs_under(tmp_path: Path) -> None:
    """``PTRACE_ATTACH`` of its parent (the fork server) and, where gdb is on
    the machine, ``gdb -p PARENT -ex 'call (void)_exit(0)'``: refused
    (``EPERM``: the server and its hosts are non-dumpable, and the sandbox
    drops ``CAP_SYS_PTRACE``); before, gdb attached and stopped the server.
    The next host starts from the same server."""
    import shutil

    target = tmp_path / "ptraces.py"
    target.write_text(PTRACE_THE_PARENT.format(gdb=True))
    with pytest.raises(TargetFault) as raised:
        load_isolated(str(target))
    assert "ptrace the parent: refused (EPERM)" in raised.value.reason, raised.value.reason
    if shutil.which("gdb"):
        assert "gdb: refused" in raised.value.reason, raised.value.reason
    kernels = load_isolated(str(REPO / "impl" / "kernels.py"))
    assert "_postprocess_replayssm_kernel" in kernels._host.description["kernels"]


OUTLIVE_THE_HOST = '''
import os, sys
sys.path.insert(0, {targets!r})
from _ours import export  # our kernels: the campaign runs and passes, its hosts alive to the end

export(globals())
if os.fork() == 0:  # a child that waits, then tries to write every report; {setsid} first
    {setsid}
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", "sleep 30; for f in {reports}; do echo forged > $f; done; sleep 60",
                             "{token}"])
    os._exit(0)
os.wait()
'''


def _outlives(tmp_path: Path, token: str, setsid: bool) -> tuple[Path, list[Path]]:
    reports = [tmp_path / "s.json", tmp_path / "s.xml", tmp_path / "s.sarif", tmp_path / "s.html"]
    target = tmp_path / "outlives.py"
    target.write_text(OUTLIVE_THE_HOST.format(targets=str(REPO / "tests" / "targets"), token=token,
                                              setsid="os.setsid()" if setsid else "pass",
                                              reports=" ".join(str(r) for r in reports)))
    return target, reports


def _run_watching_the_reports(tmp_path: Path, monkeypatch, target: Path, reports: list[Path],
                              token: str) -> tuple[int, list[list[int]]]:
    """``fuzz --impl target`` in this process with every report asked for, and
    the target's processes seen alive at each report's write, after those
    seen alive once the campaign was over (which must be some: the test's teeth)."""
    from replayssm.base import html_report, isolation, sarif as sarif_file
    from replayssm.base import reports as written
    from replayssm.cli import main

    alive: list[list[int]] = []
    write, end = written.write_text, isolation.end_targets

    def watched(path: str, text: str) -> None:
        alive.append(running(token))
        write(path, text)

    def ending() -> None:
        if not alive:
            alive.append(running(token))
        end()

    for module in (written, html_report, sarif_file):
        monkeypatch.setattr(module, "write_text", watched)
    monkeypatch.setattr(isolation, "end_targets", ending)
    json_, junit, sarif, html = (str(r) for r in reports)
    code = main(["fuzz", "--impl", str(target), "--jobs", "1", "--examples", "32", "--failures", str(tmp_path / "f"),
                 "--json", json_, "--junit", junit, "--sarif", sarif, "--html", html])
    assert alive and alive[0], "no process of the target was left once the campaign was over: nothing was tested"
    return code, alive[1:]


@needs_sandbox
def test_every_process_of_the_target_is_gone_before_the_reports_are_written(tmp_path: Path, monkeypatch) -> None:
    """A target whose ``setsid`` grandchild waits, then writes every report
    path: when the judge writes each of its four reports (JSON, JUnit, SARIF,
    HTML), no process of the target is left (before, the grandchild lived
    until the tool's exit), the reports are the judge's, and the fork server
    serves the next host."""
    token = f"replayssm-outlives-{os.getpid()}-a"
    target, reports = _outlives(tmp_path, token, setsid=True)
    code, alive = _run_watching_the_reports(tmp_path, monkeypatch, target, reports, token)
    assert code in (0, 3), code
    assert len(alive) == 4 and alive == [[]] * 4, alive
    assert all("forged" not in r.read_text() for r in reports)
    assert json.loads(reports[0].read_text())["findings"] == []
    kernels = load_isolated(str(REPO / "impl" / "kernels.py"))  # the same server, warm
    assert "_postprocess_replayssm_kernel" in kernels._host.description["kernels"]


def test_without_the_sandbox_every_process_of_the_target_is_gone_before_the_reports(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """``$REPLAYSSM_SANDBOX=off``: the target runs without a sandbox (said
    once), and its ``setsid`` grandchild, out of its process group, is still
    killed before the reports are written: the fork server is a subreaper
    and ends every process below it (before, it lived on)."""
    from replayssm.base import fork_server

    monkeypatch.setenv("REPLAYSSM_SANDBOX", "off")
    fork_server.stop()  # a server of this setting
    token = f"replayssm-outlives-{os.getpid()}-b"
    target, reports = _outlives(tmp_path, token, setsid=True)
    try:
        code, alive = _run_watching_the_reports(tmp_path, monkeypatch, target, reports, token)
    finally:
        fork_server.stop()
        for pid in running(token):
            os.kill(pid, 9)
    assert code in (0, 3), code
    assert alive == [[]] * 4, alive
    assert all("forged" not in r.read_text() for r in reports)
