"""Each finding's impact in vLLM's terms (issue 36 item 3, ``review/impact.py``): whose state goes wrong,
what the next forward pass computes, which input shape reaches it; read from the finding's own evidence
(the trace run again, the kernel counterexample's launch). A deviation nobody reads is a note."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from replayssm.base.isolation import load_isolated
from replayssm.base.sarif import review_issues
from replayssm.fuzz.launcher import Setup
from replayssm.review.arguments import CallerStep, Row
from replayssm.review.attribution import restore_rows
from replayssm.review.campaign import Version
from replayssm.review.impact import Impact, _frame, of_kernel_launch, of_trace
from replayssm.review.target import detect
from replayssm.review.verdict_parts import Counterexample, LifecycleResult, ReviewParts
from replayssm.review.verdicts import UNREAD, build_verdict, print_table, verdict_json

from review_corpus import needs_corpus, version_path

TRACES = Path(__file__).resolve().parents[2] / "docs" / "review_traces"
PARAMS = {"geometry": {"max_num_reqs": 3, "block_size": 4, "window": 4, "ring_len": 6, "pad_slot": 0},
          "conventions": {"cumulative": False, "post_step": False, "has_idx_mapping": False,
                          "materialize_prefixes": False, "live_col_is_zero": False},
          "layers_per_group": [1], "num_cols": 1, "num_slots": 8}


def _launch(num_reqs: int, query: list[int]) -> dict:
    maxr = PARAMS["geometry"]["max_num_reqs"]
    return {"params": PARAMS, "#meta": {"property": "memory_safety"}, "actions": [{"name": "launch", "picks": {
        "num_reqs": num_reqs, "block_table": [[[b + 1] for b in range(maxr)]],
        "query_metadata": query + [0] * (maxr - len(query)), "num_computed_tokens": [0] * maxr,
        "num_accepted_tokens": [0] * maxr, "is_prefilling": [True] * maxr, "live_cols": [0] * maxr}}]}


def test_a_prefill_past_its_one_column_row_resets_the_next_rows_request() -> None:
    hit = of_kernel_launch(_launch(2, [9, 1]), "memory_safety")  # 9 tokens of 4-token blocks: 3 columns, 1 held
    assert (hit.whose, hit.read) == ("another request", True) and hit.who == "request 1 (batch row 1)"
    assert "request 0's row a prefill chunk of 9 token(s)" in hit.shape and "1-column block table" in hit.shape
    stale = of_kernel_launch(_launch(1, [5]), "frame")
    assert stale.whose == "another request" and "past the batch" in stale.next_pass
    beyond = of_kernel_launch(_launch(3, [1, 1, 5]), "memory_safety")  # the last row of the table
    assert beyond.whose == "memory outside the buffers"
    null = of_kernel_launch(_launch(1, [1]), "frame", [0, 0], null_block_only=True)  # proved: only the null block
    assert (null.whose, null.read) == ("the null block", False)
    unproved = of_kernel_launch(_launch(1, [1]), "frame", [0, 0])  # one model's null store proves nothing more
    assert (unproved.whose, unproved.read) == ("another request", True) and "not proved" in unproved.next_pass
    real = of_kernel_launch(_launch(1, [1]), "frame", [0, 2])  # teeth: the same store to a real slot
    assert (real.whose, real.read) == ("another request", True) and "slot 2" in real.who
    inside = of_kernel_launch(_launch(2, [4, 1]), "equivalence")
    assert inside.whose == "this request" and inside.who.startswith("request 0")


class _Trackers:
    """The harness's tracker arrays (what ``_frame`` reads of it)."""

    def __init__(self, start: np.ndarray, committed: np.ndarray) -> None:
        self.arrays = (start, committed)

    def tracker_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.arrays


class _Slots:
    group_layers = [[0]]
    state: dict = {}


