"""Sound attribution (issue 36 item 4): a probe's counterexample is re-run, up to the same failing
step, with the assumption restored on the rows that broke it (``review/attribution.py``).

The regression: B1-B3 and D1-D3 were reported ``latent`` on ``row_nonempty`` and
``decode_within_block`` because the probe cut the schedule before its first breaking row, which
threw away the failing step. Restored on their own rows (the empty first prefill rows not
scheduled; the decode row longer than a block scheduling one block, accepting the same tokens)
the same schedules still break ``refinement`` at the same request: a finding. The teeth: a planted
copy of A3 that truly mishandles those rows fails the same probe traces and stays ``latent``
(restoring the rows makes its failure go away).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from replayssm.base.isolation import load_isolated
from replayssm.review import probes as pr
from replayssm.review.attribution import restore_rows, restoration
from replayssm.review.arguments import Row
from replayssm.review.campaign import Version, replay
from replayssm.review.target import detect
from replayssm.fuzz.launcher import Setup

from review_corpus import needs_corpus, version_path

TRACES = Path(__file__).resolve().parents[2] / "docs" / "review_traces"
EMPTY = TRACES / "D2-refinement-without-row_nonempty-empty-first-prefill-rows.json"
LONG = TRACES / "D2-refinement-without-decode_within_block-decode-longer-than-a-block.json"
FOUR_ROWS = TRACES / "D3-refinement-four-row-mode-none-batch.json"

PLANTS = {
    # an empty first prefill row leaves one committed ring row in its fresh slot
    "row_nonempty": ("tl.store(tracker_committed + live_slot, 0, mask=valid_live)",
                     "tl.store(tracker_committed + live_slot, tl.where(query_len == 0, 1, 0), mask=valid_live)"),
    # a decode row longer than a block commits one ring row too many
    "decode_within_block": ("next_committed = tl.where(checkpointed, accepted, old_committed + accepted)",
                            "next_committed = tl.where(checkpointed, accepted, old_committed + accepted) + "
                            "tl.where(query_len > MAMBA_BLOCK_SIZE, 1, 0)"),
}


def _load(trace: Path) -> dict:
    return json.loads(trace.read_text())


def _version(source: Path, label: str) -> Version:
    module = load_isolated(str(source), "--impl", cuda=False, launch_seconds=120)
    return Version(label, str(source), module, detect(module, None))


def _planted(tmp_path: Path, name: str) -> Version:
    old, new = PLANTS[name]
    text = version_path("A3").read_text()
    assert text.count(old) == 1, "the plant's anchor moved in A3"
    path = tmp_path / f"A3_planted_{name}.py"
    path.write_text(text.replace(old, new))
    return _version(path, f"A3-{name}")


def _same_layout(a: dict, b: dict) -> None:
    for key in ("rows", "table", "copies", "expect"):
        assert a[key] == b[key], key
    for key in ("migrate", "postprocess"):
        assert {k: v for k, v in a[key].items() if k != "contained"} == \
               {k: v for k, v in b[key].items() if k != "contained"}, key


def test_a_schedule_that_broke_nothing_is_laid_out_again_as_the_callers_did() -> None:
    trace = _load(FOUR_ROWS)
    kept = restore_rows(trace, frozenset({"row_nonempty"}))
    assert len(kept["steps"]) == len(trace["steps"])
    for a, b in zip(trace["steps"], kept["steps"]):
        _same_layout(a, b)


def test_empty_first_prefill_rows_are_not_scheduled_and_the_rest_runs_as_the_probe_ran_it() -> None:
    trace = _load(EMPTY)
    kept = restore_rows(trace, frozenset({"row_nonempty"}))
    assert kept["#meta"]["dropped"] == []
    rows = [r for s in kept["steps"] for r in s["rows"] if r is not None]
    assert all(r["query_len"] > 0 for r in rows)
    # steps 2 and 3 scheduled only empty rows (and padding): gone; every other row is still there
    assert len(kept["steps"]) == len(trace["steps"]) - 2
    assert len(rows) == sum(r is not None and r["query_len"] > 0 for s in trace["steps"] for r in s["rows"])
    last, was = kept["steps"][-1], trace["steps"][-1]
    assert [r["rid"] for r in last["rows"] if r] == [r["rid"] for r in was["rows"] if r]  # the failing step, whole
    # requests 1 and 2 start from no column: their empty rows never ran
    first: dict[int, dict] = {}
    for s in kept["steps"]:
        for r in s["rows"]:
            if r is not None:
                first.setdefault(r["rid"], r)
    assert first[1]["source_col"] == -1 and first[2]["source_col"] == -1


def test_a_decode_row_longer_than_a_block_becomes_one_block_long_accepting_the_same_tokens() -> None:
    trace = _load(LONG)
    setup = Setup.from_json(trace["params"])
    kept = restore_rows(trace, frozenset({"decode_within_block"}))
    was, now = trace["steps"][3]["rows"][0], kept["steps"][3]["rows"][0]
    assert was["query_len"] > setup.geometry.block_size >= now["query_len"] >= now["accepted"] == was["accepted"]
    assert {k: v for k, v in now.items() if k != "query_len"} == {k: v for k, v in was.items() if k != "query_len"}
    assert kept["steps"][3]["postprocess"]["query_metadata"][0] == now["query_len"]


def _breaking_prefill(trace: dict, name: str) -> tuple[int, int]:
    """Step 6's prefill chunk of request 0 (6 -> 8 tokens), marked as breaking ``name``: its batch row and rid."""
    step = trace["steps"][6]
    b = next(b for b, r in enumerate(step["rows"]) if r and r["prefilling"] and r["computed_before"] > 0)
    step["row_breaks"][b] = [name]
    return b, step["rows"][b]["rid"]


