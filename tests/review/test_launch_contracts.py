"""Each generation is judged under its own host's launch contract (``spec/generations/contract.py``).

The four former false positives of issue 36, each a regression test with
teeth: a planted copy (made here from ``../shared``, never committed) where
the same shape is a real bug still fires.

- A4: ``memory`` in mode none with live columns given, which A's host never
  launches (``LIVE_COL_IS_ZERO=live_cols is None``; T1, T2, T4);
- D1: ``int32`` of a padded row's query length from a decreasing
  ``query_start_loc`` (a clause vLLM does not guarantee: the proof relies on it);
- C1: ``preprocess`` reading the block table at a scheduled row's
  ``dst_cols = -2^31`` (its old and new live columns are allocated columns);
- B2/B3: a stale work-list tail after the first -1, which FlashInfer never reads (a note).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replayssm.review.ghost import Ghost
from replayssm.review.host_modes import launched_by
from replayssm.spec import corpus
from replayssm.spec.generations import detect, registry
from replayssm.spec.generations.contract import (
    QUERY_START_LOC_NON_DECREASING,
    WORK_LIST_READ_TO_FIRST_END,
    publishing_modes,
    unread_work_list_tail,
)
from replayssm.spec.geometry import Conventions
from replayssm.verify.kernels.diff_replay import launch_breaks
from replayssm.verify.kernels.generation_roles import roles_of
from replayssm.verify.kernels.obligations import kernel_claim
from replayssm.verify.kernels.source_module import kernel_module
from replayssm.verify.obligation import Obligation, prove

pytestmark = pytest.mark.corpus

VERSIONS = corpus.versions() if corpus.present() else Path(".")
NONE_WITH_LIVE = Conventions(False, False, False, False, False)
"""Mode none's flags (no prefixes published) with live columns given."""


def _copy(tmp_path: Path, version: str, old: str = "", new: str = "") -> str:
    text = (VERSIONS / f"{version}.py").read_text()
    if old:
        assert text.count(old) == 1, f"{version}: {old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    path = tmp_path / f"{version}_{'planted' if old else 'copy'}.py"
    path.write_text(text)
    return str(path)


def _status(source: str, role: str, prop: str, dropped: frozenset[str] = frozenset(),
            label: str | None = None) -> tuple[str, str]:
    """The proof status of ``prop`` of ``role`` on every variant the version's host launches
    (or variant ``label``), and the first failing case's first violated part."""
    module = kernel_module(source)
    api = detect(module)
    record = next(r for r in roles_of(api, publishing_modes(Path(source).read_text()), dropped) if r.name == role)
    for case, _ in record.variants():
        if label is not None and case != label:
            continue
        kc = kernel_claim(module, record, prop, case)
        result = prove(Obligation(f"t.{role}.{prop}.{case}", role, "", lambda kc=kc: [kc.claim]))
        if result.status != "proved":
            return result.status, ((result.counterexample or {}).get("violated") or [""])[0]
    return "proved", ""


# -- A4/A5: mode none is launched with LIVE_COL_IS_ZERO --------------------------------------------------------


def test_a4s_host_never_launches_mode_none_with_live_columns(tmp_path: Path) -> None:
    api = registry()["A"]
    for version in ("A4", "A5"):
        launched = launched_by(api, str(VERSIONS / f"{version}.py"))
        assert not launched(NONE_WITH_LIVE), version
        assert launched(Conventions(False, False, False, False, True)) and launched(Conventions.all()[-1])
    # teeth: a host that publishes in align only launches all mode with live columns and no prefixes
    planted = _copy(tmp_path, "A4", 'materialize_prefixes = cache_mode in ("align", "all")',
                    'materialize_prefixes = cache_mode == "align"')
    assert launched_by(api, planted)(NONE_WITH_LIVE)


def test_a4s_postprocess_is_memory_safe_under_its_hosts_contract_and_not_outside_it(tmp_path: Path) -> None:
    """The review's kernel finding on A4 was ``pow2 len/pre/nomap/none/live``: gone under the contract;
    where the host does launch those flags (a planted align-only host), the same read past the row fires."""
    assert _status(_copy(tmp_path, "A4"), "A.postprocess", "memory_safety") == ("proved", "")
    planted = _copy(tmp_path, "A4", 'materialize_prefixes = cache_mode in ("align", "all")',
                    'materialize_prefixes = cache_mode == "align"')
    status, violated = _status(planted, "A.postprocess", "memory_safety")
    assert status == "failed" and violated.startswith("read of block_table"), (status, violated)


def test_prove_kernels_impl_reads_the_hosts_modes_from_the_file(tmp_path: Path) -> None:
    """``prove --kernels --impl FILE`` (``target_roles``) proves the variants the file's host launches."""
    from replayssm.verify.kernels.generation_roles import target_roles

    def flags(source: str) -> set[tuple[bool, bool]]:
        _, roles = target_roles(source)
        record = next(r for r in roles if r.name == "A.postprocess")
        return {(p[0].materialize_prefixes, p[0].live_col_is_zero) for _, p in record.variants()}

    assert (False, False) not in flags(_copy(tmp_path, "A4"))
    assert (False, False) in flags(_copy(tmp_path, "A4", 'materialize_prefixes = cache_mode in ("align", "all")',
                                         'materialize_prefixes = cache_mode == "align"'))