@pytest.mark.parametrize("held, whose, read", [(False, "a free block", False), (True, "another request", True)])
def test_a_block_no_row_names_changed_is_nobody_s_when_free_and_a_request_s_when_held(held: bool, whose: str,
                                                                                     read: bool) -> None:
    """Teeth: the same frame change (slot 5's trackers) is a note on a free block, a finding on a held one."""
    setup = Setup.from_json(PARAMS)
    before = (np.zeros((1, 8), dtype=np.int64), np.zeros((1, 8), dtype=np.int64))
    after = (before[0].copy(), before[1].copy())
    after[1][0, 5] = 2
    row = Row(0, 0, 0, 4, 1, 1, False, 0, 0)
    step = CallerStep([row], [[[3], [0], [0]]], [], {}, {})
    running = [[0, 0, 5, 0, [[3]]]] + ([[1, 1, 8, 0, [[5]]]] if held else [])
    impact = _frame(setup, _Trackers(*after), _Slots(), step, {"running": running, "published": []},  # type: ignore[arg-type]
                    before, {}, lambda focus: "shape", "frame")
    assert (impact.whose, impact.read) == (whose, read) and "slot 5" in impact.who


def _frame_of(changed: dict[int, int], running: list, prop: str = "frame") -> Impact:
    """``_frame`` of a step whose one row (request 0, slot 3) leaves the committed counts of ``changed``
    (slot -> value) changed, ``running`` the expected running requests."""
    setup = Setup.from_json(PARAMS)
    before = (np.zeros((1, 8), dtype=np.int64), np.zeros((1, 8), dtype=np.int64))
    after = (before[0].copy(), before[1].copy())
    for slot, value in changed.items():
        after[1][0, slot] = value
    step = CallerStep([Row(0, 0, 0, 4, 1, 1, False, 0, 0)], [[[3], [0], [0]]], [], {}, {})
    return _frame(setup, _Trackers(*after), _Slots(), step, {"running": running, "published": []},  # type: ignore[arg-type]
                  before, {}, lambda focus: "shape", prop)


def test_a_changed_free_or_null_block_does_not_hide_a_changed_held_block() -> None:
    """Regression (the review of issue 36's impact): a free slot (1) and the null block (0) written beside a
    block request 1 holds (5) were told by the lowest slot, 'a free block', a note; the held block wins."""
    running = [[0, 0, 5, 0, [[3]]], [1, 1, 8, 0, [[5]]]]
    impact = _frame_of({0: 1, 1: 3, 5: 2}, running)
    assert (impact.whose, impact.read) == ("another request", True) and "slot 5" in impact.who
    assert _frame_of({1: 3, 0: 1}, running).whose == "a free block"  # teeth: no held block written: a note
    assert _frame_of({0: 1}, running).whose == "the null block"


@pytest.mark.parametrize("prop", ["forward", "process"])
def test_a_forward_or_process_failure_is_read_whatever_else_the_step_wrote(prop: str) -> None:
    """Regression: a ``forward`` failure (this pass read a wrong state) in a step where a padding row wrote the
    null block was 'the null block, nobody reads it'; what the step's rows compute is always read."""
    impact = _frame_of({0: 1}, [[0, 0, 5, 0, [[3]]]], prop)
    assert (impact.whose, impact.read) == ("this request", True)
    assert _frame_of({0: 1}, [[0, 0, 5, 0, [[3]]]], "frame").read is False  # teeth: the same step's frame is a note


def _finding(whose: str) -> Counterexample:
    return Counterexample("frame", "frame: group 0 slot 5 ...", "t.json", True, "replay t.json",
                          Impact(whose, "slot 5", "what the next pass computes", "the shape"))


@pytest.mark.parametrize("whose, status, strict_status", [("a free block", "note", "finding"),
                                                          ("another request", "finding", "finding")])
def test_a_finding_nobody_reads_is_a_note_and_strict_makes_it_a_finding(whose: str, status: str,
                                                                        strict_status: str, capsys) -> None:
    life = LifecycleResult({"request_steps": 100}, {"frame": "broken"}, (_finding(whose),), (), 1.0)
    v = build_verdict("X", "x.py", "A", "gen A", ReviewParts(lifecycle=life))
    assert v.status == status
    assert build_verdict("X", "x.py", "A", "gen A", ReviewParts(lifecycle=life), strict=True).status == strict_status
    doc = verdict_json(v)
    entries = doc["findings"] if status == "finding" else doc["notes"]
    assert len(entries) == 1 and ("slot 5" in json.dumps(entries[0]))
    if status == "finding":
        assert doc["findings"][0]["impact"]["whose"] == whose and doc["findings"][0]["impact"]["read"] is True
        issue = review_issues({"verdicts": [doc]})[0]
        assert "impact: slot 5 (another request): what the next pass computes" in issue.message
        print_table([v], None)
        assert "impact: X finding (frame): slot 5 (another request)" in capsys.readouterr().out
    else:
        assert doc["properties"]["frame"] == UNREAD and doc["findings"] == []


