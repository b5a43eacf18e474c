"""The numeric fuzz layer (``fuzz/numeric.py``) on CPU with the torch forward:
campaigns pass within the derived bound for each state dtype, and the three
planted numeric-only faults are each caught by the numbers alone (the integer
buffers still agree with the spec)."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import signal
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest
import torch

from fuzz_processes import alive, descendants, interrupt_at
from replayssm.cli import build_parser, main
from replayssm.fuzz import numeric, numeric_campaign
from replayssm.fuzz.numeric import PLANTS, Budget, NumericMachine
from replayssm.fuzz.numeric_campaign import NumericConfig, run_numeric
from replayssm.fuzz.numeric_math import CPU_DIMS, SIZINGS, Sizing, Tokens, TokenStreams, prefill, replay, replay_exact
from replayssm.spec.geometry import Conventions

ALIGN = [c for c in Conventions.all() if c.materialize_prefixes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_numeric_campaign_stays_within_the_bound(dtype: torch.dtype) -> None:
    dims = dataclasses.replace(CPU_DIMS, state_dtype=dtype)
    conventions = [ALIGN[0], ALIGN[-1], [c for c in Conventions.all() if not c.materialize_prefixes][0]]
    result = run_numeric(NumericConfig(None, "cpu", 36, 10, seed=4, sizing=Sizing(dims)), conventions)
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
    # The truth (asked out of order, so that it is advanced from cached positions) is the token-by-token recurrence.
    recurrence = [torch.zeros(2, 4, 4, dtype=torch.float64)]
    for n in range(1, 13):
        t = streams.tokens(0, 0, n, 1)
        b = t.B[0].double().repeat_interleave(hpg, dim=0)
        recurrence.append(recurrence[-1] * torch.exp(a.double() * t.dt[0].double())[:, None, None]
                          + t.dt[0].double()[:, None, None] * t.x[0].double()[:, :, None] * b[:, None, :])
    for n in (5, 12, 3, 7, 12, 1):
        assert torch.allclose(streams.truth(0, 0, n), recurrence[n], rtol=1e-12, atol=1e-12)
    states, bounds = prefill(torch.zeros(2, 4, 4), streams.tokens(0, 0, 1, 5), a, hpg, torch.float32,
                             torch.zeros(2, 4, 4, dtype=torch.float64))
    for n, (s, b) in enumerate(zip(states, bounds), start=1):
        assert ((s.double() - recurrence[n]).abs() <= b).all()
    replayed, added = replay(states[-1], streams.tokens(0, 0, 6, 7), a, hpg, torch.bfloat16)
    assert ((replayed.double() - recurrence[12]).abs() <= bounds[-1] + added).all()
    exact = replay_exact(recurrence[5], streams.tokens(0, 0, 6, 7), a, hpg)
    assert torch.allclose(exact, recurrence[12], rtol=1e-12, atol=1e-12)
    # Teeth of the bound itself: a replay one row short is far outside it.
    short, _ = replay(states[-1], streams.tokens(0, 0, 6, 6), a, hpg, torch.bfloat16)
    assert ((short.double() - recurrence[12]).abs() > bounds[-1] + added).any()


class _Clock:
    """A ``time`` for the campaign's budget that advances ``step`` seconds at every reading: the
    budget runs out after a number of readings, not of seconds, whatever the machine's load."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


