"""The numeric fuzz layer (``fuzz/numeric.py``) on CPU with the torch forward:
campaigns pass within the derived bound for each state dtype, and the three
planted numeric-only faults are each caught by the numbers alone (the integer
buffers still agree with the spec)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from replayssm.fuzz.numeric import PLANTS, NumericConfig, run_numeric
from replayssm.fuzz.numeric_math import CPU_DIMS, TokenStreams, prefill, replay, replay_exact
from replayssm.spec.geometry import Conventions

ALIGN = [c for c in Conventions.all() if c.materialize_prefixes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_numeric_campaign_stays_within_the_bound(dtype: torch.dtype) -> None:
    dims = dataclasses.replace(CPU_DIMS, state_dtype=dtype)
    conventions = [ALIGN[0], ALIGN[-1], [c for c in Conventions.all() if not c.materialize_prefixes][0]]
    result = run_numeric(NumericConfig(None, "cpu", 36, 10, seed=4, dims=dims), conventions)
    assert result["failure"] is None, result["failure"]
    assert result["checks"] > 100 and result["forwards"].get("checkpoint", 0) > 0
    assert 0 < result["worst_error_over_bound"] <= 1


@pytest.mark.parametrize("plant", PLANTS)
def test_teeth_planted_numeric_fault_is_caught(plant: str) -> None:
    result = run_numeric(NumericConfig(None, "cpu", 64, 12, seed=2, plant=plant, shrink=False), ALIGN[:4])
    assert result["failure"] is not None, f"{plant} not caught"
    assert result["failure"].startswith("numeric: numeric check failed"), result["failure"]


def test_replay_and_prefill_agree_with_the_float64_truth_within_their_bounds() -> None:
    streams = TokenStreams(CPU_DIMS, 1, 1, 12, seed=9)
    a, hpg = streams.a[0], CPU_DIMS.heads_per_group
    states, bounds = prefill(torch.zeros(2, 4, 4), streams.tokens(0, 0, 1, 5), a, hpg, torch.float32,
                             torch.zeros(2, 4, 4, dtype=torch.float64))
    for n, (s, b) in enumerate(zip(states, bounds), start=1):
        assert ((s.double() - streams.truth[0, 0, n]).abs() <= b).all()
    replayed, added = replay(states[-1], streams.tokens(0, 0, 6, 7), a, hpg, torch.bfloat16)
    assert ((replayed.double() - streams.truth[0, 0, 12]).abs() <= bounds[-1] + added).all()
    exact = replay_exact(streams.truth[0, 0, 5], streams.tokens(0, 0, 6, 7), a, hpg)
    assert torch.allclose(exact, streams.truth[0, 0, 12], rtol=1e-12, atol=1e-12)
    # Teeth of the bound itself: a replay one row short is far outside it.
    short, _ = replay(states[-1], streams.tokens(0, 0, 6, 6), a, hpg, torch.bfloat16)
    assert ((short.double() - streams.truth[0, 0, 12]).abs() > bounds[-1] + added).any()
