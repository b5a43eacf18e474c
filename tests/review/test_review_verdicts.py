"""The three kinds of review verdict (``pass``, ``finding``, ``latent``), the
probes behind them (one per droppable assumption and per jointly needed set),
and reliance compared with a base: unit checks on records, and teeth on
planted versions of the corpus."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from replayssm.cli import main
from replayssm.fuzz.caller_shapes import GEOMETRIES
from replayssm.review import probes as pr
from replayssm.review.verdict_parts import ContractNote, Counterexample, LifecycleResult, ProbeOutcome, ReviewParts
from replayssm.review.verdicts import build_verdict, junit_cases, print_table
from replayssm.spec import assumptions as env
from replayssm.spec.geometry import Conventions
from replayssm.verify.assumption_sets import JOINT_PROBES
from review_corpus import needs_corpus, version_path

TRACKERS = env.BLOCK_COPY_MOVES_TRACKERS.name

PLANT = ("needs_copy = valid_mapping & (src_slot != dst_slot)",
         "needs_copy = valid_mapping & (src_slot != dst_slot) & (src_slot < 0)")
"""D2 planted: its copy kernel never plans the live slot's copy into a reassigned
block, so the version relies on the scheduler's block copy carrying state,
ring and trackers (``live_move_copies_state``, ``block_copy_moves_trackers``)."""

TABLE_SHORT = frozenset(env.TABLE_SHORT_BY_ONE.names)


def test_every_droppable_assumption_and_joint_set_has_a_probe_that_can_break_it() -> None:
    names = [p.name for p in pr.probes()]
    assert names == [*(a.name for a in env.ALL if a.caller_breaks), *(a.name for a in env.ALL if a.breaker),
                     *("+".join(s.names) for s in env.SETS)]
    assert {"block_copy_moves_trackers", "live_move_copies_state", "prefill_continuation_longer_than_one",
            "row_nonempty", "columns_in_table+model_fits_table"} <= set(names)
    for s in env.SETS:  # each set is measured to be needed jointly
        assert any(frozenset(jp.assumptions) == frozenset(s.names) for jp in JOINT_PROBES)
    for p in pr.probes():  # each reaches some system: a convention and a geometry where it can break
        assert any(p.reach.conventions(c) for c in Conventions.all()), p.name
        assert any(p.reach.geometry(g) for g in GEOMETRIES), p.name


def test_a_joint_set_is_guaranteed_when_one_member_is(monkeypatch) -> None:
    monkeypatch.setattr(pr, "guaranteed", lambda name: name == env.MODEL_FITS_TABLE.name)
    assert pr.Probe(tuple(sorted(TABLE_SHORT))).guaranteed
    monkeypatch.setattr(pr, "guaranteed", lambda name: False)
    assert not pr.Probe(tuple(sorted(TABLE_SHORT))).guaranteed


def test_probes_share_what_is_left_by_weight(monkeypatch) -> None:
    monkeypatch.setattr(pr, "guaranteed", lambda name: name != TRACKERS)
    a, b, c = pr.Probe((TRACKERS,)), pr.Probe(("row_nonempty",)), pr.Probe(("decode_row_fits",))
    assert pr.share(a, [a, b, c], 10.0) == pytest.approx(10.0 * pr.WEIGHT_NOT_GUARANTEED / (pr.WEIGHT_NOT_GUARANTEED + 2))
    assert pr.share(b, [b, c], 3.0) == pytest.approx(1.5)  # what an early finish left goes to the rest
    assert pr.share(c, [c], -1.0) == 0.0  # overrun: nothing left, the probe will not finish


def _trace(breaks: list[list[str]]) -> dict:
    row = {"rid": 0, "stream": 0, "req": 0, "computed_before": 4, "query_len": 1, "accepted": 1,
           "prefilling": False, "live_col": 1, "source_col": 0}
    step = {"rows": [row], "table": [[[1, 2]]], "copies": [], "migrate": {}, "postprocess": {}, "expect": {}}
    return {"#meta": {"dropped": ["row_nonempty", TRACKERS]}, "params": {"geometry": {"pad_slot": 0}},
            "steps": [{**step, "breaks": b} for b in breaks]}


def test_restoring_tracker_copies_puts_them_back_and_cuts_nothing() -> None:
    copies = pr.restored(_trace([[TRACKERS], [TRACKERS]]), pr.Probe((TRACKERS,)))
    assert len(copies["steps"]) == 2 and copies["#meta"]["dropped"] == ["row_nonempty"]
    assert all(s["copies"] == [[0, 1, 2]] and s["breaks"] == [] for s in copies["steps"])


def _probe(outcome: str, guaranteed: bool, **more) -> dict:
    return {"assumptions": [more.pop("name", TRACKERS)], "guaranteed": guaranteed, "outcome": outcome,
            "relied_on": outcome in ("latent", "relies on a guarantee"), "property": "forward",
            "trace": "t.json", "message": "forward: decode reads ...", "independent_finding": None,
            "seconds": 1.0, "why": "broke it in 0 step(s)", **more}


@pytest.mark.parametrize("outcome, guaranteed, status, junit", [
    ("latent", False, "latent", "failure"),
    ("relies on a guarantee", True, "pass", None),
    ("no counterexample", False, "pass", None),
    ("not finished", False, "coverage shortfall", "error"),
    ("not finished", True, "pass", "skipped"),
])
def test_a_probe_outcome_gives_the_verdict_and_its_test_case(outcome: str, guaranteed: bool, status: str,
                                                             junit: str | None, capsys) -> None:
    held = LifecycleResult({"request_steps": 100}, {"refinement": "held"}, (), (), 1.0)
    v = build_verdict("X", "x.py", "A", "gen A",
                      ReviewParts(lifecycle=held, probes=[ProbeOutcome(TRACKERS, _probe(outcome, guaranteed))]))
    assert v.status == status
    case = next(c for c in junit_cases([v]) if c.name == f"X: probe without {TRACKERS}")
    assert (case.kind if case.failure is not None else None) == junit
    if outcome == "latent":
        assert [x.as_json() for x in v.latent] == [{"assumption": TRACKERS, "property": "forward", "message": "forward: decode reads ...",
                             "trace": "t.json", "replay": "replayssm-verify replay t.json --impl x.py", "impact": None}]
        assert case.failure.startswith(f"latent: relies on {TRACKERS}, which vLLM does not guarantee")
    print_table([v], None)
    table = capsys.readouterr().out.splitlines()
    assert "latent" in table[0] and status in table[1]
    listed = next((line for line in table if line.startswith("X latent (not guaranteed)")
                   or line.startswith("X relies on (guaranteed)")), "")
    assert (TRACKERS in listed) == (outcome in ("latent", "relies on a guarantee"))


def test_a_finding_outranks_latent_and_a_latent_outranks_a_shortfall() -> None:
    probes = [ProbeOutcome(TRACKERS, _probe("latent", False)),
              ProbeOutcome("row_nonempty", _probe("not finished", False, name="row_nonempty"))]
    assert build_verdict("X", "x.py", "A", "gen A", ReviewParts(probes=probes)).status == "latent"
    broken = LifecycleResult({}, {"frame": "held"}, (Counterexample("frame", "m", "f.json", True, "r"),), (), 1.0)
    v = build_verdict("X", "x.py", "A", "gen A", ReviewParts(lifecycle=broken, probes=probes))
    assert v.status == "finding" and v.properties == {"frame": "broken"}


def _planted(tmp_path: Path) -> Path:
    text = version_path("D2").read_text()
    assert text.count(PLANT[0]) == 1
    out = tmp_path / "D2_planted.py"
    out.write_text(text.replace(*PLANT))
    return out


@pytest.fixture
def trackers_only(monkeypatch):
    """Reviews probe only ``block_copy_moves_trackers``, taken as not guaranteed by vLLM."""
    monkeypatch.setattr(pr, "guaranteed", lambda name: name != TRACKERS)
    monkeypatch.setattr(pr, "probes", lambda: [pr.Probe((TRACKERS,))])


@needs_corpus
def test_a_version_relying_on_an_unguaranteed_assumption_is_latent_not_pass(tmp_path: Path, trackers_only,
                                                                           capsys) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    code = main(["review", str(_planted(tmp_path)), "--examples", "6", "--traces", str(tmp_path / "traces"),
                 "--json", str(report), "--junit", str(junit)])
    out = capsys.readouterr().out
    document = json.loads(report.read_text())
    assert document["schema"] == "replayssm-review/2"
    verdict = document["verdicts"][0]
    # D2's own kernel proofs fail with counterexamples that replay (the mode-none read past the
    # row, docs/kernel-proofs.md): a proved finding outranks the latent reliance, still reported
    assert code == 1 and not verdict["findings"], out
    assert verdict["status"] == ("finding" if verdict["kernel_findings"] else "latent"), out
    (latent,) = [x for x in verdict["latent"] if x["trace"] is not None]  # D's kernel latency has no trace
    assert latent["assumption"] == TRACKERS and Path(latent["trace"]).exists()
    assert verdict["assumptions"][TRACKERS]["outcome"] == "latent"
    assert main(["replay", latent["trace"], "--recorded"]) == 1  # the counterexample, with the assumption dropped
    cases = {c.get("name"): c for c in ElementTree.parse(junit).getroot().iter("testcase")}
    failure = cases[f"D2_planted: probe without {TRACKERS}"].find("failure")
    assert failure is not None and f"trace: {latent['trace']}" in failure.text
    assert f"assumptions dropped: {TRACKERS}" in failure.text


@needs_corpus
def test_a_head_that_starts_relying_on_an_unguaranteed_assumption_is_a_regression(tmp_path: Path, trackers_only,
                                                                                 capsys) -> None:
    report = tmp_path / "r.json"
    code = main(["review", str(_planted(tmp_path)), "--base", str(version_path("D2")), "--examples", "6",
                 "--traces", str(tmp_path / "traces"), "--json", str(report)])
    out = capsys.readouterr().out
    verdict = json.loads(report.read_text())["verdicts"][0]
    assert code == 1 and verdict["status"] == "finding", out
    assert verdict["base_assumptions"][TRACKERS]["outcome"] in ("no counterexample", "not finished")
    (regression,) = [d for d in verdict["differences"] if d["kind"] == "regression"]
    assert regression["assumption"] == TRACKERS and regression["trace"] == verdict["latent"][0]["trace"]
    assert "regression of reliance on block_copy_moves_trackers" in out


def test_a_note_is_its_own_verdict_and_a_finding_only_with_strict(capsys) -> None:
    """A deviation no consumer reads (a launch clause says so) makes the verdict
    ``note``, never a failure of its test case; ``--strict`` makes it a finding;
    a finding or a latent reliance outranks it."""
    note = ContractNote("work_list_read_to_first_end", "active_request_indices [0, -1, 1]: ...", "n.json", "r")
    held = LifecycleResult({"request_steps": 100}, {"materialize": "held"}, (), (), 1.0, (note,))
    v = build_verdict("X", "x.py", "A", "gen A", ReviewParts(lifecycle=held))
    assert v.status == "note"
    assert next(c for c in junit_cases([v]) if c.name == "X: lifecycle campaign").failure is None
    print_table([v], None)
    assert "X notes (nobody reads): work_list_read_to_first_end" in capsys.readouterr().out.splitlines()
    strict = build_verdict("X", "x.py", "A", "gen A", ReviewParts(lifecycle=held), strict=True)
    assert strict.status == "finding"
    assert "a finding with --strict" in next(c for c in junit_cases([strict]) if c.name == "X: lifecycle campaign").failure
    latent = ReviewParts(lifecycle=held, probes=[ProbeOutcome(TRACKERS, _probe("latent", False))])
    assert build_verdict("X", "x.py", "A", "gen A", latent).status == "latent"
    assert build_verdict("X", "x.py", "A", "gen A", ReviewParts(lifecycle=LifecycleResult(
        {"request_steps": 100}, {"materialize": "held"}, (), (), 1.0))).status == "pass"
