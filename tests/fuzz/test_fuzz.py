"""The fuzzer: a CI campaign that must pass and reach every scenario class, and
its teeth: a planted bug in a copy of the implementation is found, shrunk,
saved, and the saved trace replays the failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.fuzz.actions import Migrate, Postprocess, SetState, action_from_json, action_to_json
from replayssm.base.traces import load_trace
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import PROFILES, CampaignConfig, SetupError
from replayssm.fuzz.launch_traces import replayable, spec_states, trace_actions
from replayssm.fuzz.replay import replay
from replayssm.fuzz.system_traces import launch_trace
from replayssm.fuzz.target import DEFAULT_TARGET

REPO = Path(__file__).resolve().parents[2]


def test_ci_campaign_passes_and_reaches_every_scenario(tmp_path: Path, impl_target: str | None,
                                                       campaign_report) -> None:
    profile = PROFILES["ci"]
    result = run_campaign(CampaignConfig(impl_target, "cpu", profile["examples"], profile["max_steps"],
                                         seed=0, jobs=2, failures_dir=str(tmp_path)), out=campaign_report)
    assert result["failures"] == []
    assert result["missing_scenarios"] == []
    assert result["passed"]


def test_context_level_campaign_passes(tmp_path: Path, impl_target: str | None) -> None:
    result = run_campaign(CampaignConfig(impl_target, "cpu", 64, 8, seed=1, jobs=2,
                                         failures_dir=str(tmp_path), level="context"))
    assert result["failures"] == []
    assert result["request_steps"] > 0


def test_planted_bug_is_found_shrunk_saved_and_replayed(tmp_path: Path, mutant) -> None:
    target = mutant("% RING_BUFFER_LEN", "& (RING_BUFFER_LEN - 1)")
    result = run_campaign(CampaignConfig(target, "cpu", 64, 12, seed=0, jobs=1, failures_dir=str(tmp_path),
                                         shrink_seconds=120))
    assert not result["passed"]
    assert result["failures"], "the fuzzer missed a bit mask on a non-power-of-two ring"
    trace = json.loads(Path(result["failures"][0]).read_text())
    assert trace["#meta"]["source"] == "fuzz" and trace["actions"]
    assert [action_to_json(a) for a in trace_actions(trace)] == trace["actions"], "the JSON round trip lost something"
    assert len(trace["actions"]) <= 12, "the failure was not shrunk to a short trace"
    ok, report = replay(result["failures"][0], target, "cpu")
    assert not ok and "discrepancy reproduced" in report
    ok, report = replay(result["failures"][0], DEFAULT_TARGET, "cpu")
    assert ok, "the trace must pass on the correct implementation"
    ok, report = replay(result["failures"][0], target, "cpu", level="context")
    assert not ok, "the context level must reproduce the kernel-level failure too"


def test_proof_counterexample_traces_replay_against_implementations(mutant) -> None:
    """A system trace (a proof counterexample) replays as kernel launches: it
    agrees with the correct implementation and exposes a planted bug."""
    trace = str(REPO / "docs" / "traces" / "live_col_is_last_block.json")
    ok, report = replay(trace, None, "cpu")
    assert ok, report
    target = mutant("tl.store(num_committed + dst_slot, 0, mask=materialize)",
                    "tl.store(num_committed + dst_slot, 1, mask=materialize)")
    ok, report = replay(trace, target, "cpu")
    assert not ok and "num_committed" in report


def test_a_trace_saved_for_a_broken_invariant_replays_saying_so(tmp_path: Path) -> None:
    """Replay compares launches only: a trace the fuzzer saved for a broken
    invariant of the spec passes on a correct implementation, and the report
    says what the trace was saved for."""
    trace = launch_trace(json.loads((REPO / "docs" / "traces" / "row_nonempty.json").read_text()))
    trace["#meta"].update(source="fuzz", failure="invariant", error="planted: no_token_dropped")
    path = tmp_path / "invariant.json"
    path.write_text(json.dumps(trace))
    ok, report = replay(str(path), None, "cpu")
    assert ok and "saved for a broken invariant" in report and "planted: no_token_dropped" in report, report


def test_set_up_errors_are_reported_not_saved_as_findings(tmp_path: Path) -> None:
    """A target without the context level's entry point, or a CUDA campaign
    without CUDA, is a ``SetupError`` before any run; no trace is written."""
    fake = tmp_path / "kernels_only.py"
    fake.write_text("_postprocess_replayssm_kernel = _compact_replayssm_requests_kernel = "
                    "_reset_new_replayssm_slots_kernel = None\n")
    failures = tmp_path / "failures"
    config = CampaignConfig(str(fake), "cpu", 32, 4, seed=0, jobs=1, failures_dir=str(failures), level="context")
    with pytest.raises(SetupError, match="ReplaySSMModelContext"):
        run_campaign(config)
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SetupError, match="--device cuda"):
            run_campaign(CampaignConfig(None, "cuda", 32, 4, seed=0, jobs=1, failures_dir=str(failures)))
        with pytest.raises(SetupError, match="--device cuda"):  # replay: a set-up error too, not a finding
            replay(str(REPO / "docs" / "traces" / "row_nonempty.json"), None, "cuda")
    with pytest.raises(SetupError, match="--device must be cpu or cuda, got 'gpu'"):
        run_campaign(CampaignConfig(None, "gpu", 32, 4, seed=0, jobs=1, failures_dir=str(failures)))
    with pytest.raises(SetupError, match=r"--jobs must be in \[1, 32\]"):
        run_campaign(CampaignConfig(None, "cpu", 32, 4, seed=0, jobs=0, failures_dir=str(failures)))
    with pytest.raises(SetupError, match="seed must be an int >= 0, got -1"):
        run_campaign(CampaignConfig(None, "cpu", 32, 4, seed=-1, jobs=1, failures_dir=str(failures)))
    assert not failures.exists()


@pytest.mark.parametrize("content", ['{"params": null, "actions": []}', '[1, 2]', '{"params": {}',
                                     '{"#meta": "x", "params": {}, "actions": []}',
                                     '{"params": {}, "actions": [{"name": "step", "caller": 3}]}'])
def test_replay_rejects_unreplayable_traces(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="trace"):
        replay(str(path), None, "cpu")


def test_launch_actions_round_trip_through_json() -> None:
    """Every launch action of the system traces in docs/traces reads back as a
    record that writes the same JSON; the records run on the spec."""
    for path in sorted((REPO / "docs" / "traces").glob("*.json")):
        if path.name.endswith(".release-trace.json"):  # review --vllm's (tests/review/test_release_review.py)
            continue
        trace = replayable(load_trace(path))
        actions = trace_actions(trace)
        assert {type(a) for a in actions} <= {SetState, Migrate, Postprocess} and actions, path.name
        assert [action_to_json(a) for a in actions] == trace["actions"], path.name
        assert all(action_from_json(action_to_json(a)) == a for a in actions), path.name
        assert len(spec_states(trace)) == len(actions)


@pytest.mark.parametrize("action, message", [
    ({"name": "launch", "picks": {}}, r"trace\.actions\[0\]\.name must be one of block_copy, set_state, migrate, "
                                      r"postprocess, got 'launch'"),
    ({"name": "migrate", "picks": {"num_reqs": 1}}, r"missing picks 'idx_mapping', 'src_cols'.*a migrate action has"),
    ({"name": "block_copy", "picks": {"copies": [[0, 1]]}}, r"copies\[0\] must be \[group, src, dst\]"),
    ({"name": "set_state", "picks": {"ring_starts": [0]}}, r"unknown buffer 'ring_starts'; set_state sets ring_start"),
    ({"name": "postprocess", "picks": {"num_reqs": 1, "idx_mapping": None, "query_metadata": [1],
                                       "num_computed_tokens": [0], "num_accepted_tokens": [1],
                                       "is_prefilling": [True], "live_cols": [0], "block_table": [[[1, "2"]]]}},
     r"trace\.actions\[0\]\.picks\.block_table\[0\]\[0\]\[1\] must be an int, got '2'"),
])
def test_a_malformed_action_is_named_by_its_field(tmp_path: Path, action: dict, message: str) -> None:
    trace = json.loads((REPO / "docs" / "traces" / "row_nonempty.json").read_text())
    launches = launch_trace(trace)
    launches["actions"][0] = action
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(launches))
    with pytest.raises(ValueError, match=message):
        replay(str(path), None, "cpu")


CRASHING_TARGET = """
from replayssm.impl import replayssm_utils as _real

_postprocess_replayssm_kernel = _real._postprocess_replayssm_kernel
_compact_replayssm_requests_kernel = _real._compact_replayssm_requests_kernel


class _Crashes:
    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            raise RuntimeError("planted crash in the migration kernel")
        return launch


_reset_new_replayssm_slots_kernel = _Crashes()
"""


def test_an_implementation_crash_is_saved_and_replayed_as_a_failure(tmp_path: Path) -> None:
    target = tmp_path / "crashing_target.py"
    target.write_text(CRASHING_TARGET)
    result = run_campaign(CampaignConfig(str(target), "cpu", 128, 12, seed=0, jobs=1, failures_dir=str(tmp_path)))
    assert not result["passed"] and len(result["failures"]) == 1
    meta = json.loads(Path(result["failures"][0]).read_text())["#meta"]
    assert meta["failure"] == "exception" and "planted crash" in meta["error"]
    ok, report = replay(result["failures"][0], str(target), "cpu")
    assert not ok and "the target raised RuntimeError: planted crash" in report, report
    ok, report = replay(result["failures"][0], DEFAULT_TARGET, "cpu")  # the real implementation does not crash
    assert ok and "the implementation did not raise here" in report, report