#: D2 planted (tests only): its mode-none prefill reset kept to the row's own column, so no row writes
#: another row's trackers; and a commit of its own that goes wrong at a decode from 2 committed rows.
D2_OWN_ROW = [("mask=valid_prefill_slot)", "mask=valid_prefill_slot & (col == 0))"),
              ("tl.store(tracker_committed + live_slot, next_committed)",
               "tl.store(tracker_committed + live_slot, next_committed + tl.where(old_committed == 2, 1, 0))")]


def _d2(tmp_path: Path | None = None) -> Version:
    source = version_path("D2")
    if tmp_path is not None:
        text = source.read_text()
        for old, new in D2_OWN_ROW:
            assert old in text, "the plant's anchor moved in D2"
            text = text.replace(old, new)
        source = tmp_path / "D2_own_row.py"
        source.write_text(text)
    module = load_isolated(str(source), "--impl", cuda=False, launch_seconds=120)
    return Version("D2", str(source), module, detect(module, None))


@needs_corpus
@pytest.mark.parametrize("name, writer", [("row_nonempty", "request 3's row (batch row 1, a prefill chunk of 3"),
                                          ("decode_within_block", "request 2's row (batch row 0, a prefill chunk of 13")])
def test_the_d2_refinement_finding_is_another_rows_prefill_resetting_the_request(name: str, writer: str) -> None:
    """Regression: D2's refinement of request 1 (the row_nonempty and decode_within_block probes, a finding
    with the rows restored) was told as request 1's own (``this request``); with its row alone in the batch
    request 1 is right: a mode-none prefill chunk of another request spans more blocks than its one-column
    row and resets request 1's live slot."""
    trace = next(TRACES.glob(f"D2-refinement-without-{name}-*.json"))
    kept = restore_rows(json.loads(trace.read_text()), frozenset({name}))
    impact = of_trace(kept, _d2())
    assert impact is not None and (impact.whose, impact.read) == ("another request", True)
    assert impact.who.startswith("request 1 (live slot")
    assert impact.next_pass.startswith(writer) and "without that row in the batch they are right" in impact.next_pass
    assert "request 1's next decode: it starts from the state at" in impact.next_pass and "missing" in impact.next_pass
    assert impact.shape.startswith("cache mode none") and "'s row a prefill chunk of" in impact.shape


@needs_corpus
def test_teeth_a_request_its_own_row_puts_wrong_beside_another_row_is_this_request(tmp_path: Path) -> None:
    """Teeth: the same two-row step on a D2 whose prefill writes only its own column and whose commit goes
    wrong by itself: request 1 is wrong with its row alone too, so it stays ``this request``."""
    trace = next(TRACES.glob("D2-refinement-without-decode_within_block-*.json"))
    kept = restore_rows(json.loads(trace.read_text()), frozenset({"decode_within_block"}))
    impact = of_trace(kept, _d2(tmp_path))
    assert impact is not None and (impact.whose, impact.read) == ("this request", True)
    assert impact.who.startswith("request 1 (live slot 46") and "request 1's row a decode of 1" in impact.shape
    assert impact.next_pass.startswith("its next decode: it starts from a state that stands for no position")


@needs_corpus
def test_a_live_column_null_in_one_group_is_told_by_the_group_whose_state_broke() -> None:
    """Regression: D3's probe of ``groups_agree_on_null`` breaks request 2's state in group 1 (slot 45); its
    impact named group 0's live block, which that probe made the null block (slot 0), whose state the
    lifecycle check does not read either."""
    trace = json.loads((TRACES / "D3-latent-group-0-live-block-null.json").read_text())
    module = load_isolated(str(version_path("D3")), "--impl", cuda=False, launch_seconds=120)
    impact = of_trace(trace, Version("D3", str(version_path("D3")), module, detect(module, None)))
    assert impact is not None and impact.who == "request 2 (live slot 45, cache group 1)", impact
    assert impact.whose == "this request" and "missing from its state" in impact.next_pass

