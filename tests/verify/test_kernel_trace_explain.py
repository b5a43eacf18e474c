"""``explain`` of a kernel-proof trace of a vLLM version's kernel (review's ``*.kernel-trace.json``):
drawn in vLLM's terms, ending with the ``replay`` command that runs the kernel on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.cli import main


def _trace(cumulative: bool) -> dict:
    launch = {"num_reqs": 2, "block_table": [[[4, 5], [6, 7], [0, 0]]],
              "query_metadata": [0, 3, 4] if cumulative else [3, 1], "idx_mapping": [1, 0, -1],
              "num_computed_tokens": [9, 16, 0], "num_accepted_tokens": [1, 0, 0], "is_prefilling": [False, True],
              "live_cols": [1, 0, 0], "dst_cols": [0, 0, 0]}
    return {"params": {"geometry": {"max_num_reqs": 3, "block_size": 16, "window": 4, "ring_len": 6, "pad_slot": 0},
                       "conventions": {"cumulative": cumulative, "post_step": cumulative, "has_idx_mapping": True,
                                       "materialize_prefixes": True, "live_col_is_zero": False},
                       "layers_per_group": [1], "num_cols": 2, "num_slots": 8},
            "actions": [{"name": "set_state", "caller": ["the memory before the launch"],
                         "picks": {"ring_start": [[0, 0, 0, 0, 2, 0, 5, 0]], "num_committed": [[0, 0, 0, 0, 3, 0, 1, 0]]}},
                        {"name": "launch", "caller": ["kernel proof counterexample"], "picks": launch}],
            "#meta": {"format": "replayssm-trace/2", "source": "kernel-proof", "obligation": "kernel.X.postprocess.int32@V",
                      "case": "c", "kernel": "_k", "role": "X.postprocess", "property": "int32", "impl": "my version.py"}}


@pytest.mark.parametrize("cumulative", [False, True])
def test_a_versions_kernel_trace_is_drawn_with_rows_trackers_and_the_replay_command(
        cumulative: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k.kernel-trace.json"
    path.write_text(json.dumps(_trace(cumulative)))
    assert main(["explain", str(path)]) == 0
    text = capsys.readouterr().out
    assert "int32 of _k (role X.postprocess, obligation kernel.X.postprocess.int32@V" in text
    assert "row 0: request 1, decode of 3 token(s), 16 computed, 0 accepted, live block-table column 0; group 0 blocks [6, 7]" in text
    assert "row 1: request 0, prefill of 1 token(s), 9 computed, 1 accepted, live block-table column 1; group 0 blocks [4, 5]" in text
    assert "group 0 block 4: [" in text and "ring_start=2 committed=3" in text and "block 6:" in text
    assert "block 1:" not in text  # zero trackers are left out
    assert text.rstrip().endswith(f"replayssm-verify replay {path} --impl 'my version.py'")  # shell-quoted


def test_teeth_a_reference_kernel_trace_still_takes_the_launch_drawing(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(False)
    trace["actions"][1]["name"] = "postprocess"
    path = tmp_path / "ref.kernel-trace.json"
    path.write_text(json.dumps(trace))
    main(["explain", str(path)])
    assert "kernel-proof counterexample:" not in capsys.readouterr().out
