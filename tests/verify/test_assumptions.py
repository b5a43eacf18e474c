"""Every caller assumption of the system model, dropped: Z3's counterexample
(necessary), or one that breaks only an auxiliary conjunct. The verdicts are
written up in docs/assumptions.md."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from replayssm.spec.assumptions import Assumption
from replayssm.spec.system import SYSTEM_ASSUMPTIONS
from replayssm.verify import assumption_sets as sets
from replayssm.verify import system_probes as sp
from replayssm.verify.obligation import Obligation, prove
from replayssm.verify.system_proofs import preservation_claim

NECESSARY = {
    # assumption: a conjunct its counterexample breaks
    "live_col_is_last_block": "no_token_dropped",
    "decode_row_fits": "capacity",
    "accepted_within_row": "refinement",
    "prefill_chunk_on_boundary": "canonical",
    "fresh_distinct_destinations": "no_token_dropped",
    "groups_agree_on_null": "groups_agree",
    "is_prefilling_agrees": "canonical",
    "fresh_slot_is_free": "no_token_dropped",
    "decode_within_block": "canonical",
}
AUXILIARY_ONLY = {"row_nonempty": "aux.table_layout"}


JOINT = {
    # a set needed only together: a conjunct its counterexample breaks
    "decode_row_fits+row_nonempty+accepted_within_row": "refinement",
}


def _run(name: str, drop: bool | tuple[str, ...], cover_violation: bool = False):
    pr = sp.PROBES[name]
    return prove(Obligation(f"probe {name}", "step", "", lambda: [sp.probe_claim(pr, drop, cover_violation)]))


def test_every_assumption_has_a_probe_and_a_verdict():
    names = {a.name for a in SYSTEM_ASSUMPTIONS}
    assert names == {n for n, pr in sp.PROBES.items() if len(pr.assumptions) == 1}
    assert set(sp.PROBES) - names == set(JOINT)
    assert names == set(NECESSARY) | set(AUXILIARY_ONLY)


def _run_on(name: str, conjunct: str):
    """The probe with its set dropped, its goal only the parts named ``conjunct``."""
    pr = sp.PROBES[name]
    claim = preservation_claim(sp.probe_transition(pr), f"{name} dropped: {conjunct} only",
                               goal_filter=lambda part: conjunct in part, dropped=pr.assumptions)
    assert claim.goal, f"no part is named {conjunct}"
    return prove(Obligation(f"probe {name} on {conjunct}", "step", "", lambda: [claim]))


@pytest.mark.parametrize("name", sorted(NECESSARY))
def test_dropping_a_necessary_assumption_gives_a_counterexample(name):
    """A counterexample, and one to the conjunct named: asked of that conjunct alone, since the first
    model Z3 gives of the whole goal (and so the parts it happens to violate) depends on the terms this
    process built before (it broke another part of groups_agree_on_null's probe in a full run)."""
    r = _run(name, drop=True)
    assert r.status == "failed", r.detail
    assert r.counterexample is not None and r.counterexample["values"]
    on = _run_on(name, NECESSARY[name])
    assert on.status == "failed", on.detail
    assert all(NECESSARY[name] in v for v in on.counterexample["violated"]), on.counterexample["violated"]


@pytest.mark.parametrize("name", ["decode_row_fits", "is_prefilling_agrees", "fresh_slot_is_free",
                                  "live_col_is_last_block"])
def test_the_probe_shape_is_proved_with_the_assumption(name):
    """(fresh_distinct_destinations' probe fixes both fresh blocks equal, which
    the assumption forbids outright: kept, it is vacuous, so it is not here;
    system.step_batch proves the shape with distinct blocks. Likewise
    decode_within_block's: a decode moving two columns at bs = 1 is longer
    than a block.)"""
    assert _run(name, drop=False).status == "proved"


@pytest.mark.parametrize("name", sorted(AUXILIARY_ONLY))
def test_assumption_whose_drop_breaks_only_an_auxiliary_conjunct(name):
    r = _run(name, drop=True)
    assert r.status == "failed"
    assert r.counterexample["violated"] == ["inv(post): " + AUXILIARY_ONLY[name]]


@pytest.mark.parametrize("module", ["assumptions", "binding"])
def test_every_declared_assumption_is_catalogued_and_documented(module):
    """``ALL`` of each spec module lists every ``Assumption`` the module
    declares, and the docs name each one (docs/spec.md or docs/assumptions.md)."""
    mod = importlib.import_module(f"replayssm.spec.{module}")
    declared = {v.name for v in vars(mod).values() if isinstance(v, Assumption)}
    own = {a.name for a in mod.ALL}
    assert declared == own
    docs = Path(__file__).resolve().parents[2] / "docs"
    doc = (docs / "spec.md").read_text() + (docs / "assumptions.md").read_text()
    assert [a.name for a in mod.ALL if f"`{a.name}`" not in doc] == []


# --- assumptions needed jointly (verify/assumption_sets.py, docs/assumptions.md "Needed jointly") ---


@pytest.mark.parametrize("name", sorted(JOINT))
def test_a_joint_system_probe_fails_only_with_the_whole_set_dropped(name):
    """Teeth: the set dropped together gives a counterexample; each member
    dropped alone proves the probe's step shape vacuously: the shape then
    admits no state at all (as with nothing dropped), since each member
    alone keeps a decode row at >= 1 token, which this shape has no room for."""
    r = _run(name, drop=True)
    assert r.status == "failed" and r.counterexample["values"], r.detail
    assert any(JOINT[name] in v for v in r.counterexample["violated"]), r.counterexample["violated"]
    for member in sp.PROBES[name].assumptions:
        r = _run(name, (member,), cover_violation=True)
        assert r.counterexample is None and "vacuous" in r.detail, (member, r.status, r.detail)
    r = _run(name, drop=False)
    assert r.counterexample is None and "vacuous" in r.detail, (r.status, r.detail)


def test_a_probe_refuses_to_drop_what_is_not_in_its_set():
    with pytest.raises(ValueError, match="not in the probe's set"):
        sp.probe_claim(sp.PROBES["decode_row_fits"], ("row_nonempty",))

ROW_SET = ("decode_row_fits", "row_nonempty", "accepted_within_row")


@pytest.mark.parametrize("jp", sets.JOINT_PROBES, ids=lambda jp: jp.name)
def test_a_joint_set_is_needed_only_together(jp):
    """Teeth: the set dropped together gives a counterexample; each member
    dropped alone proves, and non-vacuously (some admitted state violates it)."""
    verdict, r = sets.drop_result(jp, jp.assumptions)
    assert verdict == "failed" and r.counterexample["values"], r.detail
    for name in jp.assumptions:
        verdict, r = sets.drop_result(jp, (name,))
        assert verdict == "proved", (name, verdict, r.detail, r.counterexample)


def test_the_columns_set_breaks_a_block_table_read_past_the_last_column():
    jp = sets.JOINT_PROBES[0]
    _, r = sets.drop_result(jp, jp.assumptions)
    v = r.counterexample["values"]
    assert any("read block_table" in p for p in r.counterexample["violated"])
    table = next(a for a in r.counterexample["accesses"] if a["buffer"] == "block_table")
    assert table["index"][2] >= table["shape"][2] and v["live_col"] == table["index"][2]


@pytest.mark.parametrize("name,obligation,part", [
    ("decode_row_fits", "postprocess.capacity", "committed read + T_row <= R"),
    ("accepted_within_row", "postprocess.live_commit_refines", "refines"),
    ("row_nonempty", "postprocess.prefill_resets", "live column touched"),
])
def test_the_row_set_is_not_needed_only_jointly(name, obligation, part):
    """``decode_row_fits``, ``row_nonempty`` and ``accepted_within_row``
    overlap (each gives a decode row >= 1 token) but each is needed on its
    own: dropped alone it breaks a kernel obligation."""
    verdict, r = sets.drop_result(sets.JointProbe(ROW_SET, obligation), (name,))
    assert verdict == "failed" and any(part in p for p in r.counterexample["violated"]), (verdict, r.detail)


def test_a_drop_outside_the_set_is_refused():
    with pytest.raises(ValueError, match="not in the set"):
        sets.dropped_obligation(sets.JOINT_PROBES[0], ("row_nonempty",))
