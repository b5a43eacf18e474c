"""Teeth of the kernel diff (``verify/kernels/diff.py``): a corpus version and
a copy of it with one changed line differ, with a distinguishing input that
replays on both kernels and is judged; an unchanged copy is proved equal.

The versions are made at test time from the reference page in the corpus
(``$REPLAYSSM_CORPUS``), never committed."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_pairs import COMMITTED_PLUS_ONE, ONLY_FRESH, PLAN_START_PLUS_ONE, page_copy

from replayssm.verify.kernels.diff import diff_role, diff_versions
from replayssm.verify.kernels.diff_pairs import smallest_first
from replayssm.verify.kernels.diff_results import DIFFERS, EQUAL
from replayssm.verify.kernels.registry import COMPACTION, MIGRATION, POSTPROCESS


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
def test_each_class_of_distinguishing_inputs_is_reported(tmp_path: Path) -> None:
    """A copy that differs from the page in two independent ways (a decode
    row's plan ring start, a decode row's committed count): both buffers are
    reported, each by a distinguishing input of its own that replays on both
    kernels, in the JSON and in the summary; with one of the two lines
    planted, only its class."""
    page = page_copy(tmp_path, "page")
    both = diff_role(page, page_copy(tmp_path, "both", PLAN_START_PLUS_ONE, COMMITTED_PLUS_ONE), POSTPROCESS)
    assert both.outcome == DIFFERS
    found = [d for d in (both.distinction, both.padding_distinction, *both.classes) if d is not None]
    shown = {c.split("[")[0] for d in found for c in d.cells}
    assert {"plan_ring_start", "num_committed"} <= shown, [d.as_json() for d in found]
    assert all(d.replayed and d.judgement for d in found)
    assert both.classes and all(len(c.buffers) == 1 for c in both.classes)
    assert len(both.as_json()["classes"]) == len(both.classes) and "; also " in both.summary()
    one = diff_role(page, page_copy(tmp_path, "one", COMMITTED_PLUS_ONE), POSTPROCESS)
    found = [d for d in (one.distinction, one.padding_distinction, *one.classes) if d is not None]
    assert {c.split("[")[0] for d in found for c in d.cells} == {"num_committed"}, [d.as_json() for d in found]


@pytest.mark.corpus
def test_roles_of_two_generations_are_matched_by_duty(tmp_path: Path) -> None:
    """Head's kernel under another jit name, declared by another generation's
    record of the same duty (``X.migration``, duty ``migration``): the diff
    pairs the two records by their duty and compares them; a record of
    another duty is not paired."""
    from dataclasses import replace

    renamed = ("def _reset_new_replayssm_slots_kernel(", "def _reset_slots_elsewhere(")
    page, other = page_copy(tmp_path, "page"), page_copy(tmp_path, "other_generation", renamed)
    theirs = replace(MIGRATION, name="X.migration", jits=("_reset_slots_elsewhere",), duty="migration")
    (result,) = diff_versions(page, other, (MIGRATION,), head_roles=(theirs,))
    assert result.role == "migration ~ X.migration" and result.kernel == "_reset_slots_elsewhere" and result.outcome == EQUAL
    assert diff_versions(page, other, (MIGRATION,), head_roles=(replace(theirs, name="X.reset", duty="reset"),)) == []


@pytest.mark.corpus
def test_a_generation_version_and_a_planted_copy_through_its_adapter_records(tmp_path: Path) -> None:
    """A1 (generation A, no spec program) against a copy whose reset kernel
    zeroes a fresh slot's committed count to -1 (one line): the migration
    role differs, replayed, and the one-launch check (trackers in range)
    calls it a regression; an unchanged copy of A1 is proved equal."""
    from replayssm.base.targets import load_source
    from replayssm.spec.generations import detect
    from replayssm.verify.kernels.generation_roles import roles_of
    from replayssm.spec import corpus

    line = "tl.store(tracker_committed + dst_slot, 0, mask=fresh)"
    text = (corpus.versions() / "A1.py").read_text()
    assert text.count(line) == 1
    files = {"a1": text, "a1_copy": text, "a1_planted": text.replace(line, line.replace(", 0,", ", -1,"))}
    modules = {}
    for name, body in files.items():
        (tmp_path / f"{name}.py").write_text(body)
        modules[name] = load_source(tmp_path / f"{name}.py", name)
    roles = [r for r in roles_of(detect(modules["a1"])) if r.name.endswith("migration")]
    (planted,) = diff_versions(modules["a1"], modules["a1_planted"], roles)
    assert planted.outcome == DIFFERS and planted.distinction.replayed
    assert planted.distinction.judgement.startswith("regression: head breaks tracker range: num_committed"), \
        planted.distinction.judgement
    (unchanged,) = diff_versions(modules["a1"], modules["a1_copy"], roles)
    assert unchanged.outcome == EQUAL


PADDING_PLANTS = {
    # C1's postprocess clears its plan row before the per-request early exit, padding programs included
    "in frame": ("early exit.\n    tl.store(plan_flush_count + batch_idx, -1)",
                 "early exit.\n    tl.store(plan_flush_count + batch_idx, -1 - (batch_idx >= num_reqs))"),
    "outside the frame": ("early exit.\n    tl.store(plan_flush_count + batch_idx, -1)",
                          "early exit.\n    tl.store(plan_flush_count + batch_idx - num_reqs * (batch_idx >= num_reqs), -1)"),
}
"""One line each, changing only what a padding program (row ``num_reqs <= batch``) of C1's postprocess
writes: -2 in its own plan row (inside its frame), or -1 in real row ``batch - num_reqs``'s (outside it)."""


