"""Proof-cache entries are signed with a key the target cannot read (issue 39,
``base/secret_key.py``): "proved" entries that a target writes into the cache
(from a process it started outside the sandbox, or a patched ``prove`` run
where the key is hidden) never make a failing ``prove --kernels --impl``
say proved; they are proved again with one warning, and a first-ever run
prints none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.verify import proof_cache
from replayssm.verify.proof_cache import ProofCache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_mutants import MUTANTS, load_mutant  # noqa: E402

OBLIGATION = "kernel.postprocess.memory_safety"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$XDG_STATE_HOME``: no key yet, and the warning not said yet in this process."""
    folder = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    monkeypatch.setattr(proof_cache, "_UNSIGNED_SAID", [], raising=False)
    return folder


def _failing(tmp_path: Path) -> list[str]:
    mutant = next(m for m in MUTANTS if m.name == "prefill reset one column past the row")
    _, path = load_mutant(mutant, tmp_path)
    return ["prove", "--kernels", "--impl", str(path), "--only", OBLIGATION.removeprefix("kernel."), "--jobs", "1",
            "--cache", str(tmp_path / "cache"), "--json", str(tmp_path / "r.json")]


def _asked(args: list[str], monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Run ``args`` once, recording every case the run looked up in the cache: (key, obligation, case)."""
    asked: list[tuple[str, str, str]] = []
    looked_up = ProofCache.proved_case

    def spy(self: ProofCache, key: str, obligation: str, case: str) -> dict | None:
        asked.append((key, obligation, case))
        return looked_up(self, key, obligation, case)

    monkeypatch.setattr(ProofCache, "proved_case", spy)
    assert main(args) == 1
    monkeypatch.setattr(ProofCache, "proved_case", looked_up)
    return asked


FORGE = """
import json, sys
from replayssm.verify.proof_cache import ProofCache

cache = ProofCache(sys.argv[1])
for key, obligation, case in json.loads(sys.argv[2]):
    cache.keep_case(key, obligation, case, True)
"""


@pytest.mark.parametrize("forger", ["unsigned", "another key"])
def test_proved_entries_a_target_wrote_do_not_make_a_failing_obligation_proved(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        forger: str) -> None:
    """A failing planted kernel; every case it asks the cache for then gets a
    "proved" entry written as a target would: as plain JSON (the entry's
    format before signing), or by ``ProofCache`` in a process whose
    ``$XDG_STATE_HOME`` is elsewhere (a patched ``prove`` where the key is
    hidden: it signs with a key of its own). The next run still fails, with
    none of its cases from the cache and one warning (before: "proved
    (N cases, N from the proof cache)", exit 0)."""
    args = _failing(tmp_path)
    asked = _asked(args, monkeypatch)
    assert asked, "the obligation asked the cache for no case"
    capsys.readouterr()
    if forger == "unsigned":
        for key, obligation, case in asked:
            path = tmp_path / "cache" / "cases" / key[:2] / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"obligation": obligation, "case": case, "key": key, "covered": True}))
    else:
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "the target's")}
        subprocess.run([sys.executable, "-c", FORGE, str(tmp_path / "cache"), json.dumps(asked)], env=env,
                       check=True, timeout=120)
    assert main(args) == 1
    report = json.loads((tmp_path / "r.json").read_text())["obligations"]
    assert [o["status"] for o in report] == ["failed"] and not report[0].get("cases_cached"), report
    err = capsys.readouterr().err
    assert err.count("warning: proof cache entry") == 1 and "not signed with this user's key" in err, err
    assert (tmp_path / "the target's").exists() == (forger == "another key")


def test_entries_this_user_signed_are_reused_and_a_first_run_warns_of_nothing(
        tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Teeth the other way, and issue 38's rule: a first-ever run (no key, an
    empty cache) makes the key (0600, its folder 0700) and warns of nothing;
    the warm run takes every case from the cache, silently."""
    args = ["prove", "--only", "boundary.", "--jobs", "1", "--cache", str(tmp_path / "cache"),
            "--json", str(tmp_path / "r.json")]
    assert main(args) == 0
    assert "warning" not in capsys.readouterr().err
    key = state / "replayssm-verify" / "key"
    assert key.stat().st_mode & 0o777 == 0o600 and key.parent.stat().st_mode & 0o777 == 0o700
    assert main(args) == 0
    report = json.loads((tmp_path / "r.json").read_text())["obligations"]
    assert report and all(o.get("cached") for o in report), report
    assert "warning" not in capsys.readouterr().err


def test_without_a_key_nothing_is_kept_or_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Where no key can be kept (the state folder under a file), an entry is
    neither written nor read as proved: its case is proved each time."""
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    monkeypatch.setattr(proof_cache, "_UNSIGNED_SAID", [], raising=False)
    cache = ProofCache(tmp_path / "cache")
    cache.keep_case("k1", "t.one", "case a", True)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    path = tmp_path / "cache" / "cases" / "k1"[:2] / "k1"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"obligation": "t.one", "case": "case a", "key": "k1", "covered": True}))
    assert cache.proved_case("k1", "t.one", "case a") is None
    assert "no key can be kept" in capsys.readouterr().err
