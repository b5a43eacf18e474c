"""The target runs in a process of its own (issue 27): whatever it does at
import or in a launch is a finding of the target, never a pass, never a
set-up error, and cannot reach the process that judges it. The planted
targets are in ``tests/targets/``."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import CampaignConfig
from replayssm.base.isolation import TargetFault, load_isolated
from fuzz_processes import REPO, plant

TARGETS = REPO / "tests" / "targets"

AT_IMPORT = {
    "exit_at_import.py": ("crash", "the target ended the process at import: exit status 0"),
    "thread_at_import.py": ("tampering", "it left non-daemon thread(s) running: planted-sleeper"),
    "chdir_at_import.py": ("tampering", "it changed the working directory to /"),
    "numpy_patched.py": ("tampering", "it replaced numpy.nonzero"),
    "keyboard_interrupt_at_import.py": ("exception", "the target raised KeyboardInterrupt at import"),
    "exits_3_at_import.py": ("crash", "the target called sys.exit(3) at import"),
    "loops_at_import.py": ("hang", "the target did not finish its import within the 3 s watchdog"),
}
"""Each planted target's fault at import: its kind and the start of its reason."""


def _fault(name: str) -> TargetFault:
    try:
        module = load_isolated(str(TARGETS / name), load_seconds=3.0)
    except TargetFault as e:
        return e
    module.close()
    raise AssertionError(f"{name} loaded without a fault")


def test_a_target_misbehaving_at_import_is_its_finding() -> None:
    """Each planted target in a process of its own, several at once (each
    starts an interpreter with torch and triton)."""
    with ThreadPoolExecutor(3) as pool:
        faults = dict(zip(AT_IMPORT, pool.map(_fault, AT_IMPORT)))
    for name, (kind, reason) in AT_IMPORT.items():
        fault = faults[name]
        assert (fault.kind, fault.phase) == (kind, "import") and reason in fault.reason, (name, fault.reason)
    assert "about to leave" in faults["exit_at_import.py"].output  # what it printed is kept, not lost
    assert "REPLAYSSM_PLANTED" in faults["chdir_at_import.py"].reason
    assert "KeyboardInterrupt" in faults["keyboard_interrupt_at_import.py"].detail  # its traceback


def test_fuzz_of_a_target_that_exits_at_import_is_a_finding_with_its_reports(tmp_path: Path, capsys) -> None:
    out, junit = tmp_path / "s.json", tmp_path / "r.xml"
    code = main(["fuzz", "--impl", str(TARGETS / "exit_at_import.py"), "--jobs", "1", "--examples", "32",
                 "--failures", str(tmp_path / "f"), "--json", str(out), "--junit", str(junit)])
    printed = capsys.readouterr().out
    assert code == 1, printed
    summary = json.loads(out.read_text())
    (finding,) = summary["findings"]
    assert finding["kind"] == "crash" and finding["kernel"] == "the target's import", finding
    assert "the target ended the process at import: exit status 0" in finding["reason"]
    assert "FAILED: 1 finding(s)" in printed and "failure" in junit.read_text()


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "SystemExit(0)"])
def test_a_base_exception_in_a_launch_is_a_finding_of_the_kernel(tmp_path: Path, raised: str) -> None:
    line = "    valid_req = req >= 0\n"
    target = plant(tmp_path, line, line + f"    raise {raised}\n")
    result = run_campaign(CampaignConfig(target, "cpu", 128, 6, seed=0, jobs=1, failures_dir=str(tmp_path / "f"),
                                         shrink_seconds=1.0))
    assert result["exit_code"] == 1, result
    (finding,) = result["findings"]
    words = "called sys.exit(0)" if raised.startswith("SystemExit") else "raised KeyboardInterrupt"
    assert finding["kernel"] == "_reset_new_replayssm_slots_kernel" and words in finding["reason"], finding
    assert finding["trace"] and json.loads(Path(finding["trace"]).read_text())["actions"][-1]["name"] == "migrate"


