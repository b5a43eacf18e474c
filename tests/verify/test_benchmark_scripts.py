"""The benchmark scripts start as the GPU scripts run them (``python3 -P`` from
another folder: their sibling ``provenance`` module must still import), and
``kernel_proof_times.py`` prints a table for people besides its JSON."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name != "provenance.py")


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_starts_under_python_dash_p(script: str, tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / script), "--help", cwd=tmp_path)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


@pytest.mark.parametrize("script", ["prove_times.py", "kernel_proof_times.py", "prove_cache.py", "ci_seeds.py",
                                    "guard_cost.py"])
def test_the_proof_benchmarks_check_their_options_under_python_dash_p(script: str, tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / script), "--jobs", "0", cwd=tmp_path)
    assert done.returncode == 2 and "--jobs must be >= 1, got 0" in done.stderr, done.stderr


@pytest.mark.parametrize("argv, message", [(["--repeat", "0"], "--repeat must be >= 1, got 0"),
                                           (["--python", "/nonexistent/python"], "--python '/nonexistent/python'")])
def test_bmc_times_checks_its_options_before_any_run(argv: list[str], message: str, tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / "bmc_times.py"), *argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "run 1/" not in done.stderr, done.stderr


def test_kernel_proof_times_prints_a_table_of_the_figures() -> None:
    spec = importlib.util.spec_from_file_location("kernel_proof_times", BENCHMARKS / "kernel_proof_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = json.loads((BENCHMARKS.parent / "docs" / "results" / "kernel_proof_times.json").read_text())
    report["per_variant_s"]["migration slow"] = 1.5  # one variant over its bound
    text = module.table(report)
    assert f"median {report['cold_median_s']:.2f} s wall" in text and "the 10 s bound" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("  ") and not line.split()[0] == "variant"]
    assert len(rows) == len(report["per_variant_s"])
    assert rows[0][:2] == ["migration", "slow"] and rows[0][-1] == "OVER"
    assert all(r[-1] == "within" for r in rows[1:])


@pytest.mark.parametrize("argv, message", [
    (["--tree", "before=/no/such/python", "--tree", f"after={sys.executable}"], "is not an executable interpreter"),
    (["--tree", f"after={sys.executable}"], "give --tree at least twice"),
    (["--tree", "before", "--tree", f"after={sys.executable}"], "give LABEL=PYTHON"),
    (["--tree", f"a={sys.executable}", "--tree", f"b={sys.executable}", "--repeat", "0"], "--repeat must be >= 1, got 0"),
    (["--tree", f"a={sys.executable}", "--tree", f"b={sys.executable}", "--only", "zzz-none"],
     "--only 'zzz-none' matches no obligation"),
])
def test_prove_before_after_checks_its_options_before_any_run(argv: list[str], message: str, tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / "prove_before_after.py"), *argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_every_report_header_carries_date_machine_versions_and_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import provenance

    monkeypatch.setattr(sys, "argv", ["bench.py", "--repeat", "2"])
    head = provenance.header(z3="4.x", jobs=2)
    assert list(head) == ["date", "machine", "cpus", "commit", "python", "z3", "jobs", "command"]
    assert head["date"].endswith("+00:00") and head["cpus"] >= 1 and head["command"] == "bench.py --repeat 2"


def test_kernel_proof_times_passes_a_bad_impl_on_as_exit_2(tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / "kernel_proof_times.py"), "--impl", "no.such.module", "--repeat", "1", cwd=tmp_path)
    assert done.returncode == 2 and "--impl module 'no.such.module'" in done.stderr, done.stderr


@pytest.mark.parametrize("script, argv, message", [
    ("review_time.py", ["--budget", "0"], "--budget must be > 0, got 0.0"),
    ("review_time.py", ["--repeat", "0"], "--repeat must be >= 1, got 0"),
    ("review_time.py", ["--json", "/no/such/folder/r.json"], "--json's folder /no/such/folder does not exist"),
    ("review_twice.py", ["--examples", "0"], "--examples must be >= 1, got 0"),
    ("review_twice.py", ["--keep", "/no/such/folder/keep"], "--keep's folder /no/such/folder does not exist"),
    ("latency.py", ["--device", "cpu", "--check-only", "--repeat", "0"], "--repeat must be >= 1, got 0"),
    ("latency.py", ["--device", "cpu", "--check-only", "--json", "/no/such/folder/l.json"], "--json's folder"),
])
def test_review_time_and_latency_check_their_options_before_any_run(script: str, argv: list[str], message: str,
                                                                     tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / script), *argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.parametrize("argv, message", [(["--jobs", "0"], "--jobs must be >= 1, got 0"),
                                           (["--limit", "0"], "--limit must be > 0 seconds, got 0.0"),
                                           (["--seeds", "-1"], "--seeds must be >= 0, got [-1]"),
                                           (["--systems", "257"], "--systems must be in [1, 256], got 257"),
                                           (["--out", "/no/such/folder/t.json"], "--out's folder /no/such/folder"),
                                           (["--tree", "a=" + sys.executable], "give --tree at least twice"),
                                           (["--tree", "a=/no/python", "--tree", "b=" + sys.executable],
                                            "--tree 'a=/no/python': /no/python is not an executable"),
                                           (["--tree", "nolabel", "--tree", "b=" + sys.executable],
                                            "--tree 'nolabel': give LABEL=PYTHON"),
                                           (["--sandbox", "off"], "give --sandbox at least twice"),
                                           (["--sandbox", "off", "--sandbox", "off"], "each setting once"),
                                           (["--sandbox", "off", "--sandbox", "require", "--tree", "a=" + sys.executable,
                                             "--tree", "b=" + sys.executable], "--sandbox and --tree are not given together")])
def test_time_to_kill_names_the_bad_option_before_any_run(argv: list[str], message: str, tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / "time_to_kill.py"), *argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.parametrize("argv, message", [(["--jobs", "0"], "--jobs must be >= 1, got 0"),
                                           (["--repeat", "0"], "--repeat must be >= 1, got 0"),
                                           (["--pairs", "A1"], "--pairs must be BASE:HEAD,... got 'A1'"),
                                           (["--out", "/no/such/folder/d.json"], "--out's folder /no/such/folder")])
def test_kernel_diff_times_checks_its_options_before_any_run(argv: list[str], message: str, tmp_path: Path) -> None:
    done = _run(str(BENCHMARKS / "kernel_diff_times.py"), *argv, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "run 1" not in done.stdout, done.stderr
