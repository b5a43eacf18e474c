"""The throughput benchmark runs as the GPU script runs it: ``python3 -P``
from another directory (its sibling ``provenance`` module must still import)."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_throughput.py"


def test_benchmark_runs_under_python_dash_p(tmp_path: Path) -> None:
    (tmp_path / "prof").mkdir()
    done = subprocess.run(
        [sys.executable, "-P", str(SCRIPT), "--device", "cpu", "--rows", "2", "--steps", "1",
         "--jobs", "1", "--stateful-examples", "1", "--stateful-steps", "4", "--systems", "1", "2",
         "--profile", "prof"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["commit"] != ""
    assert out["wide"]["request_steps"] == 2 and out["wide"]["discrepancies"] == 0
    split = out["wide"]["time_split"]
    assert set(split) == {"spawn", "imports", "start_up", "steps", "tail"} and min(split.values()) > -0.05, split
    assert set(out["wide"]["step_parts"]) == {"decisions", "spec", "kernels", "compare", "refinement"}
    assert "wide_0" in (tmp_path / "prof" / "wide_profile.txt").read_text()
    assert "run_worker" in (tmp_path / "prof" / "worker_profile.txt").read_text()
    for k in ("1", "2"):
        run = out["stateful"][k]["runs"][0]
        assert run["passed"] or run["missing_scenarios"], run  # a finding would fail this
        assert run["findings"] == 0 and run["examples"] >= 32
        assert {"request_steps", "request_steps_per_s", "busy_request_steps_per_s", "seconds", "cpu_seconds",
                "kernel_seconds", "spec_seconds"} <= set(run)  # counts may be 0: one example per combination
        assert "cpu_seconds_per_request_step" in out["stateful"][k]
        split = run["time_split"]  # the one worker's wall time, start-up + busy + tail
        (worker,) = split["workers"]
        assert run["cpu_seconds"] > 0  # the worker's own CPU, reported by it
        assert abs(worker["start_up"] + worker["busy"] + worker["tail"] - split["wall"]) < 0.01, split
    assert "over_one_system" in out["stateful"]["2"]  # None here: one example per combination only admits


def test_benchmark_rejects_bad_option_with_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-P", str(SCRIPT), "--rows", "0"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--rows must be >= 1" in done.stderr
    done = subprocess.run([sys.executable, "-P", str(SCRIPT), "--systems", "1", "257"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--systems must be in [1, 256]" in done.stderr


TREES = SCRIPT.parents[1] / "scripts" / "gpu_throughput_trees.sh"


def test_the_two_tree_gpu_script_refuses_bad_input_before_any_work(tmp_path: Path) -> None:
    """Exit 2 with the argument named, before the bundle is unpacked (no GPU needed to get that far)."""
    cases = [([], "usage: bash scripts/gpu_throughput_trees.sh LOGDIR BEFORE [ROUNDS]"),
             ([str(tmp_path / "log"), str(tmp_path)], f"BEFORE {tmp_path}: not a tree"),
             ([str(tmp_path / "log"), str(SCRIPT.parents[1]), "0"], "ROUNDS must be an int >= 1, got 0")]
    for argv, message in cases:
        done = subprocess.run(["bash", str(TREES), *argv], cwd=SCRIPT.parents[1], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and message in done.stderr, (argv, done.stderr)
        assert not (tmp_path / "log").exists(), "work started before the arguments were checked"


def test_the_time_split_gpu_script_refuses_bad_input_before_any_work(tmp_path: Path) -> None:
    script = SCRIPT.parents[1] / "scripts" / "gpu_time_split.sh"
    done = subprocess.run(["bash", str(script)], cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage: bash scripts/gpu_time_split.sh LOGDIR" in done.stderr
