"""Teeth of the kernel diff (``verify/kernels/diff.py``): a corpus version and
a copy of it with one changed line differ, with a distinguishing input that
replays on both kernels and is judged; an unchanged copy is proved equal.

The versions are made at test time from the reference page in the corpus
(``$REPLAYSSM_CORPUS``), never committed."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_pairs import ONLY_FRESH, page_copy

from replayssm.verify.kernels.diff import DIFFERS, EQUAL, diff_role, diff_versions, smallest_first
from replayssm.verify.kernels.registry import COMPACTION, MIGRATION


@pytest.mark.corpus
def test_an_unchanged_copy_is_proved_equal_in_every_role(tmp_path: Path) -> None:
    base, head = page_copy(tmp_path, "page"), page_copy(tmp_path, "page_copy")
    results = diff_versions(base, head)
    assert [r.role for r in results] == ["postprocess", "migration", "compaction"]
    assert all(r.outcome == EQUAL for r in results), [r.summary() for r in results]
    assert all(r.distinction is None and not r.differing for r in results)


@pytest.mark.corpus
def test_a_planted_line_is_a_difference_replayed_on_both_kernels_and_judged(tmp_path: Path) -> None:
    page, planted = page_copy(tmp_path, "page"), page_copy(tmp_path, "planted", ONLY_FRESH)
    regression = diff_role(page, planted, MIGRATION)
    assert regression.outcome == DIFFERS
    assert regression.differing == [v for v, _ in smallest_first(MIGRATION)]  # every variant moves trackers
    d = regression.distinction
    assert d.inside_full_contract and not d.outside
    # minimised: the smallest geometry, one group, one row
    assert d.variant.startswith("unit") and d.launch["groups"] == 1 and d.launch["num_reqs"] == 1
    assert set(d.buffers) <= {"ring_start", "num_committed"} and d.buffers
    assert d.replayed and all(c.split("[")[0] in ("ring_start", "num_committed") for c in d.cells)
    assert d.judgement.startswith("regression: head breaks the spec program's result"), d.judgement
    assert not d.broken["base"]
    fix = diff_role(planted, page, MIGRATION)
    assert fix.distinction.judgement.startswith("fix: base breaks"), fix.distinction.judgement
    # the other roles are untouched by the line
    assert diff_role(page, planted, COMPACTION).outcome == EQUAL


@pytest.mark.corpus
def test_roles_of_two_generations_are_matched_by_name(tmp_path: Path) -> None:
    """Head's kernel under another jit name, declared by another generation's
    record of the same duty (``X.migration``): the diff pairs the two records
    by the name without its generation and compares them; a record of
    another duty is not paired."""
    from dataclasses import replace

    renamed = ("def _reset_new_replayssm_slots_kernel(", "def _reset_slots_elsewhere(")
    page, other = page_copy(tmp_path, "page"), page_copy(tmp_path, "other_generation", renamed)
    theirs = replace(MIGRATION, name="X.migration", jits=("_reset_slots_elsewhere",))
    (result,) = diff_versions(page, other, (MIGRATION,), head_roles=(theirs,))
    assert result.role == "migration ~ X.migration" and result.kernel == "_reset_slots_elsewhere" and result.outcome == EQUAL
    assert diff_versions(page, other, (MIGRATION,), head_roles=(replace(theirs, name="X.reset"),)) == []


@pytest.mark.corpus
def test_a_generation_version_and_a_planted_copy_through_its_adapter_records(tmp_path: Path) -> None:
    """A1 (generation A, no spec program) against a copy whose reset kernel
    zeroes a fresh slot's committed count to -1 (one line): the migration
    role differs, replayed, and the one-launch check (trackers in range)
    calls it a regression; an unchanged copy of A1 is proved equal."""
    from replayssm.base.targets import load_source
    from replayssm.review.adapters import detect, kernel_roles
    from replayssm.spec import corpus

    line = "tl.store(tracker_committed + dst_slot, 0, mask=fresh)"
    text = (corpus.versions() / "A1.py").read_text()
    assert text.count(line) == 1
    files = {"a1": text, "a1_copy": text, "a1_planted": text.replace(line, line.replace(", 0,", ", -1,"))}
    modules = {}
    for name, body in files.items():
        (tmp_path / f"{name}.py").write_text(body)
        modules[name] = load_source(tmp_path / f"{name}.py", name)
    roles = [r for r in kernel_roles(detect(modules["a1"])) if r.name.endswith("migration")]
    (planted,) = diff_versions(modules["a1"], modules["a1_planted"], roles)
    assert planted.outcome == DIFFERS and planted.distinction.replayed
    assert planted.distinction.judgement.startswith("regression: head breaks tracker range: num_committed"), \
        planted.distinction.judgement
    (unchanged,) = diff_versions(modules["a1"], modules["a1_copy"], roles)
    assert unchanged.outcome == EQUAL
