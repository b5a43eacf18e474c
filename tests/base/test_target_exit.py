"""A target's process ends in order when asked (``exit``): it waits for the device's work, answers
and exits with status 0, a fresh interpreter through its normal exit, so that a tool watching it
(``compute-sanitizer --target-processes all``) reports on the process that ran the kernels; and a
host may be a fork of the judging process's (``base/forked_host.py``) where that has only imported."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from replayssm.base import forked_host
from replayssm.base.host_channel import recv_frames, send_frames
from replayssm.base.host_faults import HostFault
from replayssm.base.isolation import TargetHost, load_isolated
from replayssm.base.targets import DEFAULT_TARGET

AT_EXIT = """
import atexit

def _mark():
    open({marker!r}, "w").write("ended in order")

atexit.register(_mark)
"""


def _fresh_host(tmp_path: Path, ask_exit: bool) -> tuple[int, dict | None, bool]:
    """A fresh interpreter serving a target that marks its normal exit (``atexit``); ended by
    ``exit`` or by closing its socket. Its exit status, its last answer and whether it marked."""
    marker = tmp_path / "marker.txt"
    target = tmp_path / "at_exit_target.py"
    target.write_text(AT_EXIT.format(marker=str(marker)))
    ours, theirs = socket.socketpair()
    env = {**os.environ, "REPLAYSSM_TARGET_DEVICE": "cpu", "TRITON_INTERPRET": "1"}
    process = subprocess.Popen([sys.executable, "-m", "replayssm.base.target_host", str(theirs.fileno())],
                               cwd=tmp_path, env=env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    theirs.close()
    conn = Connection(ours.detach())
    try:
        assert recv_frames(conn, 120)[0]["started"]
        send_frames(conn, {"op": "load", "name": str(target), "label": "--impl"})
        assert "kernels" in recv_frames(conn, 60)[0]
        answer = None
        if ask_exit:
            send_frames(conn, {"op": "exit"})
            answer = {k: v for k, v in recv_frames(conn, 60)[0].items() if k != "buffers"}
    finally:
        conn.close()
    return process.wait(60), answer, marker.exists()


def test_a_fresh_host_asked_to_exit_ends_through_the_interpreter_s_normal_exit(tmp_path: Path) -> None:
    assert _fresh_host(tmp_path, ask_exit=True) == (0, {"exiting": 0}, True)


def test_a_host_whose_socket_closes_ends_without_its_exit_handlers(tmp_path: Path) -> None:
    """Teeth: the way it ended before (``os._exit`` at the socket's end; a SIGKILL from ``close``)
    runs no exit handler, which the test above tells apart."""
    assert _fresh_host(tmp_path, ask_exit=False) == (0, None, False)


@pytest.mark.parametrize("forked", [False, True])
def test_shutdown_ends_the_host_with_status_0(forked: bool) -> None:
    """The fork server's host and one forked from this process: ``shutdown`` returns 0 and the host is gone."""
    module = load_isolated(DEFAULT_TARGET, forked=forked)
    host = module._host
    process = host.process
    assert isinstance(process, forked_host.ForkedHost) == forked
    if forked:  # this process's own child
        stat = Path(f"/proc/{process.pid}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()
    assert module.shutdown() == 0
    assert host.process is None and process.poll() == 0
    assert module.shutdown() is None  # nothing left to end


def test_a_host_that_does_not_end_in_time_is_killed() -> None:
    """A host that cannot answer (stopped): ``shutdown`` gives up after its bound and kills it."""
    import signal

    module = load_isolated(DEFAULT_TARGET, forked=True)
    process = module._host.process
    os.kill(process.pid, signal.SIGSTOP)
    assert module.shutdown(0.5) == -signal.SIGKILL == process.poll()


def test_no_host_is_forked_from_a_process_with_a_cuda_context(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(HostFault, match="CUDA context"):
        load_isolated(DEFAULT_TARGET, forked=True)