def test_a_row_no_row_of_the_same_effect_restores_is_recomputed_and_its_request_runs_on() -> None:
    """Regression: a broken prefill chunk no one row restores took its request out of the schedule, its later
    rows inside the contract with it; the request is now recomputed to the same state (a prefill from 0 to
    where the chunk left it, as vLLM does after a preemption) and runs on as the probe ran it."""
    trace = _load(EMPTY)
    setup = Setup.from_json(trace["params"])
    b, rid = _breaking_prefill(trace, "positions_in_model")
    how, again = restoration(setup, Row(**trace["steps"][6]["rows"][b]), True, frozenset({"positions_in_model"}))
    assert how == "recompute" and again is not None
    assert (again.computed_before, again.query_len, again.prefilling, again.source_col) == (0, 8, True, -1)
    kept = restore_rows(trace, frozenset({"positions_in_model"}))
    mine = [r for r in kept["steps"][6]["rows"] if r and r["rid"] == rid]
    assert [(r["computed_before"], r["query_len"]) for r in mine] == [(0, 8)]
    assert [r for r in kept["steps"][7]["rows"] if r and r["rid"] == rid] == \
           [r for r in trace["steps"][7]["rows"] if r and r["rid"] == rid]  # its later row runs as it ran
    assert rid in [e[0] for e in kept["steps"][7]["expect"]["running"]]


@pytest.mark.parametrize("dropped", [{"fresh_slot_is_free"}, {"columns_in_table", "model_fits_table"}])
def test_a_row_that_broke_an_assumption_no_row_shows_is_never_recomputed(dropped: set[str]) -> None:
    """Regression (the recompute's own false findings, A3's review): a first prefill row given a block that is
    not free (``fresh_slot_is_free``), or a chunk past its table (``columns_in_table``), recomputed on the same
    blocks and table breaks the assumption again, and its failure was a finding; a scheduler's or launch's
    assumption is not read on a row, so the request leaves the schedule (teeth: the recompute test above)."""
    trace = _load(EMPTY)
    setup = Setup.from_json(trace["params"])
    b, _rid = _breaking_prefill(trace, next(iter(dropped)))
    assert restoration(setup, Row(**trace["steps"][6]["rows"][b]), True, frozenset(dropped))[0] == "remove"


def test_a_decode_that_publishes_a_block_its_recompute_would_not_is_never_recomputed() -> None:
    """A decode of 2 tokens from 3 on blocks of 2 crosses the boundary at 4 and publishes column 1; a prefill
    from 0 to 5 ends inside a block and publishes nothing, so the step's expected prefix would go missing: the
    request leaves the schedule. Teeth: the same decode from 2 (ending at 4, on the boundary) is recomputed."""
    setup = Setup.from_json(_load(LONG)["params"])
    crossing = Row(1, 0, 0, 3, 2, 2, False, 0, 0)
    assert restoration(setup, crossing, False, frozenset({"decode_within_block"}))[0] == "remove"
    assert restoration(setup, replace(crossing, computed_before=2), False,
                       frozenset({"decode_within_block"}))[0] == "recompute"


def test_a_row_no_row_of_the_same_effect_restores_takes_its_request_out_from_then_on() -> None:
    """Where the recompute breaks the assumption too (the chunk ends past the model's length), the request leaves."""
    trace = _load(EMPTY)
    trace["params"]["max_model_len"] = 7
    setup = Setup.from_json(trace["params"])
    b, rid = _breaking_prefill(trace, "positions_in_model")
    assert restoration(setup, Row(**trace["steps"][6]["rows"][b]), True, frozenset({"positions_in_model"}))[0] == "remove"
    kept = restore_rows(trace, frozenset({"positions_in_model"}))
    for s in kept["steps"][6:]:
        assert rid not in [r["rid"] for r in s["rows"] if r] and rid not in [e[0] for e in s["expect"]["running"]]
    assert rid in [e[0] for e in kept["steps"][5]["expect"]["running"]]  # still expected before it