def test_budget_stops_a_realistic_campaign_with_its_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer's dims (window 16, <= 2 + 1 layers) with the torch forward on
    CPU: the budget cuts every combination at its share, the summary counts
    what ran and the progress lines and partial summaries came out. The
    budget's clock is one that advances at each reading (a loaded machine
    once let the first combination's last step overrun the whole budget)."""
    clock = _Clock(0.25)
    for module in (numeric, numeric_campaign):
        monkeypatch.setattr(module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    lines, reports = io.StringIO(), []
    config = NumericConfig(None, "cpu", 10_000, 8, seed=1, sizing=SIZINGS["realistic"], seconds=8)
    result = run_numeric(config, ALIGN[:2], progress=lines, report=reports.append)
    assert result["failure"] is None, result["failure"]
    assert result["finished"] and result["stopped"] == "budget" and result["combinations_cut_by_budget"] == 2
    assert result["request_steps"] > 0 and result["checks"] > 0 and 0 < result["worst_error_over_bound"] <= 1
    assert result["dims"] == [6, 64, 128, 2] and result["geometries"] == [[8, 16, 20], [16, 16, 20]]
    assert "combination 2/2" in lines.getvalue() and reports and not reports[-1]["finished"]


def test_a_failing_flashinfer_set_up_is_a_set_up_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuses(*args, **kwargs) -> None:
        raise AssertionError("A.stride(0) must be 1, got 8192")

    fake = types.ModuleType("flashinfer.mamba")
    fake.checkpointing_ssu = refuses
    monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
    monkeypatch.setitem(sys.modules, "flashinfer.mamba", fake)
    with pytest.raises(ValueError, match="checkpointing_ssu failed on scratch inputs: AssertionError: A.stride"):
        run_numeric(NumericConfig(None, "cpu", 4, 4, seed=0, forward="flashinfer"), ALIGN[:1])


def test_a_finding_survives_the_budget_running_out_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline passes as the plant is caught: Hypothesis's replay of the
    failing example must still run to the finding (a stop there reads as a
    flaky test), and the campaign reports it."""
    found = NumericMachine._fail

    def fail_then_spend_the_budget(self, message: str, kind: str = "invariant") -> None:
        self.budget.deadline = 0.0
        found(self, message, kind)

    monkeypatch.setattr(NumericMachine, "_fail", fail_then_spend_the_budget)
    config = NumericConfig(None, "cpu", 64, 12, seed=2, plant="plan one row short", shrink=False, seconds=600)
    result = run_numeric(config, ALIGN[:4])
    assert (result["failure"] or "").startswith("numeric: numeric check failed"), result["failure"]


def _stop_from_tick(k: int) -> Callable[[Budget], None]:
    """A budget check that finds the budget spent from its ``k``-th call on
    (outside Hypothesis's replay of a failing example), whatever the clock says."""
    calls = itertools.count(1)

    def tick(self: Budget) -> None:
        if next(calls) >= k and not numeric._final_replay():
            raise numeric.BudgetSpent

    return tick


@pytest.mark.parametrize("k", [130, 190])
def test_a_budget_stop_mid_way_is_a_result(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped mid-example after dozens of examples (where Hypothesis runs
    prefixes it explored before): the counts, no failure."""
    monkeypatch.setattr(Budget, "tick", _stop_from_tick(k))
    result = run_numeric(NumericConfig(None, "cpu", 200, 12, seed=0, seconds=1000), ALIGN[:1])
    assert result["finished"] and result["stopped"] == "budget" and result["failure"] is None, result["failure"]
    assert result["combinations_cut_by_budget"] == 1 and result["examples"] > 20 and result["checks"] > 0


def test_cli_budget_stop_exits_0_with_the_counts(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Budget, "tick", _stop_from_tick(130))  # then at once in every later combination
    summary, junit = tmp_path / "numeric.json", tmp_path / "numeric.xml"
    assert main(["fuzz", "--numeric", "--examples", "6400", "--max-steps", "12", "--numeric-seconds", "1000",
                 "--json", str(summary), "--junit", str(junit)]) == 0
    assert junit.read_text().count("<testcase ") == 1 and "<failure" not in junit.read_text()
    result = json.loads(summary.read_text())
    assert result["finished"] and result["stopped"] == "budget" and result["failure"] is None
    assert result["combinations_cut_by_budget"] == 32 and result["request_steps"] > 0 and result["checks"] > 0
    assert list(result)[0] == "schema" and result["schema"] == numeric_campaign.NUMERIC_SCHEMA
    assert set(result) == documented_numeric_fields(), "docs/fuzz.md's numeric summary table and the summary differ"


def documented_numeric_fields() -> set[str]:
    """The fields docs/fuzz.md's table of the numeric summary names."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "fuzz.md").read_text()
    table = text.split("schema `replayssm-fuzz-numeric/1`", 1)[1].split("\n\n", 2)[1]
    return {name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split(" | ")[0])}


def test_teeth_a_plain_exception_as_the_budget_stop_reads_as_flaky(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the stop being a KeyboardInterrupt avoids: a BaseException at the
    same point is recorded by Hypothesis as the run's end, and the run reads as
    flaky data generation (so the test above exercises that point)."""
    class PlainStop(BaseException):
        pass

    monkeypatch.setattr(numeric, "BudgetSpent", PlainStop)
    monkeypatch.setattr(numeric_campaign, "BudgetSpent", PlainStop)
    monkeypatch.setattr(Budget, "tick", _stop_from_tick(150))
    result = run_numeric(NumericConfig(None, "cpu", 200, 12, seed=0, seconds=1000), ALIGN[:1])
    assert (result["failure"] or "").startswith("error: FlakyStrategyDefinition"), result["failure"]


def test_cli_numeric_options() -> None:
    parser = build_parser()
    plant = next(a for a in parser._subparsers._group_actions[0].choices["fuzz"]._actions
                 if a.dest == "numeric_plant")
    assert tuple(plant.choices) == PLANTS
    assert main(["fuzz", "--numeric", "--numeric-seconds", "0"]) == 2
    assert main(["fuzz", "--numeric", "--numeric-forward", "flashinfer"]) == 2


def _checkpointing_ssu_stand_in(state, x_cache, B_cache, dt_cache, ring_start, committed, x, dt, A, B, C, out, *,
                                state_batch_indices, pad_slot_id, cu_seqlens, max_seqlen, algorithm) -> None:
    """The decode kernel's contract in torch, with FlashInfer's argument list
    (one varlen row): fold the committed rows when ``committed + T > W``, append the T rows."""
    assert A.stride(0) == 1, f"A.stride(0) must be 1, got {A.stride(0)}"  # FlashInfer's check, seen on the H200
    slot, q, ring = int(state_batch_indices[0]), int(cu_seqlens[1]), x_cache.shape[2]
    start, count, hpg = int(ring_start[slot]), int(committed[slot]), state.shape[1] // B_cache.shape[1]
    if count + q > ring - max_seqlen:
        rows = [(start + k) % ring for k in range(count)]
        held = Tokens(x_cache[slot][:, rows].transpose(0, 1).float(), B_cache[slot][:, rows].transpose(0, 1).float(),
                      dt_cache[slot][:, rows].transpose(0, 1))
        state[slot] = replay(state[slot], held, A[:, 0, 0], hpg, state.dtype)[0]
    rows = [(start + count + k) % ring for k in range(q)]
    x_cache[slot][:, rows] = x[0].transpose(0, 1)
    dt_cache[slot][:, rows] = dt[0, :, :, 0].transpose(0, 1)
    B_cache[slot][:, rows] = B[0].transpose(0, 1)


@pytest.mark.parametrize("plant", [None, "dropped checkpoint"])
def test_flashinfer_forward_path_with_a_torch_stand_in(plant: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA path's plumbing (the call, the bound of its fold, the planted
    drop that puts the folded state back) on CPU, FlashInfer's kernel replaced
    by its contract: within the bound, and the drop caught."""
    fake = types.ModuleType("flashinfer.mamba")
    fake.checkpointing_ssu = _checkpointing_ssu_stand_in
    monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
    monkeypatch.setitem(sys.modules, "flashinfer.mamba", fake)
    none = [c for c in Conventions.all() if not c.materialize_prefixes]
    config = NumericConfig(None, "cpu", 24, 12, seed=3, plant=plant, shrink=False, forward="flashinfer")
    result = run_numeric(config, [none[0], ALIGN[1]])
    assert result["forwards"].get("checkpoint", 0) > 0 and result["flashinfer_ready_seconds"] is not None
    if plant is None:
        assert result["failure"] is None, result["failure"]
        assert 0 < result["worst_error_over_bound"] <= 1
    else:
        assert (result["failure"] or "").startswith("numeric: numeric check failed"), result["failure"]


@pytest.mark.parametrize("args", [["--numeric-seconds", "-1"], ["--state-dtype", "bfloat16"],
                                  ["--numeric-plant", "dropped checkpoint"], ["--numeric-dims", "small"]])
def test_numeric_options_without_numeric_are_refused(args: list[str], capsys: pytest.CaptureFixture) -> None:
    """They used to be ignored silently (a full campaign ran without the numeric layer)."""
    assert main(["fuzz", *args]) == 2
    assert "only apply with --numeric" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_numeric_seconds_must_be_finite(value: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["fuzz", "--numeric", "--numeric-seconds", value]) == 2
    assert "--numeric-seconds must be a number of seconds > 0" in capsys.readouterr().err


def test_an_error_raised_in_place_of_the_interrupt_is_the_interrupt(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that lands in Hypothesis's bookkeeping of the second combination: the engine, cut
    short, fails an internal ``assert`` in the interrupt's place (seen as a flaky ``error: AssertionError``
    finding with exit 1 when the test below signalled at such a moment). The run is interrupted, not
    failed: exit 143, the partial JSON with no finding."""
    real, calls = numeric_campaign.run_state_machine_as_test, []

    def interrupted_in_bookkeeping(*args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            return real(*args, **kwargs)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            raise AssertionError() from None  # what Hypothesis's engine raised instead

    monkeypatch.setattr(numeric_campaign, "run_state_machine_as_test", interrupted_in_bookkeeping)
    path = tmp_path / "n.json"
    assert main(["fuzz", "--numeric", "--numeric-seconds", "300", "--json", str(path)]) == 143
    summary = json.loads(path.read_text())
    assert summary["interrupted"] and summary["stopped"] == "interrupted" and summary["failure"] is None, summary
    assert summary["combinations"] == 1 and summary["examples"] > 0, summary


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_numeric_campaign_writes_its_partial_reports(tmp_path: Path, signum: int, code: int) -> None:
    """SIGINT or SIGTERM during ``fuzz --numeric``: the partial summary is
    printed, the JSON says ``interrupted`` with what was done, the JUnit file
    has its ``interrupted`` case, the target's process is ended, and the exit
    status is the signal's."""
    path, junit = tmp_path / "n.json", tmp_path / "n.xml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "replayssm.cli", "fuzz", "--numeric", "--numeric-seconds", "300", "--json", str(path),
         "--junit", str(junit)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    text, hosts = interrupt_at(proc, "combination 2/", signum, timeout=60, watch=descendants)
    assert proc.returncode == code, text
    assert f"INTERRUPTED by {signal.Signals(signum).name} (partial summary)" in text, text
    summary = json.loads(path.read_text())
    assert summary["interrupted"] and summary["stopped"] == "interrupted" and summary["combinations"] >= 1, summary
    assert summary["examples"] > 0 and summary["failure"] is None, summary
    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    assert [c.get("name") for c in cases][1:] == ["interrupted"] and cases[0].find("failure") is None, text
    assert cases[0].find("error") is None, "an interrupted run is not 'nothing checked'"
    assert hosts and not [p for p in hosts if alive(p)], "the target's process survived the interrupt"
