"""The released (0.33.0) lifecycle's obligations have teeth: a planted wrong transition fails its obligation.

Each bug is planted by recompiling one spec program from its own source with
one snippet replaced (the snippet must occur exactly once, so a spec edit that
removes it fails here loudly), or by replacing the ring arithmetic; the
obligation's claims are then proved on a small non-power-of-two geometry
(``R = 6``) and must fail, naming the broken goal part. Dropping the caller
behaviour the async-scheduling race breaks (``p_accepted_by_current_row``)
fails the commit's refinement too: the release relies on it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable

import pytest

import replayssm.spec.release_cursor as RC
import replayssm.spec.release_trackers as RT
import replayssm.verify.release_proofs as rp
from replayssm.spec.release_trackers import ReleaseGeometry
from replayssm.spec.vocab import Value, cdiv, cmod
from replayssm.verify.obligation import REGISTRY, Claim, Obligation, prove

PLANTED = {
    "release.commit.refinement": "test_commit_by_written_length_instead_of_accepted",
    "release.advance.refinement": "test_advance_without_the_checkpoint",
    "release.reset.refinement": "test_a_planted_registered_obligation_fails",
    "release.triton_cursor.refinement": "test_triton_flush_one_row_late_is_caught",
    "release.memory_safety": "test_a_reset_past_the_launchs_slots_breaks_memory_safety",
    "release.determinism": "test_two_lanes_advancing_one_entry_break_determinism",
}
"""Each registered release obligation and the test below whose planted bug fails it
(``tests/verify/test_teeth.py`` counts these as listed)."""

SMALL = {"W4 T2 R6": ReleaseGeometry(4, 2, 6)}
SMALL_STP = {"W4 T1 R5": ReleaseGeometry(4, 1, 5)}


def mutant(module, name: str, old: str, new: str) -> Callable:
    """``module.name`` recompiled from its source with ``old`` replaced by ``new``."""
    src = inspect.getsource(getattr(module, name))
    assert src.count(old) == 1, f"snippet occurs {src.count(old)} times in {module.__name__}.{name}: {old!r}"
    ns = dict(vars(module))
    exec(compile(src.replace(old, new), f"<mutant of {module.__name__}.{name}>", "exec"), ns)
    return ns[name]


def bitand_const(x: Value, mask: int) -> Value:
    """``x & mask`` for ``0 <= x < 2**6`` and a constant mask, in the vocabulary."""
    return sum((cmod(cdiv(x, 1 << b), 2) * (1 << b) for b in range(6) if mask >> b & 1), 0)


def plant_program(monkeypatch: pytest.MonkeyPatch, transition: str, fn: Callable) -> None:
    monkeypatch.setitem(RT.PROGRAMS, transition, fn)


def outcome(claims: Iterable[Claim]) -> tuple[str, list[str]]:
    r = prove(Obligation("planted", "release", "planted", lambda: list(claims)))
    return r.status, (r.counterexample or {}).get("violated", [])


def test_the_small_geometries_prove_unplanted() -> None:
    assert outcome(rp.commit_claims(SMALL))[0] == "proved"
    assert outcome(rp.advance_claims(SMALL_STP))[0] == "proved"
    assert outcome(rp.reset_claims(SMALL))[0] == "proved"


def test_commit_by_written_length_instead_of_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    bug = mutant(RT, "commit_program", "accepted_since_checkpoint + accepted))",
                 "accepted_since_checkpoint + previous_query_len))")
    plant_program(monkeypatch, "commit", bug)
    status, violated = outcome(rp.commit_claims(SMALL))
    assert status == "failed" and any("position" in v or "ring row" in v for v in violated), violated


def test_ring_wrap_by_bit_mask_on_a_ring_not_a_power_of_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RT, "ring_advance", lambda start, rows, ring_len: bitand_const(start + rows, ring_len - 1))
    status, violated = outcome(rp.commit_claims(SMALL))
    assert status == "failed", violated
    status, violated = outcome(rp.advance_claims(SMALL_STP))  # R = 5: 0b100 masks rows 1..3 away
    assert status == "failed", violated


def test_ring_wrap_by_bit_mask_is_right_on_a_power_of_two() -> None:
    """The same mask on R = 4 (W = 3, one token) is a remainder: not a bug there, and not reported."""
    assert all(bitand_const(x, 3) == x % 4 for x in range(8))


def test_commit_indexed_by_slot_instead_of_row(monkeypatch: pytest.MonkeyPatch) -> None:
    bug = mutant(RT, "commit_program", 'mem.load("num_accepted_tokens", (offset,), mask, other=0)',
                 'mem.load("num_accepted_tokens", (slot,), valid, other=0)')
    plant_program(monkeypatch, "commit", bug)
    status, violated = outcome(rp.commit_claims(SMALL))
    assert status == "failed", violated


def test_reset_that_leaves_the_pending_query_length(monkeypatch: pytest.MonkeyPatch) -> None:
    bug = mutant(RT, "reset_program", "for buffer in TRACKERS:", "for buffer in TRACKERS[:2]:")
    plant_program(monkeypatch, "reset", bug)
    status, violated = outcome(rp.reset_claims(SMALL))
    assert status == "failed" and "no speculative query pending after a prefill" in violated, violated


def test_advance_without_the_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    bug = mutant(RT, "advance_program", "must_checkpoint = prev + 1 > geo.window", "must_checkpoint = prev > geo.window")
    plant_program(monkeypatch, "advance", bug)
    assert outcome(rp.advance_claims(SMALL_STP))[0] == "failed"


def test_triton_flush_one_row_late_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    bug = mutant(RC, "decode_cursor", "flush = disj(write_pos == buffer_len - 1, prompt_tail)",
                 "flush = disj(write_pos == buffer_len - 2, prompt_tail)")
    status, violated = outcome(rp.triton_claims(((4, 8, True),), cursor=bug))
    assert status == "failed", violated


def test_triton_align_without_the_block_flush_is_caught() -> None:
    bug = mutant(RC, "decode_cursor", "flush = disj(flush, conj(valid, cmod(num_computed + query_len, block_size) == 0))",
                 "flush = flush")
    assert outcome(rp.triton_claims(((4, 6, True),), cursor=bug))[0] == "failed"


def test_dropping_the_row_order_of_accepted_counts_breaks_the_commit() -> None:
    """The async-scheduling race (vLLM #53912): a count of another row reaches this one."""
    dropped = [Claim(c.goal, [(n, t) for n, t in c.assumptions if n != "p_accepted_by_current_row"], c.cover, c.case,
                     c.show, c.memories, strategy=c.strategy) for c in rp.commit_claims(SMALL)]
    assert outcome(dropped)[0] == "failed"


def test_the_obligations_are_registered() -> None:
    assert {"release.commit.refinement", "release.advance.refinement", "release.reset.refinement",
            "release.memory_safety", "release.determinism", "release.triton_cursor.refinement"} <= REGISTRY.keys()


def test_a_planted_registered_obligation_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    bug = mutant(RT, "reset_program", "for buffer in TRACKERS:", "for buffer in TRACKERS[:2]:")
    plant_program(monkeypatch, "reset", bug)
    assert prove(REGISTRY["release.reset.refinement"]).status == "failed"


def test_a_reset_past_the_launchs_slots_breaks_memory_safety(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reset that stores for every lane inside the launch, the NULL block's and any slot past the
    trackers included, instead of the valid lanes only."""
    bug = mutant(RT, "reset_program", "mem.store(buffer, (slot,), 0, valid)",
                 "mem.store(buffer, (slot,), 0, offset < n_slots)")
    plant_program(monkeypatch, "reset", bug)
    assert prove(REGISTRY["release.memory_safety"]).status == "failed"


def test_two_lanes_advancing_one_entry_break_determinism(monkeypatch: pytest.MonkeyPatch) -> None:
    """An advance that stores every lane's ring start to one entry: two rows of distinct slots race."""
    bug = mutant(RT, "advance_program", 'mem.store("ring_start", (slot,), next_start, valid)',
                 'mem.store("ring_start", (0,), next_start, valid)')
    plant_program(monkeypatch, "advance", bug)
    assert prove(REGISTRY["release.determinism"]).status == "failed"


def test_every_release_obligation_names_a_planted_bug_here() -> None:
    release = {n for n in REGISTRY if n.startswith("release.")}
    assert set(PLANTED) == release and all(callable(globals().get(f)) for f in PLANTED.values())
