"""The wide runner's start: its target begins to load before the harness is imported.

A wide process (``benchmarks/fuzz_throughput.py``'s pool, one fresh interpreter
each on CUDA) spent 63% of its wall time starting (``docs/gpu.md``,
2026-12-06): importing the harness (torch, the spec, :mod:`.wide`: 2.7 s on
the H100 machine) and then loading the target in an interpreter of its own
(3.8 s: that interpreter's imports, the target's, its CUDA context). The two
need not wait for each other. :func:`run_started` starts the target's load
first, in a thread (this module imports neither torch nor the harness: only
:mod:`.target` and ``base/isolation.py``), then imports the harness and makes
this process's CUDA context while the target's process loads, and hands the
pending target to :func:`.wide.run_wide`.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

WATCHDOG_SECONDS = {"cpu": 120.0, "cuda": 300.0}
"""A wide launch's watchdog by device (many rows per launch under the interpreter on CPU)."""


THREAD = "wide-target"
"""The name of the thread that starts the target's process."""


def start_target(impl: str | None, device: str, watchdog: float | None = None) -> Future:
    """The target ``impl`` loading in its own process (:func:`.target.load_target`),
    from a thread of this one; its launches under ``watchdog`` seconds (None:
    :data:`WATCHDOG_SECONDS`). The future's result is the loaded target, or the
    exception its load raised. The thread lives as long as this process: a CUDA
    target's process dies with the thread that started it (``base/target_host.py``
    sets ``PR_SET_PDEATHSIG``, which Linux fires when that *thread* ends: on the
    H100, 2026-12-06, every launch of a target started from a pool thread that had
    finished was a SIGKILL)."""
    from .target import load_target

    if device not in WATCHDOG_SECONDS:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    future: Future = Future()

    def body() -> None:
        try:
            future.set_result(load_target(impl, cuda=device == "cuda",
                                          launch_seconds=watchdog or WATCHDOG_SECONDS[device]))
        except BaseException as e:  # noqa: BLE001 - the load's own error, raised by future.result()
            future.set_exception(e)
            return
        threading.Event().wait()  # never set: the target's process lives as long as this thread

    threading.Thread(target=body, name=THREAD, daemon=True).start()
    return future


def close_pending(target: Future) -> None:
    """End a pending target's process once it has loaded (nothing if its load failed)."""
    try:
        module = target.result()
    except BaseException:  # noqa: BLE001 - its load failed: there is no process to end
        return
    module.close()


def run_started(impl: str | None, device: str, rows: int, steps: int, seed: int = 0,
                watchdog: float | None = None) -> tuple[Any, float]:
    """:func:`.wide.run_wide` with the target's load started before the harness's
    imports; the result and the seconds those imports took in this thread."""
    pending = start_target(impl, device, watchdog)
    t0 = time.perf_counter()
    try:
        from .wide import run_wide
    except BaseException:
        close_pending(pending)
        raise
    imported = time.perf_counter() - t0
    return run_wide(impl, device, rows, steps, seed, watchdog, target=pending), imported