@needs_corpus
@pytest.mark.parametrize("label", ["B1", "D2"])
@pytest.mark.parametrize("name, trace", [("row_nonempty", EMPTY), ("decode_within_block", LONG)])
def test_a_failure_that_survives_restoring_the_rows_is_a_finding(label: str, name: str, trace: Path,
                                                                  tmp_path: Path) -> None:
    v = _version(version_path(label), label)
    probe_trace = tmp_path / trace.name
    probe_trace.write_text(trace.read_text())
    assert not replay(str(probe_trace), [v])[0]
    relied, independent = pr.confirm(str(probe_trace), pr.Probe((name,)), v, "cpu")
    assert not relied and independent is not None
    assert independent.prop == "refinement" and "request 1" in independent.message
    assert pr.outcome_of(pr.Probe((name,)), _outcome(), relied, independent) == "finding"
    saved = json.loads(Path(independent.trace).read_text())
    assert saved["#meta"]["failure"].startswith("refinement") and saved["#meta"]["dropped"] == []


@needs_corpus
@pytest.mark.parametrize("name, trace", [("row_nonempty", EMPTY), ("decode_within_block", LONG)])
def test_teeth_a_version_that_truly_relies_on_the_assumption_stays_latent(name: str, trace: Path,
                                                                         tmp_path: Path) -> None:
    planted, clean = _planted(tmp_path, name), _version(version_path("A3"), "A3")
    probe_trace = tmp_path / trace.name
    probe_trace.write_text(trace.read_text())
    assert replay(str(probe_trace), [clean])[0]  # A3 holds the probe's schedule ...
    assert not replay(str(probe_trace), [planted])[0]  # ... the planted copy breaks it
    relied, independent = pr.confirm(str(probe_trace), pr.Probe((name,)), planted, "cpu")
    assert relied and independent is None
    assert pr.outcome_of(pr.Probe((name,)), _outcome(), relied, independent) == "latent"


#: A3 planted (tests only) on request 0 of ``EMPTY``, whose prefill chunk 6 -> 8 (step 6) is marked broken:
#: its decode from 8 (step 7, inside the contract) commits one ring row too many; or the broken chunk itself
#: (a prefill from 6) leaves one committed ring row in its live slot.
LATER_ROW = ("next_committed = tl.where(checkpointed, accepted, old_committed + accepted)",
             "next_committed = tl.where(checkpointed, accepted, old_committed + accepted) + "
             "tl.where(computed_before == 8, 1, 0)")
BROKEN_ROW = ("tl.store(tracker_committed + live_slot, 0, mask=valid_live)",
              "tl.store(tracker_committed + live_slot, tl.where(computed_before == 6, 1, 0), mask=valid_live)")


@needs_corpus
@pytest.mark.parametrize("plant, relies", [(LATER_ROW, False), (BROKEN_ROW, True)])
def test_a_later_row_of_a_recomputed_request_that_fails_on_its_own_is_a_finding(plant: tuple[str, str], relies: bool,
                                                                                 tmp_path: Path) -> None:
    """Regression: a request whose broken row no one row restores left the schedule with its later rows, so a
    later row inside the contract that fails on its own was reported as reliance (latent); recomputed to the
    same state it runs on, and that failure is a finding. Teeth: a copy that fails only on the broken row
    itself stays latent."""
    old, new = plant
    text = version_path("A3").read_text()
    assert text.count(old) == 1, "the plant's anchor moved in A3"
    (tmp_path / "A3_planted.py").write_text(text.replace(old, new))
    planted = _version(tmp_path / "A3_planted.py", "A3-planted")
    trace = _load(EMPTY)
    _breaking_prefill(trace, "row_nonempty")
    probe_trace = tmp_path / EMPTY.name
    probe_trace.write_text(json.dumps(trace))
    assert not replay(str(probe_trace), [planted])[0]  # the planted copy breaks the probe's schedule
    relied, independent = pr.confirm(str(probe_trace), pr.Probe(("row_nonempty",)), planted, "cpu")
    assert relied is relies and (independent is None) is relies
    assert pr.outcome_of(pr.Probe(("row_nonempty",)), _outcome(), relied, independent) == \
           ("latent" if relies else "finding")
    if independent is not None:
        assert independent.prop == "refinement" and "request 0" in independent.message, independent.message


def _outcome():
    from replayssm.review.campaign import CampaignOutcome, Tally

    return CampaignOutcome(Tally(broken_steps=5), 1.0)
