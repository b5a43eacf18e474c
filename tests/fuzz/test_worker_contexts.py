"""Supervised children under each start method the campaigns use.

The CUDA campaign's workers are forks of a fork server (``fuzz/campaign.py``
``worker_context``), so their parent is that server, not the campaign: a
child that checks it still has the campaign as its parent after asking to
end with it (``fuzz/workers.py``) ended itself at once there ("the worker
process died (exit status 1) while it set up", every CUDA campaign on the
H100, 2026-12-06, tree 8b14904)."""

from __future__ import annotations

import multiprocessing
import operator

import pytest

from replayssm.fuzz.workers import Supervisor


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_supervised_child_runs_under_every_start_method(method: str) -> None:
    supervisor = Supervisor(multiprocessing.get_context(method), watchdog=120)
    child = supervisor.start(0, operator.truth, ())
    supervisor.run()
    assert child.fault is None and child.error is None
    assert child.result is True
