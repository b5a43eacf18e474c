"""A completely full disk (issue 39): ``review`` and ``fuzz`` lose no report
they could write elsewhere, leave no 0-byte file, and say what was not
written. The disk is a 256 KiB tmpfs filled to the last block, mounted in a
user and mount namespace of the command's own (``unshare -rm``); skipped,
with the reason, where that cannot be made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.spec import corpus

REPO = Path(__file__).resolve().parents[2]

FULL = ('mount -t tmpfs -o size=256k none "$0" || exit 99; '
        'dd if=/dev/zero of="$0/fill" bs=4k 2>/dev/null; cd "$0"; "$@"')
"""Run the command with ``$0`` a full disk, its working folder."""


def _why_not() -> str | None:
    probe = Path(f"/tmp/replayssm-full-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(["unshare", "-rm", "sh", "-c", FULL, str(probe), "true"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare cannot run here: {e}"
    finally:
        probe.rmdir()
    return None if done.returncode == 0 else f"no tmpfs in a user namespace here: {done.stderr.strip()}"


WHY = _why_not()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"cannot make a full disk: {WHY}")


def _on_a_full_disk(full: Path, *args: str) -> subprocess.CompletedProcess:
    """``replayssm-verify ARGS`` with ``full`` a full disk, its working folder and its ``TMPDIR``."""
    full.mkdir()
    env = {**os.environ, "TMPDIR": str(full)}
    return subprocess.run(["unshare", "-rm", "sh", "-c", FULL + '; echo "$? files:"; find "$0" -type f -size 0',
                           str(full), sys.executable, "-m", "replayssm.cli", *args],
                          capture_output=True, text=True, timeout=600, env=env)


def _empty_files(printed: str) -> list[str]:
    """The 0-byte files the run left (Hypothesis's own cache of constants aside: its files, not this tool's)."""
    listed = printed.split(" files:\n", 1)[1].splitlines()
    return [f for f in listed if "/.hypothesis/" not in f]


@pytest.mark.corpus
def test_review_on_a_full_disk_says_what_it_could_not_save_and_writes_the_rest(tmp_path: Path) -> None:
    """``review B1`` (a kernel proof fails: its counterexample's trace is
    saved first) with ``--traces``, ``--json`` and ``--html`` on the full
    disk, ``--junit`` elsewhere: exit 2 (the machine's fault) naming the
    trace that could not be saved and each report not written, the JUnit
    file written, the version's verdict ``interrupted`` (never ``pass``), no
    0-byte file (before: a traceback, exit 1, no report at all, and a
    0-byte kernel trace left)."""
    full, junit = tmp_path / "full", tmp_path / "r.xml"
    run = _on_a_full_disk(full, "review", str(corpus.versions() / "B1.py"), "--examples", "4",
                          "--traces", str(full / "t"), "--json", str(full / "r.json"), "--junit", str(junit),
                          "--html", str(full / "r.html"))
    printed = run.stdout + run.stderr
    assert "2 files:" in run.stdout and "Traceback" not in printed, printed
    assert f"error: B1: its review stopped: a trace cannot be saved under --traces {full / 't'}" in run.stderr
    for option in ("--json", "--html"):
        assert f"error: {option} {full}/r." in run.stderr and "No space left on device" in run.stderr, run.stderr
    assert "B1       B    interrupted" in run.stdout, run.stdout
    assert 'name="B1' in junit.read_text()
    assert _empty_files(run.stdout) == [], run.stdout


def test_fuzz_on_a_full_disk_keeps_its_finding_and_says_what_was_not_written(tmp_path: Path) -> None:
    """``fuzz`` of a planted out-of-bounds store with ``--failures``,
    ``--json`` and its temporary folder on the full disk, ``--junit``
    elsewhere: exit 1 (the verdict) with the finding printed, the trace
    printed where no folder takes it, each report not written named, the
    JUnit file written, no 0-byte file."""
    sys.path.insert(0, str(REPO / "tests" / "fuzz"))
    from fuzz_processes import plant

    impl = plant(tmp_path / "impl", "    in_capacity = lane < MAX_NUM_REQS\n",
                 "    in_capacity = lane <= MAX_NUM_REQS\n")
    full, junit = tmp_path / "full", tmp_path / "s.xml"
    run = _on_a_full_disk(full, "fuzz", "--impl", impl, "--jobs", "1", "--examples", "64",
                          "--failures", str(full / "f"), "--json", str(full / "s.json"), "--junit", str(junit))
    printed = run.stdout + run.stderr
    assert "1 files:" in run.stdout and "Traceback" not in printed, printed
    assert "FAILED: 1 finding(s)" in run.stdout and "cannot save the finding's trace" in printed, printed
    assert f"error: --json {full}/s.json: cannot write the report: [Errno 28]" in run.stderr, run.stderr
    assert "failures=\"1\"" in junit.read_text()
    assert _empty_files(run.stdout) == [], run.stdout


@pytest.mark.corpus
def test_review_of_a_released_vllm_on_a_full_disk_keeps_its_verdict(tmp_path: Path) -> None:
    """``review --vllm`` of the released 0.33.0 (latent) with ``--json`` on
    the full disk and ``--traces`` elsewhere: its verdict printed, exit 1
    kept, the JSON named as not written (before: a traceback)."""
    full, traces = tmp_path / "full", tmp_path / "t"
    run = _on_a_full_disk(full, "review", "--vllm", str(corpus.root() / "vllm-0.33.0"), "--traces", str(traces),
                          "--json", str(full / "r.json"))
    printed = run.stdout + run.stderr
    assert "1 files:" in run.stdout and "Traceback" not in printed, printed
    assert "latent" in run.stdout and f"error: --json {full}/r.json: cannot write the report: [Errno 28]" in run.stderr
    assert _empty_files(run.stdout) == [], run.stdout


def test_the_pull_request_check_on_a_full_disk_names_what_it_could_not_write(tmp_path: Path) -> None:
    """``review --repo`` of a pull request that changes no kernel file, its
    ``--json`` and ``--markdown`` on the full disk: the comment printed, each
    file named as not written, exit 2, no 0-byte file (before: a traceback
    and a 0-byte JSON file)."""
    repo = tmp_path / "vllm"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    kernels = repo / "vllm/model_executor/layers/mamba/ops/ssu_dispatch.py"
    kernels.parent.mkdir(parents=True)
    kernels.write_text("x = 1\n")
    (repo / "README").write_text("x")
    ids = []
    for step in ("one", "two"):
        if step == "two":
            (repo / "README").write_text("y")
        subprocess.run([*git, "init", "-q"] if step == "one" else ["true"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", step], check=True)
        ids.append(subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                                  text=True).stdout.strip())
    full = tmp_path / "full"
    run = _on_a_full_disk(full, "review", "--repo", str(repo), "--base", ids[0], "--head", ids[1],
                          "--json", str(full / "r.json"), "--markdown", str(full / "c.md"))
    printed = run.stdout + run.stderr
    assert "2 files:" in run.stdout and "Traceback" not in printed, printed
    assert "No ReplaySSM kernel file changed" in run.stdout
    for option, name in (("--json", "r.json"), ("--markdown", "c.md")):
        assert f"error: {option} {full}/{name}: cannot write the report: [Errno 28]" in run.stderr, run.stderr
    assert _empty_files(run.stdout) == [], run.stdout