@pytest.mark.corpus
def test_the_padding_programs_of_a_max_num_reqs_grid_are_compared(tmp_path: Path) -> None:
    """C1 (generation C, a grid of ``max_num_reqs`` rows) against copies whose
    padding programs write something else: both were "proved equal" before
    the diff compared padding programs (only rows below ``num_reqs`` were);
    now each differs, with a distinguishing input at a program past
    ``num_reqs``, replayed on both kernels and judged: inside the frame a
    change that breaks nothing, outside it a regression whose trace replays
    as a padding failure on the copy alone. An unchanged copy is still proved
    equal, its padding programs too."""
    from replayssm.base.targets import load_source
    from replayssm.spec.generations import detect
    from replayssm.verify.kernels.generation_roles import roles_of
    from replayssm.spec import corpus
    from replayssm.verify.kernels.playback import playback

    text = (corpus.versions() / "C1.py").read_text()
    files = {"c1": text, "c1_copy": text}
    for name, (old, new) in PADDING_PLANTS.items():
        assert text.count(old) == 1
        files[f"c1_{name.replace(' ', '_')}"] = text.replace(old, new)
    modules = {}
    for name, body in files.items():
        (tmp_path / f"{name}.py").write_text(body)
        modules[name] = load_source(tmp_path / f"{name}.py", name)
    roles = roles_of(detect(modules["c1"]))
    (role,) = [r for r in roles if r.name == "C.postprocess"]
    unchanged = diff_role(modules["c1"], modules["c1_copy"], role)
    assert unchanged.outcome == EQUAL and unchanged.padding_compared and "padding programs too" in unchanged.summary()
    for name, judged in (("in frame", "change that breaks nothing: plan_flush_count differ"),
                         ("outside the frame", "regression: head breaks padding program frame: program (")):
        planted = modules[f"c1_{name.replace(' ', '_')}"]
        r = diff_role(modules["c1"], planted, role)
        assert r.outcome == DIFFERS, (name, r.summary())
        assert r.padding_differing == r.differing == [v for v, _ in smallest_first(role)], name  # rows: all equal
        assert f"padding programs: differ in 4); smallest: {r.differing[0]} padding program" in r.summary(), name
        d = r.distinction
        assert d.padding and d.inside_full_contract and d.buffers == ["plan_flush_count"], name
        assert d.inputs["batch"] >= d.inputs["num_reqs"] >= 1 and d.launch["groups"] == 1, (name, d.inputs)
        assert d.replayed and d.judgement.startswith(judged), (name, d.judgement)
        assert any(c.startswith(f"plan_flush_count[{d.inputs['batch']}]") for c in d.cells), (name, d.cells)
        assert not d.broken["base"], (name, d.broken)
        # the trace replays as the padding obligation's: a stray store on the copy outside the frame only
        assert playback(d.trace, planted, roles).reproduces("padding") == (name == "outside the frame"), name
        assert not playback(d.trace, modules["c1"], roles).reproduces("padding"), name