def test_a_fault_that_does_not_recur_is_kept_as_it_first_appeared(tmp_path: Path, monkeypatch, capsys) -> None:
    """The 20th migration launch of the target's process raises, once (a run
    of at most 3 rules launches fewer): the finding is the run that failed,
    with the target's own message, called non-deterministic (it was
    "exception in the spec's invariants: FlakyFailure"); ``replay`` of its
    trace, in a fresh process where it does not recur, is exit 1 "not
    reproduced, and not a pass" (it said "no discrepancy", exit 0)."""
    monkeypatch.setenv("REPLAYSSM_PLANTED_LAUNCH", "20")
    result = run_campaign(CampaignConfig(str(TARGETS / "count_dependent.py"), "cpu", 128, 3, seed=0, jobs=1,
                                         failures_dir=str(tmp_path / "f"), shrink_seconds=2.0))
    assert result["exit_code"] == 1, result
    (finding,) = result["findings"]
    assert finding["kernel"] == "_reset_new_replayssm_slots_kernel" and not finding["deterministic"], finding
    assert "planted: migration launch 20 of this process fails" in finding["reason"]
    assert "non-deterministic" in finding["reason"] and "spec" not in finding["kernel"]
    meta = json.loads(Path(finding["trace"]).read_text())["#meta"]
    assert meta["failure"] == finding["kind"] and meta["deterministic"] is False and not meta["shrunk"]
    assert "migration launch 20" in meta["error"]
    capsys.readouterr()
    assert main(["replay", finding["trace"], "--recorded"]) == 1
    printed = capsys.readouterr().out
    assert "not reproduced, and not a pass" in printed and "migration launch 20" in printed, printed
    assert "no discrepancy" not in printed


@pytest.mark.corpus
def test_another_launch_api_is_named(tmp_path: Path) -> None:
    """A1 (generation A) keeps the reference's kernel names with other
    parameters: ``fuzz`` names the mismatch (exit 2)."""
    from replayssm.fuzz.target import load_target

    from replayssm.spec import corpus

    a1 = corpus.versions() / "A1.py"
    with pytest.raises(ValueError, match="has kernels of another launch API: _postprocess_replayssm_kernel takes "
                                         "block_table, tracker_start"):
        load_target(str(a1))


def test_the_context_level_and_the_numeric_layer_judge_a_target_in_its_own_process(tmp_path: Path,
                                                                                 capsys) -> None:
    """``fuzz --level context`` and ``fuzz --numeric`` call the target's
    context in its process: a target that replaces ``numpy.nonzero`` at import
    (which would hide every discrepancy from a comparison in its process) is a
    tampering finding, and one whose ``postprocess`` ends its process is a
    crash of that call, both exit 1 (they ran in the judging process before)."""
    out = tmp_path / "s.json"
    code = main(["fuzz", "--level", "context", "--impl", str(TARGETS / "numpy_patched.py"), "--jobs", "1",
                 "--examples", "32", "--failures", str(tmp_path / "f"), "--json", str(out)])
    assert code == 1, capsys.readouterr().out
    (finding,) = json.loads(out.read_text())["findings"]
    assert finding["kind"] == "tampering" and "it replaced numpy.nonzero" in finding["reason"], finding
    code = main(["fuzz", "--numeric", "--impl", str(TARGETS / "context_exits_in_postprocess.py"), "--examples", "8",
                 "--max-steps", "4", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 1, printed
    failure = json.loads(out.read_text())["failure"]
    assert failure.startswith("crash: the target ended the process during launch") and \
        "(ReplaySSMModelContext.postprocess): exit status 0" in failure, failure


def test_replay_of_a_kernel_trace_runs_the_target_in_its_own_process(tmp_path: Path, capsys) -> None:
    """``replay`` of a kernel-proof trace launches the kernel (and watches its
    loads and stores) in the target's process: a planted out-of-bounds read
    still replays as one; a target that exits at import (exit 0, silently,
    before) or replaces ``numpy.nonzero`` is that finding; a kernel that ends
    its process in the launch is a crash of the launch; each exit 1."""
    old = "last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)"
    mutant = plant(tmp_path / "m", old, old.replace(" - 1, 0)", ", 0)"))
    folder = tmp_path / "cx"
    assert main(["prove", "--kernels", "--impl", mutant, "--only", "postprocess.memory_safety", "--jobs", "1",
                 "--counterexamples", str(folder)]) == 1
    (trace,) = folder.glob("*.kernel-trace.json")
    capsys.readouterr()
    first = "    block_table_row = block_table + batch * tl.load(block_table_strides + group)\n"
    exits = plant(tmp_path / "x", first, first + "    __import__('os')._exit(5)\n")
    for impl, words in ((mutant, "failure reproduced: out of bounds"),
                        (str(TARGETS / "exit_at_import.py"), "the target ended the process at import: exit status 0"),
                        (str(TARGETS / "numpy_patched.py"), "it replaced numpy.nonzero"),
                        (exits, "during launch 1 (_postprocess_replayssm_kernel): exit status 5")):
        code = main(["replay", str(trace), "--impl", impl])
        printed = capsys.readouterr().out
        assert code == 1 and words in printed, (impl, code, printed)
