"""vLLM's own kernel tests as ground truth of the caller (``vllm_cases.py``).

Every case of T1-T4 the spec's API expresses: the caller model admits it,
the spec predicts every value the test asserts, and the review harness,
driving the corpus version the test was written for, reproduces it (or, on
the cases that version fails, shows why and the version that fixed it
does). The table in ``docs/reviewing.md`` is regenerated and compared.
Teeth: the old mode-none cap on the model length (``max_model_len <=
num_cols * block_size`` in every mode) rejects T2's 50,000-token chunk, and
the old live-column rule (column 0 whenever publishing is off) T1's all-mode
case.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import vllm_cases as vc
from replayssm.spec import assumptions as env
from replayssm.spec.vocab import conj

REPO = Path(__file__).resolve().parents[2]
T2_LONG_CHUNK = "T2::test_replayssm_postprocess_commits_staged_transition[0-50000-True-1-0-True]"

NOT_REPRODUCED_ON_ANY_VERSION = {
    "T3::test_replayssm_skips_canonical_self_copy_but_resets_prefill_trackers[v1]",
    "T3::test_replayssm_skips_canonical_self_copy_but_resets_prefill_trackers[v2]",
}
"""Cases no corpus version holds: each plans an exact self-copy (flush 0) for
a prefill row whose live column is its own boundary, where the test (and the
spec) asks for none. T3's version is not in the corpus."""


@pytest.mark.parametrize("case", vc.CASES, ids=lambda c: c.name)
def test_the_caller_model_admits_the_case(case: vc.VllmCase) -> None:
    broken = [name for name, ok in vc.admission(case).items() if not ok]
    assert not broken, f"{case.name} breaks {broken}: the assumption, not vLLM's test, is wrong"


@pytest.mark.parametrize("case", vc.CASES, ids=lambda c: c.name)
def test_the_spec_predicts_every_asserted_value(case: vc.VllmCase) -> None:
    wrong = [x for x in vc.prediction(case.name) if x[2] != x[3]]
    assert not wrong, f"{case.name}: (buffer, index, asserted, predicted) {wrong}"


@pytest.mark.corpus
def test_the_review_harness_reproduces_every_case_on_its_version() -> None:
    done = vc.all_reproductions()
    for case in vc.CASES:
        results = [done[case.name, v] for v in case.versions]
        if case.name in NOT_REPRODUCED_ON_ANY_VERSION:
            assert not any(r.reproduced for r in results), f"{case.name} now holds on {case.versions}"
        elif case.fixed_in is None:
            assert results[0].reproduced, f"{case.name} on {case.version}: {results[0].describe()}"
        else:  # the written-for version has the bug the case catches; the fix holds it
            assert not results[0].reproduced and results[1].reproduced, \
                f"{case.name}: {case.version}: {results[0].describe()}; {case.fixed_in}: {results[1].describe()}"


