"""The released vLLM 0.33.0's ReplaySSM numerically (``fuzz/release_numeric.py``), on CPU.

The release's Triton kernels run under Triton's interpreter in the target's
own process; FlashInfer (CUDA only) is stood in for by a float32 torch
reference of ``checkpointing_ssu``'s semantics, driven by the release's own
tracker kernels and wrapper. Each accepted configuration passes with every
output and state within its bound; each planted fault (a commit one token
short, a flush one step late) fails; a configuration 0.33.0 rejects, or bad
options, exit 2 before any work. The same campaigns on CUDA with FlashInfer:
``scripts/gpu_release_numeric.sh`` (``docs/gpu.md``).
"""

from __future__ import annotations

import json

import pytest
import torch
from script_modules import load

from replayssm.fuzz import release_numeric as rn
from replayssm.fuzz.release_numeric_math import (
    ReleaseStreams, advance_exact, dt_error, output_bound, output_truth, softplus64, state_bound,
)
from replayssm.fuzz.numeric_math import CPU_DIMS

pytestmark = pytest.mark.corpus

STAND_IN = "replayssm.fuzz.release_numeric_math:checkpointing_ssu_stand_in"


def _one(**kw) -> rn.ReleaseNumericOutcome:
    return rn.run([rn.ReleaseNumericConfig(**kw)])[0]


def test_triton_decode_of_the_release_keeps_every_output_and_state_within_its_bound() -> None:
    outcomes = rn.run([rn.ReleaseNumericConfig("triton", passes=24, buffer_len=4, seed=0),
                       rn.ReleaseNumericConfig("triton", passes=12, buffer_len=1, seed=2, state_dtype="float16")])
    for o in outcomes:
        assert o.failure is None, o.failure
        assert o.flushes > 0 and o.outputs > 0 and o.states > 0
        assert 0 < o.worst_output <= 1 and o.worst_state <= 1
        assert o.target_exit == 0 and o.release_calls > 0  # its process ended in order
    assert outcomes[0].events.get("prompt tail")


def test_align_mode_moves_requests_to_fresh_blocks_and_keeps_published_ones() -> None:
    o = _one(backend="triton", passes=24, buffer_len=4, cache_mode="align", block_size=8, seed=0)
    assert o.failure is None, o.failure
    assert o.events.get("align copy")


def test_a_flush_one_step_late_is_caught() -> None:
    o = _one(backend="triton", passes=24, buffer_len=4, seed=1, plant="flush one step late")
    assert o.failure is not None and "times its bound" in o.failure
    assert o.worst_output > 1000
    assert load("release_numeric_verdict").campaign_verdict(vars(o)) == "caught"  # as the GPU script judges it


@pytest.mark.parametrize("query_len,buffer_len", [(4, 16), (2, 4), (1, 4)])
def test_flashinfer_path_of_the_release_with_its_tracker_kernels(query_len: int, buffer_len: int) -> None:
    o = _one(backend="flashinfer", passes=20, query_len=query_len, buffer_len=buffer_len, stand_in=STAND_IN)
    assert o.failure is None, o.failure
    assert o.checkpoints > 0 and o.outputs > 0
    assert o.worst_output <= 1 and o.worst_state <= 1


def test_a_commit_one_token_short_is_caught() -> None:
    o = _one(backend="flashinfer", passes=20, query_len=3, buffer_len=6, plant="commit one token short",
             stand_in=STAND_IN)
    assert o.failure is not None and "times its bound" in o.failure
    assert load("release_numeric_verdict").campaign_verdict(vars(o)) == "caught"  # as the GPU script judges it


def test_the_bound_is_tight_enough_to_see_one_token_missing() -> None:
    """Teeth of the bound itself: a state one token behind its truth is far outside it."""
    s = ReleaseStreams(CPU_DIMS, 1, 1, 12, 0, torch.float32, "cpu")
    s0 = s.truth(0, 0, 4)
    e0 = torch.zeros_like(s0)
    data = s.slice(0, 0, 5, 3)
    bound = state_bound(s, 0, s0, e0, data, 2.0**-8, torch.float32)
    behind = s.truth(0, 0, 6)
    assert float(((behind - s.truth(0, 0, 7)).abs() / bound).max()) > 50
    y = output_truth(s, 0, s.truth(0, 0, 7), data)
    wrong = output_truth(s, 0, advance_exact(s, 0, s.truth(0, 0, 5), s.slice(0, 0, 7, 1)), data)
    assert float(((wrong - y).abs() / output_bound(s, 0, s0, e0, data, 0.0, 0.0, torch.float32, y)).max()) > 50


def test_dt_error_bounds_float32_softplus() -> None:
    v = torch.linspace(-3.0, 1.5, 2001, dtype=torch.float64)
    got = torch.nn.functional.softplus(v.float()).double()
    assert bool(((got - softplus64(v)).abs() <= dt_error(v)).all())


@pytest.mark.parametrize("args,message", [
    (["--backend", "triton", "--query-len", "2"], "speculative_needs_flashinfer"),
    (["--backend", "flashinfer", "--cache-mode", "align"], "flashinfer_without_prefix_caching"),
    (["--backend", "flashinfer", "--buffer-len", "17"], "flashinfer_window_at_most_16"),
    (["--backend", "flashinfer", "--query-len", "5", "--buffer-len", "4"], "speculative_window_covers_query"),
    (["--backend", "cuda-graphs"], "--backend must be one of triton, flashinfer"),
    (["--backend", "triton", "--state-dtype", "bfloat16"], "needs --device cuda"),
    (["--backend", "triton", "--plant", "nope"], "--plant must be one of"),
    (["--backend", "triton", "--passes", "0"], "--passes must be >= 1"),
])
def test_bad_or_rejected_configurations_exit_2_before_any_work(args, message, capsys) -> None:
    assert rn.main(args) == 2
    assert message in capsys.readouterr().err


def test_a_sweep_runs_what_the_release_accepts_and_names_what_it_rejects(capsys) -> None:
    assert rn.main(["--backend", "flashinfer", "--query-len", "1,2", "--buffer-len", "4", "--cache-mode",
                    "none,align", "--passes", "6", "--stand-in", STAND_IN]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summary = lines[-1]
    assert summary["campaigns"] == 2 and summary["failed"] == 0
    assert len(summary["rejected_by_0.33.0"]) == 2


def test_no_module_imports_the_release_target() -> None:
    """The release's files run in the target's process only: ``release_numeric_target`` is named, never imported."""
    import ast
    from pathlib import Path

    root = Path(rn.__file__).resolve().parents[1]
    found = []
    for package in ("spec", "base", "verify", "fuzz", "review", "replayssm", "impl"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    if any("release_numeric_target" in n for n in names):
                        found.append(f"{path}:{node.lineno}")
    assert found == []
    assert rn.TARGET == "replayssm.fuzz.release_numeric_target"
