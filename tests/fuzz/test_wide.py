"""The wide runner: its fixed caller and sizes, and its errors for bad input."""

from __future__ import annotations

import inspect

import pytest

from replayssm.fuzz import wide
from replayssm.fuzz.wide import WIDE_CONVENTIONS, run_wide


def test_wide_runner_models_one_caller_and_finds_no_discrepancy(impl_target: str | None) -> None:
    assert list(inspect.signature(run_wide).parameters) == ["impl", "device", "rows", "steps", "seed", "watchdog",
                                                           "forked"]
    assert WIDE_CONVENTIONS.materialize_prefixes  # its model of FlashInfer's view is align mode's
    r = run_wide(impl_target, "cpu", 3, 20, seed=1)
    assert (r.steps, r.request_steps, r.discrepancies) == (20, 60, 0)


def test_wide_runner_runs_prompt_tails_as_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows at a prompt tail (prior state, one prompt token left) run as a
    decode accepting the real token some of the time
    (``prompt_tail_runs_as_decode``), and the kernels agree with the spec there."""
    decisions, tails = wide.WideSystem._decisions, []

    def watched(system: wide.WideSystem):
        prefilling, q, accepted = decisions(system)
        tail = (system.computed < system.prompt) & ~prefilling
        assert (accepted[tail] == 1).all() and system.rule.is_tail(system.computed, system.prompt)[tail].all()
        tails.append(int(tail.sum()))
        return prefilling, q, accepted

    monkeypatch.setattr(wide.WideSystem, "_decisions", watched)
    assert run_wide(None, "cpu", 3, 20, seed=0).discrepancies == 0
    assert sum(tails) > 0


def test_wide_runner_catches_a_wrong_view_of_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: with the running position one past the step's end, the runner's
    view never publishes in place, and the trackers disagree with it."""
    monkeypatch.setattr(wide, "running_position", lambda prefilling, after, accepted: after + 1)
    assert run_wide(None, "cpu", 3, 20, seed=1).discrepancies > 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(rows=0), r"rows must be an int >= 1, got 0"),
    (dict(rows=2.0), r"rows must be an int >= 1"),
    (dict(steps=-1), r"steps must be an int >= 0, got -1"),
    (dict(device="gpu"), r"device must be 'cpu' or 'cuda', got 'gpu'"),
    (dict(seed=-1), r"seed must be an int >= 0, got -1"),
    (dict(watchdog=0), r"watchdog must be a number of seconds > 0, got 0"),
])
def test_wide_runner_rejects_bad_sizes(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        run_wide(**{"impl": None, "device": "cpu", "rows": 2, "steps": 1, **kwargs})


def test_a_wide_process_forked_from_the_harness_server_forks_its_target_and_verifies_the_same() -> None:
    """``wide_start``: a wide process forked from a fork server that imported
    :data:`WIDE_PRELOAD` (what CUDA uses), its target's process forked from it:
    the same steps and verdict as :func:`run_wide` with a target host of the
    usual kind (here the sandboxed fork server's)."""
    import functools
    import multiprocessing.forkserver
    from concurrent.futures import ProcessPoolExecutor

    from replayssm.fuzz.wide_start import WIDE_PRELOAD, forked_hosts

    assert forked_hosts("cuda") and not forked_hosts("cpu")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WIDE_PRELOAD)
    try:
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            r = pool.submit(functools.partial(run_wide, None, "cpu", 3, 12, seed=1, forked=True)).result()
    finally:
        multiprocessing.forkserver._forkserver._stop()
    plain = run_wide(None, "cpu", 3, 12, seed=1)
    assert (r.steps, r.request_steps, r.discrepancies, r.fault) == (plain.steps, plain.request_steps, 0, None)


@pytest.mark.parametrize("forked", [False, True])
def test_a_target_that_ends_its_process_in_a_wide_launch_is_the_run_s_fault(tmp_path, forked: bool) -> None:
    """The wide runner's target runs in a process of its own: a kernel that
    calls ``os._exit`` stops the run with that fault (it ended the runner before);
    also where that process is a fork of the runner's (``forked``: its exit status read here)."""
    from fuzz_processes import plant

    line = "    valid_req = req >= 0\n"
    target = plant(tmp_path, line, line + "    __import__('os')._exit(7)\n")
    r = run_wide(target, "cpu", 2, 3, seed=1, forked=forked)
    assert r.fault is not None and r.fault.startswith("crash: the target ended the process during launch 1 "
                                                      "(_reset_new_replayssm_slots_kernel): exit status 7"), r
    assert (r.steps, r.discrepancies) == (0, 0)


@pytest.mark.parametrize("forked", [False, True])
def test_a_forked_run_asks_torch_about_cuda_only_after_forking_its_target(monkeypatch, forked: bool) -> None:
    """Regression (H100, 2026-12-06): ``torch.cuda.is_available()`` before the host's fork made
    torch refuse CUDA in the host ("Cannot re-initialize CUDA in forked subprocess"). A forked run
    forks first; an unforked one still refuses a machine without CUDA before any work."""
    import torch

    from replayssm.base import forked_host

    calls: list[str] = []
    fork = forked_host.fork_host
    monkeypatch.setattr(forked_host, "fork_host", lambda *a: (calls.append("fork"), fork(*a))[1])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: (calls.append("is_available"), False)[1])
    with pytest.raises(ValueError, match="sees no CUDA device"):
        run_wide(None, "cuda", 2, 1, forked=forked)
    assert calls == (["fork", "is_available"] if forked else ["is_available"])