def _script():
    spec = importlib.util.spec_from_file_location("vllm_cases_table", REPO / "scripts" / "vllm_cases_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.corpus
def test_the_table_in_docs_is_up_to_date() -> None:
    script = _script()
    text = (REPO / "docs" / "reviewing.md").read_text()
    assert script.rewritten(text) == text, "docs/reviewing.md is stale: run python3 scripts/vllm_cases_table.py"


def _old_mode_none_cap(conv, max_model_len, block_size, num_cols):
    """``model_fits_table`` before mode none was modelled as vLLM runs it: a column per block in every mode."""
    return conj(num_cols >= 1, max_model_len <= num_cols * block_size)


def test_teeth_the_old_mode_none_cap_rejects_t2s_long_chunk(monkeypatch) -> None:
    case = vc.BY_NAME[T2_LONG_CHUNK]
    test_the_caller_model_admits_the_case(case)
    monkeypatch.setattr(env, "MODEL_FITS_TABLE", replace(env.MODEL_FITS_TABLE, holds=_old_mode_none_cap))
    with pytest.raises(AssertionError, match="breaks \\['model_fits_table'\\]"):
        test_the_caller_model_admits_the_case(case)


T3_REORDERED = "T3::test_replayssm_skips_canonical_self_copy_but_resets_prefill_trackers[v2]"


def test_teeth_the_old_batch_order_rejects_t3s_reordered_rows(monkeypatch) -> None:
    """T3's rows hold requests 1, 2, 0: neither request order nor its reverse,
    the two orders the system model ran while the order was fixed per world."""
    case = vc.BY_NAME[T3_REORDERED]
    test_the_caller_model_admits_the_case(case)
    monkeypatch.setattr(vc, "batch_order_admitted", lambda reqs: reqs in (sorted(reqs), sorted(reqs)[::-1]))
    with pytest.raises(AssertionError, match="breaks \\['batch_order_picked_per_step'\\]"):
        test_the_caller_model_admits_the_case(case)


T1_ALL_MODE = "T1::test_replayssm_materializes_only_accepted_boundary_with_compacted_rows[v2]"


def _old_live_column_rule(geo, mode, row):
    """The model's rule before the cache mode was a world parameter: the live
    column moves only where prefixes are published (align), column 0 in every
    other mode, all mode under the reference's host included."""
    return row.live_col == (env.last_scheduled_block(row, geo.block_size) if mode == "align" else 0)


def test_teeth_the_old_live_column_rule_rejects_t1s_all_mode_case(monkeypatch) -> None:
    """T1 runs all mode with live column 1: admitted by the rule keyed on the
    cache mode, not by the old one (live column 0 whenever publishing is off)."""
    case = vc.BY_NAME[T1_ALL_MODE]
    assert case.mode == "all" and case.inputs["live_cols"] == [1, 1, 1]
    test_the_caller_model_admits_the_case(case)
    monkeypatch.setattr(env, "LIVE_COL_IS_LAST_BLOCK", replace(env.LIVE_COL_IS_LAST_BLOCK, holds=_old_live_column_rule))
    with pytest.raises(AssertionError, match="breaks \\['live_col_is_last_block'\\]"):
        test_the_caller_model_admits_the_case(case)


def test_teeth_a_value_the_spec_does_not_leave_is_not_predicted(monkeypatch) -> None:
    """T2's long chunk with its live slot's asserted committed count one off: the prediction check names it."""
    case = vc.BY_NAME[T2_LONG_CHUNK]
    (buf, index, value), *rest = case.expect
    planted = replace(case, params=case.params + "-planted", expect=((buf, index, value + 1), *rest))
    monkeypatch.setitem(vc.BY_NAME, planted.name, planted)
    with pytest.raises(AssertionError, match=f"{buf}', {index + 1}, {value + 1}, {value}"):
        test_the_spec_predicts_every_asserted_value(planted)


T2_PADDED_TAIL = "T2::test_replayssm_postprocess_commits_staged_transition[256-4-False-1-3-{}]"
"""T2's "padded cached prompt tail": a decode row of width 4 accepting its one real token after 256 tokens."""


def _t2_tail_world(case: vc.VllmCase) -> Any:
    """A one-request system world of the case's geometry and caller, its model length the case's row end."""
    from replayssm.spec.geometry import Geometry
    from replayssm.spec.system import SystemParams

    geo = Geometry(max_num_reqs=1, block_size=case.block_size, window=case.window, ring_len=case.ring_len)
    return SystemParams(geo, case.conv, layers=(1,), num_cols=1, num_slots=2, max_model_len=case.max_model_len)


@pytest.mark.parametrize("post_step", [False, True])
def test_the_system_model_runs_t2s_padded_prompt_tail_as_a_decode(post_step: bool) -> None:
    """The system model admits T2's padded prompt tail as a step: a request
    whose prompt is the case's 256 tokens and one more runs its last token as
    a decode of the case's width that accepts it (``tail_as_decode``, model
    choice ``prompt_tail_runs_as_decode``): guard, caller assumptions and
    every check hold, the postprocess sees the test's input vectors, one row
    is committed and N reaches the prompt. Teeth: the same row without the
    pick (the old model, where a request in its prompt runs only prefill
    chunks) is refused."""
    from replayssm.spec.system import RowPick, StepRefused, failed_checks, initial_state, run_action, step_of

    case = next(c for c in vc.CASES if c.name == T2_PADDED_TAIL.format(post_step))
    row = case.rows[0]
    assert row is not None and not row.prefilling and row.accepted == 1 < row.query_len
    p = _t2_tail_world(case)
    st = run_action(initial_state(p), "admit", dict(req=0, stream=0, prompt=row.computed_before + 1)).state
    chunk = step_of(p, {0: RowPick(1, row.computed_before, 1, 0, 1, (1,), (0,), (), ())})
    st = run_action(st, "step", chunk).state
    tail = RowPick(1, row.query_len, row.accepted, 0, 0, (1,), (0,), (), (), 1)
    out = run_action(st, "step", step_of(p, {0: tail}))
    assert failed_checks(out) == []
    (_, bufs, _), = [launch for launch in out.info["launches"] if launch[0] == "postprocess"]
    seen = {name: bufs[name][1][:len(case.inputs[name])] for name in
            ("query_metadata", "num_computed_tokens", "num_accepted_tokens", "is_prefilling")}
    assert seen == {name: [int(x) for x in case.inputs[name]] for name in seen}
    assert out.state.get("N", 0) == row.computed_before + 1 == out.state.get("prompt", 0)
    assert out.state.get("nc", 0, 1) == 1
    with pytest.raises(StepRefused):
        run_action(st, "step", step_of(p, {0: replace(tail, tail_as_decode=0)}))
