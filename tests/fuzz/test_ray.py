"""``fuzz --ray``: the campaign's workers as Ray tasks on a local Ray (CPU), merged like the local pool's.

Teeth: a planted bug (the checkpoint's ``% RING_BUFFER_LEN`` written as a bit
mask, wrong for rings of 20 or 5 rows) is found through Ray tasks, one per GPU
of a local Ray declaring 2 GPUs (``REPLAYSSM_RAY_CPU_GPUS``; the workers
compute on the CPU), each task pinned to its own GPU id and using the shared
example database, saved as a trace that ``replay`` reproduces; the summary's
request-steps are the sum of what the workers report; the failure stored in the shared example database is
what a later campaign of one example per combination finds (without the
database, that campaign finds nothing); an interrupt stops every task and
writes the partial summary. Without Ray installed, ``--ray`` is exit 2 before
any work.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import CampaignConfig
from replayssm.fuzz.replay import replay
from replayssm.fuzz.target import DEFAULT_TARGET
from replayssm.fuzz.ray_pool import CPU_GPUS_VARIABLE
from fuzz_processes import alive, descendants, interrupt_at, plant

pytest.importorskip("ray", reason="the cluster extra is not installed (pip install -e '.[cluster]')")

WORKER_LINE = re.compile(r"worker (\d) \(.*\) ended: (\d+) examples, (\d+) request-steps, (\d+) database calls")


def _fuzz(tmp_path: Path, target: str, *extra: str, gpus: int = 0) -> subprocess.Popen:
    """``fuzz --ray`` on a local Ray: 2 workers of one CPU each, or (``gpus``) one per declared GPU."""
    jobs, env = (["--jobs", "2"], {}) if not gpus else ([], {CPU_GPUS_VARIABLE: str(gpus)})
    return subprocess.Popen(
        [sys.executable, "-m", "replayssm.cli", "fuzz", "--ray", *jobs, "--impl", target,
         "--examples", "64", "--max-steps", "12", "--json", str(tmp_path / "s.json"),
         "--failures", str(tmp_path / "f"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env})


def test_a_planted_bug_is_found_through_one_task_per_gpu_and_the_database_passes_it_on(tmp_path: Path) -> None:
    target = plant(tmp_path, "% RING_BUFFER_LEN", "& (RING_BUFFER_LEN - 1)")
    database = tmp_path / "db"
    proc = _fuzz(tmp_path, target, "--database", str(database), "--shrink-seconds", "5", gpus=2)
    text, _ = proc.communicate(timeout=240)
    assert proc.returncode == 1, text
    assert re.search(r"Ray: a local Ray \(started in [0-9.]+ s\), 1 node\(s\), 2 GPU\(s\), \d+ CPU\(s\); "
                     r"2 task\(s\) of one GPU each \(GPUs held by REPLAYSSM_RAY_CPU_GPUS", text), text
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["config"]["ray"] == "" and summary["config"]["jobs"] == 2  # counted from the GPUs
    assert summary["status"] == "finding" and len(summary["findings"]) == 1, summary["findings"]
    finding = summary["findings"][0]
    assert finding["kind"] == "discrepancy" and finding["shrunk"], finding
    tasks = summary["ray_tasks"]
    assert [t["worker"] for t in tasks] == [0, 1], tasks
    assert sorted(t["gpus"][0] for t in tasks) == ["0", "1"] and all(len(t["gpus"]) == 1 for t in tasks), tasks
    assert all(t["cuda_visible_devices"] == t["gpus"][0] for t in tasks), tasks  # each pinned to its own
    assert all(t["database_calls"] > 0 for t in tasks), tasks  # every task used the shared database
    workers = {int(w): (int(e), int(r), int(d)) for w, e, r, d in WORKER_LINE.findall(text)}
    assert workers == {t["worker"]: (t["examples"], t["request_steps"], t["database_calls"]) for t in tasks}, text
    assert summary["request_steps"] == sum(t["request_steps"] for t in tasks) > 0, (summary["request_steps"], tasks)
    assert summary["examples"] == sum(t["examples"] for t in tasks)
    trace = json.loads(Path(finding["trace"]).read_text())
    assert trace["#meta"]["impl"] == target and len(trace["actions"]) == finding["actions"]
    ok, report = replay(finding["trace"], target, "cpu")
    assert not ok and "discrepancy reproduced" in report, report
    ok, report = replay(finding["trace"], DEFAULT_TARGET, "cpu")
    assert ok, report

    # One example per combination, the simplest, finds nothing; the stored failure is replayed first.
    def again(db: Path | None) -> dict:
        return run_campaign(CampaignConfig(target, "cpu", 32, 12, seed=5, jobs=1, failures_dir=str(tmp_path / "g"),
                                           shrink_seconds=1, database=db and str(db)))
    assert not again(None)["findings"], "the control campaign must not find the bug by itself"
    found = again(database)["findings"]
    assert found and found[0]["combination"] == finding["combination"], found


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143)])
def test_an_interrupt_cancels_the_tasks_and_writes_the_partial_summary(tmp_path: Path, signum: int,
                                                                      code: int) -> None:
    target = plant(tmp_path, "% RING_BUFFER_LEN", "& (RING_BUFFER_LEN - 1)")
    proc = _fuzz(tmp_path, target, "--shrink-seconds", "600")
    text, processes = interrupt_at(proc, "hit a failure", signum, timeout=120, watch=descendants)
    assert proc.returncode == code, text
    assert f"INTERRUPTED by {signal.Signals(signum).name}" in text and "rules:" in text, text
    assert re.search(r"Ray: a local Ray .*, 0 GPU\(s\), \d+ CPU\(s\); 2 task\(s\) of one CPU each", text), text
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["interrupted"] and summary["exit_code"] == code and summary["request_steps"] > 0
    assert len(summary["findings"]) == 1 and not summary["findings"][0]["shrunk"], summary["findings"]
    ok, report = replay(summary["findings"][0]["trace"], target, "cpu")
    assert not ok and "discrepancy reproduced" in report, report
    assert processes and not [p for p in processes if alive(p)], "a Ray process or a worker survived"


def test_without_ray_the_option_is_exit_2_before_any_work(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    code = main(["fuzz", "--ray", "--failures", str(tmp_path / "f"), "--json", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert code == 2 and "--ray needs Ray" in err and "pip install" in err and "[cluster]" in err, err
    assert not (tmp_path / "f").exists() and not (tmp_path / "s.json").exists()


def test_ray_misuse_is_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["fuzz", "--numeric", "--ray"]) == 2
    assert "--ray does not apply to --numeric" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    code = main(["fuzz", "--database", str(tmp_path / "file"), "--failures", str(tmp_path / "f")])
    assert code == 2 and "--database" in capsys.readouterr().err


class _FakeRay:
    """Stands for ``ray`` where only connecting matters: a cluster of 2 CPUs, or one that cannot be reached."""

    def __init__(self, reachable: bool) -> None:
        self.reachable, self.shut = reachable, False

    def init(self, address: str | None = None, **kwargs) -> None:
        if not self.reachable:
            raise ConnectionError(f"could not connect to {address}")

    def cluster_resources(self) -> dict:
        return {"CPU": 2.0}

    def nodes(self) -> list:
        return [{"Alive": True}]

    def shutdown(self) -> None:
        self.shut = True


@pytest.mark.parametrize("reachable, argv, declared, message", [
    (False, ["--ray", "10.0.0.1:6379"], "", "--ray 10.0.0.1:6379: cannot start or reach Ray: ConnectionError"),
    (True, ["--ray", "--device", "cuda"], "", "the cluster reports no GPU; --device cuda runs each worker on one GPU"),
    (True, ["--ray", "10.0.0.1:6379"], "1", "the cluster reports no GPU; REPLAYSSM_RAY_CPU_GPUS holds each worker"),
    (False, ["--ray"], "two", "REPLAYSSM_RAY_CPU_GPUS='two': allowed is a whole number >= 1, with --device cpu"),
])
def test_a_cluster_it_cannot_use_is_exit_2_before_any_work(tmp_path: Path, monkeypatch, capsys, reachable: bool,
                                                          argv: list[str], declared: str, message: str) -> None:
    fake = _FakeRay(reachable)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv(CPU_GPUS_VARIABLE, declared)
    code = main(["fuzz", *argv, "--failures", str(tmp_path / "f"), "--json", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not (tmp_path / "s.json").exists() and fake.shut == reachable