# -- D1-D3: query_start_loc through padding (not guaranteed: latent) --------------------------------------------


def test_d1s_padded_row_query_length_fits_int32_only_under_the_not_guaranteed_clause() -> None:
    """Under the clause the padded row's length fits; dropped (teeth), the decreasing offsets overflow
    it again: the proof relies on a clause vLLM does not guarantee, which the review reports as latent."""
    assert not QUERY_START_LOC_NON_DECREASING.provenance.is_guaranteed
    source = str(VERSIONS / "D1.py")
    case = "odd cum/post/map/align/live L2"
    assert _status(source, "D.postprocess", "int32", label=case) == ("proved", "")
    status, violated = _status(source, "D.postprocess", "int32", frozenset({QUERY_START_LOC_NON_DECREASING.name}),
                               case)
    assert status == "failed" and "i32 result" in violated, (status, violated)


def test_the_review_reports_d1s_reliance_on_the_clause_as_latent() -> None:
    from replayssm.review.kernel_proofs import kernel_proofs, summary

    source = str(VERSIONS / "D1.py")
    module = kernel_module(source)
    kp = kernel_proofs(module, detect(module), source)
    int32 = next(r for r in kp["results"] if r["obligation"].startswith("kernel.D.postprocess.int32@"))
    assert int32["status"] == "proved" and int32["relies_on"] == [QUERY_START_LOC_NON_DECREASING.name]
    assert "relies on query_start_loc_non_decreasing (not guaranteed: latent)" in summary(kp)


# -- C1/C2: a scheduled row's old and new live columns are allocated columns --------------------------------------


def test_c1s_preprocess_never_reads_the_table_at_a_scheduled_rows_unallocated_new_column(tmp_path: Path) -> None:
    """The dst_cols = -2^31 read is gone (C1's real mode-none prefill reset past the row stays, at its own
    line); teeth: a planted preprocess that moves a request with no old column reads the table at -1."""
    source = _copy(tmp_path, "C1")
    text = Path(source).read_text().splitlines()

    def load_line(col: str) -> int:  # a multi-line load is reported at its last argument's line
        return next(i for i, line in enumerate(text, 1) if f"block_table_stride_req + {col}," in line) + 2

    dst_read, src_read = load_line("dst_col"), load_line("src_col")
    status, violated = _status(source, "C.preprocess", "memory_safety")
    assert status == "failed" and violated.startswith("read of block_table"), violated
    assert f"C1_copy.py:{dst_read} " not in violated and f"C1_copy.py:{src_read} " not in violated, violated
    planted = _copy(tmp_path, "C1", "changed = valid_req & (src_col >= 0) & (src_col != dst_col)",
                    "changed = valid_req & (src_col != dst_col)")
    status, violated = _status(planted, "C.preprocess", "memory_safety")
    assert status == "failed" and violated == f"read of block_table at C1_planted.py:{src_read} in bounds", violated


# -- B2/B3: a stale work-list tail is a note ----------------------------------------------------------------------


def _plan(active: list[int]) -> dict:
    n = len(active)
    return {"plan_flush_count": [-1] * n, "plan_ring_start": [0] * n, "active_request_indices": active,
            "src_slots": [[0] * n], "dst_slots": [[0] * n]}


def test_a_stale_work_list_tail_is_a_note_a_duplicate_row_a_problem() -> None:
    assert WORK_LIST_READ_TO_FIRST_END.provenance.is_guaranteed
    assert unread_work_list_tail([1, -1, 1, -1]) == [1] and unread_work_list_tail([0, 1, -1, -1]) == []
    ghost = Ghost((1,), 4, 2, 0)
    assert ghost.materialize(_plan([1, -1, 1, 0]), [0], True, {0, 1}) == []
    assert len(ghost.notes) == 1 and WORK_LIST_READ_TO_FIRST_END.name in ghost.notes[0]
    # teeth: a row listed twice before the first -1 is read twice: still a problem
    assert any("not distinct" in p for p in Ghost((1,), 4, 2, 0).materialize(_plan([1, 1, -1, -1]), [0], True, {1}))


def test_the_kernel_diff_judges_a_stale_tail_no_break_and_a_duplicate_row_one() -> None:
    params = {"geometry": {"ring_len": 4, "window": 2}, "conventions": {"materialize_prefixes": True}}
    written = {"active_request_indices"}
    stale = {"active_request_indices": np.array([1, -1, 1, 0])}
    assert launch_breaks(stale, written, params, 4) == []
    twice = {"active_request_indices": np.array([1, 1, -1, -1])}
    assert launch_breaks(twice, written, params, 4) != []
