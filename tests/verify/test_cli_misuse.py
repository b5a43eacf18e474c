"""The misuses of issue 17 that ``prove`` and the command line as a whole
must survive, one test each (the table in docs/cli.md names them): an error
naming the option and what it accepts, exit 2, before any work; or the
right result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from replayssm.cli import main
from replayssm.spec.memory import MemoryFault
from replayssm.verify.obligation import REGISTRY, Claim, Obligation
from replayssm.verify.proof_cache import ProofCache
from replayssm.verify.runner import discharge
from replayssm.verify.terms import named_int

CHEAP = "boundary.exact"
"""An obligation that proves in milliseconds."""


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any proof an error: the misuse must be reported before."""
    def refuse(*args, **kwargs):
        raise AssertionError("work started before the misuse was reported")

    monkeypatch.setattr("replayssm.verify.runner.discharge", refuse)


@pytest.mark.parametrize("args, message", [
    (["--json", "{missing}/r.json"], "--json '{missing}/r.json': the folder"),
    (["--json", "{file}/r.json"], "--json '{file}/r.json': the folder"),
    (["--json", "{tmp}"], "is a folder; give a file name"),
    (["--junit", "{missing}/r.xml"], "--junit '{missing}/r.xml': the folder"),
    (["--sarif", "{missing}/r.sarif"], "--sarif '{missing}/r.sarif': the folder"),
    (["--counterexamples", "{file}"], "--counterexamples '{file}' is a file, not a folder"),
    (["--counterexamples", "{file}/sub"], "is a file, not a folder"),
    (["--cache", "{file}"], "--cache '{file}' is a file, not a folder"),
    (["--jobs", "100000"], "--jobs must be in [1, 256], got 100000"),
    (["--jobs", "0"], "--jobs must be in [1, 256], got 0"),
    (["--only", "no.such"], "--only 'no.such' matches no obligation; known:"),
    (["--junit", "-"], "--junit needs a file name (- for standard output is --json's only)"),
])
def test_prove_misuse_is_reported_before_any_work(args: list[str], message: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    fill = {"missing": str(tmp_path / "missing"), "file": str(file), "tmp": str(tmp_path)}
    _no_work(monkeypatch)
    assert main(["prove", "--only", CHEAP, *[a.format(**fill) for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message.format(**fill) in err, err


def test_json_dash_writes_the_report_to_stdout(capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--only", CHEAP, "--jobs", "1", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["schema"] == "replayssm-prove/1" and report["interrupted"] is False
    assert [o["name"] for o in report["obligations"]] == [CHEAP]
    assert "1/1 obligations proved" in err and not Path("-").exists()


def _plant_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import replayssm.spec.boundary as boundary
    from replayssm.spec.vocab import cdiv

    def off_by_one(running_pos, new_computed, block_size):
        aligned = cdiv(new_computed, block_size) * block_size
        return boundary.Boundary(aligned > running_pos, aligned - running_pos, cdiv(aligned, block_size) - 1, aligned)

    monkeypatch.setattr("replayssm.verify.boundary_proofs.mamba_state_copy_boundary", off_by_one)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_failing_obligations_keep_the_rest_and_every_counterexample(jobs: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture) -> None:
    """Two runs into the same --counterexamples folder: no FileExistsError,
    every obligation reported, every counterexample saved, JUnit with one
    case per obligation and the counterexample in the failure."""
    _plant_off_by_one(monkeypatch)
    folder, junit, report = tmp_path / "cex", tmp_path / "r.xml", tmp_path / "r.json"
    for _ in range(2):
        rc = main(["prove", "--only", "boundary.", "--jobs", jobs, "--counterexamples", str(folder),
                   "--junit", str(junit), "--json", str(report), "--no-cache"])
        assert rc == 1
    out = capsys.readouterr().out
    results = json.loads(report.read_text())
    assert len(results["obligations"]) == 4 and "obligations proved" in out
    failed = [o["name"] for o in results["obligations"] if o["status"] == "failed"]
    assert failed and sorted(results["counterexamples"]) == sorted(str(folder / f"{n}.json") for n in failed)
    assert all(json.loads(Path(f).read_text())["schema"] == "replayssm-counterexample/1"
               for f in results["counterexamples"])
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == str(len(failed))
    text = next(c.find("failure").text for c in suite if c.get("name") == failed[0])
    assert "violated" in text or "=" in text


X = named_int("misuse.x")


def _faulting_build():
    """A spec that reads past its buffer while the claims are built."""
    yield Claim(X >= X, [("any", X >= 0)], True, "first case")
    raise MemoryFault("ring_start", (0, 7), (2, 4))


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_inside_an_obligation_is_its_failure(jobs: int, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    ob = Obligation("t.memory_fault", "t", "reads past its buffer", _faulting_build, shardable=True)
    monkeypatch.setitem(REGISTRY, ob.name, ob)
    rc = main(["prove", "--only", "t.memory_fault", "--jobs", str(jobs), "--counterexamples", str(tmp_path),
               "--no-cache"])
    out = capsys.readouterr().out
    assert rc == 1 and "t.memory_fault" in out and "failed" in out
    assert "raised MemoryFault" in out and "ring_start[0, 7]" in out and "(ring_start is 2 x 4: OUT OF BOUNDS)" in out
    saved = json.loads((tmp_path / "t.memory_fault.json").read_text())
    assert saved["accesses"][0]["shape"] == [2, 4]


def test_a_dead_worker_fails_its_obligation_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def dies():
        os._exit(9)
        yield  # pragma: no cover

    ob = Obligation("t.dies", "t", "its worker dies", dies)
    monkeypatch.setitem(REGISTRY, ob.name, ob)
    (r,) = list(discharge([ob.name], 2))
    assert r.status == "failed" and "ended abnormally" in r.detail


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(c) for c in (task / "children").read_text().split()}
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads worker processes from /proc")
@pytest.mark.parametrize("signum, status, jobs", [(signal.SIGTERM, 143, 2), (signal.SIGINT, 130, 2),
                                                (signal.SIGTERM, 143, 1)])
def test_an_interrupt_stops_the_workers_and_writes_the_partial_report(signum: int, status: int, jobs: int,
                                                                      tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "replayssm", "prove", "--only", "system.step", "--jobs", str(jobs),
                             "--json", str(report), "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().startswith("proving 2 obligations with")  # the handlers are in place
    time.sleep(2.0)  # into the proof
    workers = _children(proc.pid)
    assert len(workers) >= (jobs if jobs > 1 else 0)  # --jobs 1 proves in the main process
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status, (out, err)
    assert "Traceback" not in err and "interrupted by" in out and "obligations proved" in out
    saved = json.loads(report.read_text())
    # which of the two is still running 2 s in depends on the machine's speed: system.step alone may finish
    assert saved["interrupted"] is True and saved["not_finished"]
    assert set(saved["not_finished"]) <= {"system.step", "system.step_batch"}
    time.sleep(0.5)
    assert not [w for w in workers if _alive(w)], "workers left running"


def test_a_report_whose_folder_went_away_is_exit_2_naming_the_option(tmp_path: Path, monkeypatch, capsys) -> None:
    """The ``--json`` folder is removed while ``prove`` runs: the report is an
    error naming the option (was an ``OSError`` traceback), the JUnit file is
    still written, and a run that proved everything exits 2."""
    import shutil

    from replayssm.commands import prove

    gone = tmp_path / "gone"
    gone.mkdir()

    def discharge_then_remove(*args, **kwargs):
        yield from discharge(*args, **kwargs)
        shutil.rmtree(gone)

    monkeypatch.setattr(prove, "discharge", discharge_then_remove)
    code = main(["prove", "--only", CHEAP, "--jobs", "1", "--no-cache", "--json", str(gone / "r.json"),
                 "--junit", str(tmp_path / "r.xml")])
    captured = capsys.readouterr()
    assert code == 2 and "1/1 obligations proved" in captured.out, captured
    assert f"error: --json {gone / 'r.json'}: cannot write the report" in captured.err
    assert (tmp_path / "r.xml").exists()


def test_version_and_python_dash_m(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("replayssm-verify ")
    run = subprocess.run([sys.executable, "-m", "replayssm", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "exit status:" in run.stdout and "3  no finding" in run.stdout


def test_the_proof_cache_skips_only_unchanged_queries(tmp_path: Path) -> None:
    """A case is reused only while its exact query is unchanged: a changed
    goal is solved again (and a wrong one still fails)."""
    from replayssm.verify.obligation import prove

    def build(bound: int):
        return lambda: [Claim([("small", X < bound + i)], [("x in range", X >= 0), ("x below 3", X < 3)], True, f"c{i}")
                        for i in range(2)]

    cache = ProofCache(tmp_path)
    first = prove(Obligation("t.cached", "t", "", build(5)), cache=cache)
    assert first.status == "proved" and first.cases_cached == 0
    again = prove(Obligation("t.cached", "t", "", build(5)), cache=ProofCache(tmp_path))
    assert again.status == "proved" and again.cases_cached == 2
    changed = prove(Obligation("t.cached", "t", "", build(10)), cache=ProofCache(tmp_path))
    assert changed.status == "proved" and changed.cases_cached == 0
    wrong = prove(Obligation("t.cached", "t", "", build(2)), cache=ProofCache(tmp_path))
    assert wrong.status == "failed"
    other = prove(Obligation("t.other_name", "t", "", build(5)), cache=ProofCache(tmp_path))
    assert other.cases_cached == 0


def test_a_warm_prove_reports_from_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["prove", "--only", "boundary.", "--jobs", "1", "--cache", str(tmp_path), "--json", str(tmp_path / "r.json")]
    assert main(args) == 0
    assert main(args) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert all(o.get("cached") for o in report["obligations"]) and "cached" in capsys.readouterr().out
    code = ("import sys; from replayssm.cli import main; rc = main(sys.argv[1:]); "
            "print('catalog imported:', 'replayssm.verify.catalog' in sys.modules, rc)")
    warm = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert "catalog imported: False 0" in warm.stdout, warm.stdout + warm.stderr  # no claim built, no module of them


def test_case_keys_do_not_depend_on_the_process(tmp_path: Path) -> None:
    """The cache's premise: two processes (different hash seeds) build the
    same queries."""
    code = ("from replayssm.verify.catalog import obligations; from replayssm.verify.obligation import REGISTRY;"
            "from replayssm.verify.proof_cache import ProofCache; obligations(); c = ProofCache('unused');"
            "print([c.case_key(n, [a for _, a in k.assumptions], k.cover, False) for n in "
            "('boundary.exact', 'system.admit', 'compaction.work_list') for k in REGISTRY[n].build()])")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(keys) == 1 and len(keys.pop()) > 100


def test_explain_draws_a_system_counterexample_of_prove(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An inductive-step counterexample (a caller assumption dropped) is saved
    with its run, and ``explain`` draws the run with ring diagrams instead of
    dumping every state variable."""
    from replayssm.verify import system_probes as sp
    from replayssm.verify.counterexamples import save_counterexample
    from replayssm.verify.obligation import prove

    name = sorted(sp.PROBES)[0]
    claim = sp.probe_claim(sp.PROBES[name], drop=True)
    r = prove(Obligation("t.probe", "t", "", lambda: [claim]))
    assert r.status == "failed" and "trace" in r.counterexample
    scenario, trace = save_counterexample(r, tmp_path)
    assert main(["explain", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("counterexample of t.probe") and "step 1:" in out and "slot" in out
    assert "state values left out" in out and len(out.splitlines()) < 80
    assert main(["explain", str(trace)]) == 0 and "step 1:" in capsys.readouterr().out


def test_explain_draws_launch_traces(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The fuzzer's traces (here: the launches of a system run, with and
    without their recorded states) render step by step with ring rows."""
    from replayssm.fuzz.system_traces import launch_trace
    from replayssm.verify import system_world as sp
    from replayssm.base.system_traces import record_run

    p = sp.system_params(sp.SYSTEM_CONVENTIONS["v2-align"])
    system = record_run(p, [("admit", {"req": 0, "stream": 0, "prompt": 3}),
                            ("step", {"rows": [{"sched": 1, "q": 2, "acc": 1, "live_col": 0, "is_prefilling": 1,
                                                "slot": [1, 1]}]})])
    launches = launch_trace(system)
    first = launches["actions"][0]
    assert first["name"] == "set_state" and "states" not in launches
    slots = len(first["picks"]["ring_start"]) // 2
    first["picks"]["ring_start"][3], first["picks"]["num_committed"][3] = 2, 3  # group 0, slot 3
    first["picks"]["num_committed"][slots + 1] = 1  # group 1, slot 1
    path = tmp_path / "launches.json"
    path.write_text(json.dumps(launches))
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("launch trace (system trace") and "postprocess num_reqs=" in out
    assert "g0 slot 3: [ (#)  . >(#) (#)] rs=2 nc=3" in out and "g1 slot 1: [>(#)  .   .   . ] rs=0 nc=1" in out, out
    path.write_text(json.dumps({**launches, "states": [{}] * len(launches["actions"])}))
    assert main(["explain", str(path)]) == 2
    assert "trace.states[0].ring_start is missing" in capsys.readouterr().err


def test_obligations_from_outside_the_tree_are_never_reused_whole(tmp_path: Path) -> None:
    """``reuse_whole=False`` (a ``--kernels --impl`` target, whose source the
    tree digest does not cover): the claims are built again and only the
    cases' exact queries are reused."""
    first = list(discharge([CHEAP], 1, tmp_path))
    assert not first[0].cached and first[0].cases_cached == 0
    (whole,) = list(discharge([CHEAP], 1, tmp_path))
    assert whole.cached
    (cases,) = list(discharge([CHEAP], 1, tmp_path, reuse_whole=False))
    assert not cases.cached and cases.cases_cached == cases.cases == first[0].cases


def test_a_memory_safety_counterexample_prints_the_buffers_extent() -> None:
    from replayssm.verify.goals import in_bounds
    from replayssm.verify.memory import SymbolicMemory
    from replayssm.verify.counterexamples import render_scenario
    from replayssm.verify.obligation import prove

    n = named_int("misuse.n")

    def build():
        mem = SymbolicMemory({"ring_start": (2, n)})
        mem.load("ring_start", (1, X), guard=X >= 0)
        yield Claim(in_bounds(mem), [("n small", (n >= 1) & (n <= 4))], True, "planted", memories=[mem])

    r = prove(Obligation("t.oob", "t", "", build))
    assert r.status == "failed"
    (access,) = r.counterexample["accesses"]
    assert access["shape"][0] == 2 and access["index"][1] >= access["shape"][1]
    assert f"(ring_start is 2 x {access['shape'][1]}: OUT OF BOUNDS)" in render_scenario(r.counterexample)



class _ClosedPipe:
    """Standard output whose reader has gone (``| head -1`` after its line)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT)

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.fd


def test_a_reader_that_leaves_early_ends_the_listing_quietly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``prove --list | head -1``: exit 141 (as a shell tool killed by SIGPIPE), no traceback."""
    monkeypatch.setattr(sys, "stdout", _ClosedPipe(tmp_path / "out"))
    assert main(["prove", "--list"]) == 128 + signal.SIGPIPE


def test_prove_list_json_writes_the_list(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``prove --list --json FILE`` (it wrote nothing, issue 27): the listing as data, with a schema."""
    out = tmp_path / "list.json"
    assert main(["prove", "--list", "--only", CHEAP, "--json", str(out)]) == 0
    listed = json.loads(out.read_text())
    assert listed["schema"] == "replayssm-prove-list/1" and [o["name"] for o in listed["obligations"]] == [CHEAP]
    assert listed["obligations"][0]["assumptions"] and CHEAP in capsys.readouterr().out
