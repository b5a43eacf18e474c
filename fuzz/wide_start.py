"""The wide runner's start: its processes fork from one that imported the harness, its targets from them.

A wide process (``benchmarks/fuzz_throughput.py``'s pool on CUDA) spent most of
its start on imports (``docs/gpu.md``, 2026-12-06): the harness's (torch, the
spec, :mod:`.wide`: 2.7-4.7 s) and, beside them, its target's process, a fresh
interpreter importing torch and triton (3.8-4.3 s), 16 interpreters at once on
16 CPUs. Here nobody pays them but one process: on CUDA the wide processes
are forks of a fork server that imported :data:`WIDE_PRELOAD` once and made
no CUDA context (:func:`wide_context`), and each forks its target's process
from itself at once (``forked`` hosts, ``base/forked_host.py``), before it
makes a CUDA context or judges anything; the host then imports only the
target. The judging process never imports the target: the preload holds the
harness, torch and triton, not the code under review.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

WATCHDOG_SECONDS = {"cpu": 120.0, "cuda": 300.0}
"""A wide launch's watchdog by device (many rows per launch under the interpreter on CPU)."""

WIDE_PRELOAD = ["replayssm.fuzz.wide", "triton", "replayssm.base.target_host"]
"""What the wide processes' fork server imports once (never CUDA, never a target): the harness
and what a target host imports before the target (``base/target_host.main``)."""


def wide_context(device: str) -> Any:
    """The wide processes' context: on CUDA forks of a fork server that imported
    :data:`WIDE_PRELOAD` (their targets then forked from them: :func:`forked_hosts`);
    on CPU forks of this process (their hosts come from the sandboxed fork server)."""
    if device not in WATCHDOG_SECONDS:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cpu":
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WIDE_PRELOAD)
    return context


def forked_hosts(device: str) -> bool:
    """Whether a wide process of :func:`wide_context` forks its target's process from itself (CUDA)."""
    return device == "cuda"
