"""The proof cache trusts nothing it reads back (issue 27): an entry that is
not the one asked for (another obligation's copied over it, ``{}``, garbage
bytes) is ignored with a warning and proved again, never reported, never a
crash; and with ``$HOME`` unwritable ``prove`` announces no cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.cli import main

SOME = "boundary."
"""A few obligations that prove in milliseconds."""


def _warm(cache: Path, capsys: pytest.CaptureFixture, tmp_path: Path) -> tuple[list[str], list[str]]:
    """A ``prove`` run's arguments, run once so that the cache is warm, and the names it proved."""
    args = ["prove", "--only", SOME, "--jobs", "1", "--cache", str(cache), "--json", str(tmp_path / "r.json")]
    assert main(args) == 0
    names = [o["name"] for o in json.loads((tmp_path / "r.json").read_text())["obligations"]]
    capsys.readouterr()
    return args, names


def _entries(cache: Path, kind: str) -> list[Path]:
    return sorted(p for p in (cache / kind).rglob("*") if p.is_file())


def _named(entry: Path) -> str:
    return json.loads(entry.read_bytes().partition(b"\n")[2])["obligation"]  # after its signature's line


def test_an_obligation_entry_copied_over_another_is_not_trusted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cache = tmp_path / "cache"
    args, proved = _warm(cache, capsys, tmp_path)
    first, second = _entries(cache, "obligations")[:2]
    second.write_bytes(first.read_bytes())  # the second obligation's key now holds the first's proof
    assert main(args) == 0
    out = capsys.readouterr()
    report = json.loads((tmp_path / "r.json").read_text())["obligations"]
    names = [o["name"] for o in report]
    assert names == proved, names  # each once, none dropped
    assert f"warning: proof cache entry {second} ignored" in out.err and f"{_named(first)!r}" in out.err
    proved_again = [o for o in report if not o.get("cached")]
    assert len(proved_again) == 1 and proved_again[0]["name"] != _named(first)
    assert _named(second) != _named(first)  # and the cache holds the right entry again


@pytest.mark.parametrize("content", [b"{}", b"\x00\xff garbage \x89PNG", b"[1, 2]", b'{"obligation": 3}'])
def test_a_corrupt_entry_is_proved_again_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          content: bytes) -> None:
    cache = tmp_path / "cache"
    args, proved = _warm(cache, capsys, tmp_path)
    from replayssm.base import secret_key
    from replayssm.verify.proof_cache import SEAL

    for entry in _entries(cache, "cases") + _entries(cache, "obligations") + _entries(cache, "catalogs"):
        # signed with this user's key (as a bug of ours would write it): the entry's own checks catch it
        entry.write_bytes(SEAL + str(secret_key.sign(content)).encode() + b"\n" + content)
    assert main(args) == 0
    out = capsys.readouterr()
    report = json.loads((tmp_path / "r.json").read_text())["obligations"]
    assert [o["name"] for o in report] == proved and not any(o.get("cached") or o.get("cases_cached") for o in report), report
    assert out.err.count("warning: proof cache entry") >= 3 and "Traceback" not in out.err


def test_a_case_entry_of_another_key_or_obligation_is_not_trusted(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from replayssm.verify.proof_cache import ProofCache

    cache = ProofCache(tmp_path)
    cache.keep_case("k1", "t.one", "case a", True)
    assert cache.proved_case("k1", "t.one", "case a") == {"covered": True}
    (tmp_path / "cases" / "k2"[:2]).mkdir(parents=True)
    (tmp_path / "cases" / "k2"[:2] / "k2").write_bytes((tmp_path / "cases" / "k1"[:2] / "k1").read_bytes())
    assert cache.proved_case("k2", "t.one", "case a") is None  # the key it hashed to differs
    assert cache.proved_case("k1", "t.two", "case a") is None
    assert cache.hits == 1
    assert capsys.readouterr().err.count("warning: proof cache entry") == 2


def test_another_case_with_the_same_query_reuses_the_entry_without_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two cases of one obligation whose queries are the same terms (two
    explicit BMC cases: their query is their exploration's verdict) share
    one key: the entry of one is the proof of the other, not a corrupt
    cache (a first cold run used to print hundreds of such warnings), and
    a missing entry is a plain miss."""
    from replayssm.verify.proof_cache import ProofCache

    cache = ProofCache(tmp_path)
    assert cache.proved_case("k1", "t.one", "case a") is None
    cache.keep_case("k1", "t.one", "case a", False)
    assert cache.proved_case("k1", "t.one", "case b") == {"covered": False} and cache.hits == 1
    assert capsys.readouterr().err == ""


def test_a_cold_run_filling_an_empty_cache_prints_no_warning(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """An obligation whose two cases state one query (as ``system.bmc``'s v2
    and v1 explorations do) fills a fresh cache without a warning, and the
    next run finds both cases proved."""
    from replayssm.verify.obligation import Claim, Obligation, prove
    from replayssm.verify.proof_cache import ProofCache
    from replayssm.verify.terms import named_int

    x = named_int("test.cache_x")
    twins = Obligation("t.twins", "t", "", lambda: [Claim([("positive", x > 0)], [("x above 1", x > 1)], True, c)
                                                    for c in ("v2 case", "v1 case")])
    assert prove(twins, cache=ProofCache(tmp_path)).status == "proved"
    again = ProofCache(tmp_path)
    assert prove(twins, cache=again).status == "proved" and again.hits == 2
    assert capsys.readouterr().err == ""


def test_prove_with_home_unwritable_announces_no_cache(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file, so that no one (root included) can make folders under it")
    env = {k: v for k, v in os.environ.items() if k not in ("REPLAYSSM_VERIFY_CACHE", "XDG_CACHE_HOME")}
    run = subprocess.run([sys.executable, "-m", "replayssm", "prove", "--only", "boundary.exact", "--jobs", "1"],
                         capture_output=True, text=True, env={**env, "HOME": str(home)}, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no proof cache" in run.stdout and "proof cache /" not in run.stdout, run.stdout
    assert f"warning: no proof cache: cannot write {home}/.cache/replayssm-verify" in run.stderr, run.stderr
