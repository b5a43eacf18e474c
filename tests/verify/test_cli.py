"""The command line: prove's report and JSON, and its errors for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replayssm.cli import main


def test_prove_reports_each_obligation_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "r.json"
    assert main(["prove", "--only", "boundary.", "--jobs", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "boundary.exact" in text and "4/4 obligations proved" in text
    report = json.loads(out.read_text())
    assert {o["name"] for o in report["obligations"]} >= {"boundary.exact", "boundary.prefill_exact"}
    assert all(o["status"] == "proved" and o["assumptions"] is not None and o["seconds"] >= 0
               for o in report["obligations"])
    assert report["seconds"] > 0


def test_prove_fails_and_saves_a_counterexample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    import replayssm.spec.boundary as boundary
    from replayssm.spec.vocab import cdiv

    def off_by_one(running_pos, new_computed, block_size):
        aligned = cdiv(new_computed, block_size) * block_size
        return boundary.Boundary(aligned > running_pos, aligned - running_pos, cdiv(aligned, block_size) - 1, aligned)

    monkeypatch.setattr("replayssm.verify.boundary_proofs.mamba_state_copy_boundary", off_by_one)
    status = main(["prove", "--only", "boundary.exact", "--jobs", "1", "--counterexamples", str(tmp_path)])
    assert status == 1
    assert "failed" in capsys.readouterr().out
    saved = json.loads((tmp_path / "boundary.exact.json").read_text())
    assert saved["obligation"] == "boundary.exact" and saved["values"]


def test_list_and_bad_input(capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--list", "--only", "compaction.work_list"]) == 0
    assert "FlashInfer's work-list contract" in capsys.readouterr().out
    assert main(["prove", "--only", "no.such.obligation"]) == 2
    assert "matches no obligation" in capsys.readouterr().err
    assert main(["prove", "--jobs", "0"]) == 2
    assert "--jobs must be in [1, 256], got 0" in capsys.readouterr().err
    assert main(["fuzz", "--jobs", "0"]) == 2
    assert "--jobs must be in [1, 32]" in capsys.readouterr().err
    assert main(["fuzz", "--examples", "0"]) == 2
    assert "--examples must be >= 1" in capsys.readouterr().err
    assert main(["fuzz", "--impl", "/nonexistent/impl.py", "--examples", "1"]) == 2
    assert main(["replay", "/nonexistent/trace.json"]) == 2


def _trace() -> dict:
    from replayssm.verify import system_world as world
    from replayssm.base.system_traces import record_run

    p = world.system_params(world.SYSTEM_CONVENTIONS["v1-align"])
    return record_run(p, [("admit", {"req": 0, "stream": 0, "prompt": 3}),
                          ("step", {"rows": [{"sched": 1, "q": 2, "acc": 1, "live_col": 0, "is_prefilling": 1,
                                              "slot": [1, 1]}]})])


_DELETE = object()


def _set(d: dict, path: tuple, value) -> None:
    """Replace (or with ``_DELETE`` remove) the entry at ``path``."""
    for k in path[:-1]:
        d = d[k]
    if value is _DELETE:
        del d[path[-1]]
    else:
        d[path[-1]] = value


@pytest.mark.parametrize("path, value, message", [
    (("params", "geometry", "window"), 0, r"params\.geometry\.window must be in \[1, 16\], got 0"),
    (("params", "geometry", "ring_len"), 2, r"params\.geometry\.ring_len must be in \[3, inf\]"),
    (("params", "geometry", "pad_slot"), 3, r"params\.geometry\.pad_slot must be 0"),
    (("params", "geometry", "blocksize"), 2, r"params\.geometry\.blocksize is not a field"),
    (("params", "geometry", "block_size"), _DELETE, r"params\.geometry\.block_size is missing"),
    (("params", "conventions", "cumulative"), 1, r"params\.conventions\.cumulative must be true or false"),
    (("params", "layers"), [], r"params\.layers must be a non-empty tuple"),
    (("params", "layers"), [1, -1], r"params\.layers\[1\] must be in \[1, inf\]"),
    (("params", "layers"), 2, r"params\.layers must be a list"),
    (("params", "num_cols"), -1, r"params\.num_cols must be in \[1, inf\], got -1"),
    (("params", "num_slots"), 1, r"params\.num_slots must be in \[2, inf\], got 1"),
    (("params", "num_streams"), 0, r"params\.num_streams must be in \[1, inf\], got 0"),
    (("params", "num_streams"), _DELETE, r"params\.num_streams is missing"),
    (("params", "swap_rows"), False, r"params\.swap_rows is no longer a field: the batch order is no longer a "
                                    r"world parameter: each step picks its own \(picks\.order"),
    (("actions", 1, "picks", "order"), [0, 0], r"step: pick order must be a permutation of the requests 0\.\.1 "
                                               r"\(the batch order\), got \[0, 0\]"),
    (("params", "cache_mode"), "prefix", r"cache_mode must be one of none, align, all, got 'prefix'"),
    (("params",), None, r"params must be an object"),
    (("params",), _DELETE, r"no params"),
    (("states", 0, "N"), [0], r"states\[0\]\.N must be a list of 2 ints"),
    (("states",), [], r"states must be a non-empty list"),
    (("states", 1), "x", r"trace\.states\[1\] must be an object"),
    (("states", 2, "ring"), [0], r"trace\.states\[2\]\.ring must be a list of"),
    (("#meta",), "x", r"trace\.#meta must be an object, got 'x'"),
    (("actions", 1, "picks", "rows", 0, "q0"), 2, r"step: unknown pick 'rows\[0\]\.q0'"),
    (("actions", 0, "name"), "arrive", r"action must be one of admit, step, free, got 'arrive'"),
    (("actions", 1, "picks", "rows", 0, "q"), "2",
     r"trace\.actions\[1\]\.picks\.rows\[0\]\.q must be an int, got '2'"),
    (("actions", 0, "picks"), _DELETE, r"trace\.actions\[0\] must be an object with a name string and a picks"),
    (("actions",), {}, r"trace\.actions must be a list"),
])
def test_explain_reports_malformed_traces(tmp_path: Path, capsys: pytest.CaptureFixture, path, value,
                                          message) -> None:
    good = tmp_path / "good.json"
    trace = _trace()
    good.write_text(json.dumps(trace))
    assert main(["explain", str(good)]) == 0
    assert "step 2: step" in capsys.readouterr().out
    _set(trace, path, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(trace))
    assert main(["explain", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and re.search(message, err), err
