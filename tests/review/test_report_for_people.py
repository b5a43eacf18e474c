"""``review --html``: the report for people, each bug once, checked in headless Chromium.

Without a browser: the evidence of one bug (a lifecycle memory finding and
the kernel proofs' memory-safety and frame failures in the same kernel) is
one card, other bugs are their own (teeth: the same kernel finding in another
kernel is another card), and the slots a finding's message names are parsed.

With A1's review (``--examples 4``, seeded) rendered by headless Chromium in a
1,400 px window: the page is no wider than the window (measured by the
browser; teeth: a page with a wider element measures wider), the screenshot
is 1,400 px wide and shows the cards' red border; every card leads with the
impact, then the next step (replay command, smallest input, assumption to
check); the memory bug is one card holding its lifecycle and kernel
evidence; the slot the message names (the guards' poison slot 48, where the
bad store went) is drawn framed, as it broke, and names the store line of
A1's kernel that wrote it (found by its text in A1's source; the kernel
proofs' frame failure names the same line; teeth: a copy with that store
moved a line down names the new line). Each written tracker cell carries its
writer, with a footnote per step (teeth: a step nobody wrote has none), and
what the target's process sends of its stores is judged as data. The
screenshot in ``docs/`` is checked too. Skipped only where Chromium is not installed.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from replayssm.base.html_report import timeline_html
from replayssm.base.html_review import bugs
from replayssm.review.timeline import broken_slots

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "images" / "review-report-A1.png"
RED = (176, 0, 32)
"""The colour of a finding card's left border and of a broken slot's frame (#b00020)."""

needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None,
                                    reason="headless Chromium is not installed (bash scripts/setup.sh installs it)")


def _verdict(kernel_of_frame: str = "_post") -> dict:
    where = {"file": "v.py", "line": 10, "kernel": "_post"}
    return {"version": "V", "findings": [
        {"property": "memory", "message": "memory: ...", "trace": "t.json", "replay": "r1", "location": where,
         "impact": {"whose": "another request", "who": "batch row 1", "next_pass": "reads garbage", "shape": "mode none",
                    "read": True, "sentence": "s"}},
        {"property": "refinement", "message": "refinement: ...", "trace": "u.json", "replay": "r2",
         "location": {**where, "kernel": "_reset"}}],
        "kernel_findings": [
            {"property": "kernel.A.postprocess.memory_safety@V", "case": "c", "violated": "read", "replayed": "reproduced",
             "trace": "k1.json", "replay": "r3", "location": {**where, "line": 20}},
            {"property": "kernel.A.postprocess.frame@V", "case": "c", "violated": "store", "replayed": "reproduced",
             "trace": "k2.json", "replay": "r4", "location": {**where, "line": 22, "kernel": kernel_of_frame}}],
        "latent": [{"assumption": "row_nonempty", "property": "refinement", "message": "m", "trace": "l.json",
                    "replay": "r5"}], "differences": []}


def test_the_evidence_of_one_bug_is_one_card_and_other_bugs_are_their_own() -> None:
    cards = bugs(_verdict())
    assert [(b.kind, len(b.evidence)) for b in cards] == [("finding", 3), ("finding", 1), ("latent", 1)]
    memory = cards[0]
    assert [e.entry["property"] for e in memory.evidence] == [
        "memory", "kernel.A.postprocess.memory_safety@V", "kernel.A.postprocess.frame@V"]
    assert memory.impact is not None and memory.impact["who"] == "batch row 1" and memory.traced is memory.evidence[0]
    # teeth: the frame failure in another kernel is another bug
    assert [(b.kind, len(b.evidence)) for b in bugs(_verdict("_other"))] == [
        ("finding", 2), ("finding", 1), ("finding", 1), ("latent", 1)]


def test_the_slots_a_findings_message_names() -> None:
    assert broken_slots("memory: postprocess: read past block_table row by k: it stored 0 to ring_start.g0[48], "
                        "the trackers of the poison slot id 48") == [(0, 48)]
    assert broken_slots("refinement: request 3 group 1 live slot 47: trackers (2, 1)") == [(1, 47)]
    assert broken_slots("canonical: published block (stream 0, column 1) slot 5 of group 0: ...") == [(0, 5)]
    assert broken_slots("materialize: a plan row repeats") == []


def _cards(html: str) -> list[str]:
    return [c.split("</section>")[0] for c in html.split('<section class="finding">')[1:]]


@pytest.mark.corpus
def test_each_card_leads_with_the_impact_then_the_next_step_and_the_memory_bug_is_one_card(a1_review: dict) -> None:
    cards = _cards(a1_review["html"])
    assert len(cards) == len(bugs(a1_review["verdict"])) >= 2
    for card in cards:
        impact, step, evidence = (card.index(x) for x in ('class="impact', 'class="next"', "<h4>Evidence ("))
        assert impact < step < evidence, card[:300]
        assert all(x in card for x in ("<b>Reproduce:</b>", "<b>Assumption to check:</b>"))
    kernel = a1_review["verdict"]["kernel_findings"]
    assert kernel, "A1's kernel proofs fail (memory safety, frame)"
    memory = [c for c in cards if "memory broken (lifecycle campaign" in c]
    assert len(memory) == 1 and all(f"{k['property']} failed (proved" in memory[0] for k in kernel)
    assert "<b>Smallest input:</b> step " in memory[0] and "another request" in memory[0]


@pytest.mark.corpus
def test_the_slot_that_broke_is_drawn_as_it_broke(a1_review: dict) -> None:
    finding = next(f for f in a1_review["verdict"]["findings"] if f["property"] == "memory")
    [(group, slot)] = broken_slots(finding["message"])
    card = next(c for c in _cards(a1_review["html"]) if "memory broken (lifecycle campaign" in c)
    framed = [f for f in card.split("<figure")[1:] if f.startswith(' class="broke"')]
    assert framed and all(f"as it broke: group {group} slot {slot} " in f for f in framed)
    assert f"<b>broke</b> g{group} slot {slot} " in card  # its row in the step's table of slots


@pytest.mark.corpus
@needs_chromium
def test_the_page_fits_1400_px_in_chromium_and_its_screenshot_shows_the_cards(a1_review: dict, tmp_path: Path) -> None:
    from PIL import Image
    from report_checks import colours, measured_width

    width, shown = measured_width(a1_review["out"] / "review.html", tmp_path / "a1", 1400, 2000)
    assert width <= 1400, f"the page is {width} px wide"
    assert shown.page_requests == []
    assert colours(shown.png) > 50
    with Image.open(shown.png) as im:
        assert im.size == (1400, 2000)
        red = sum(n for n, c in im.convert("RGB").getcolors(1 << 24) or [] if c == RED)
    assert red > 500, "no finding card's red border in the screenshot"
    assert "findings on this page" in shown.dom  # the page's own script ran


def _store_line(source: list[str], text: str) -> int:
    """The 1-based line of ``source`` that holds ``text`` (found by its text, not by number)."""
    [line] = [n for n, x in enumerate(source, 1) if text in x]
    return line


def _cited(html_text: str, file: str) -> dict[int, str]:
    """The lines of ``file`` that the broken step's paragraph says wrote the broken slot, with the text shown."""
    found = re.search(r"the broken slot was written by (.*?)</p>", html_text)
    assert found, "no writer named for the broken slot"
    return {int(n): html.unescape(t).strip()
            for n, t in re.findall(rf"{re.escape(file)}:(\d+) in \w+: ([^;]+)", found.group(1))}


@pytest.mark.corpus
def test_the_broken_cell_names_the_store_line_of_the_kernel_that_wrote_it(a1_review: dict) -> None:
    from replayssm.spec import corpus

    source = (corpus.versions() / "A1.py").read_text().splitlines()
    card = next(c for c in _cards(a1_review["html"]) if "memory broken (lifecycle campaign" in c)
    cited = _cited(card, "A1.py")
    assert cited and all(text.startswith(source[n - 1].strip()) for n, text in cited.items()), cited
    store = _store_line(source, "tl.store(tracker_start + prefill_slot")
    assert cited[store] == source[store - 1].strip()
    # the kernel proofs' frame failure names the same store, found by symbolic execution of the source
    [frame] = [k for k in a1_review["verdict"]["kernel_findings"] if k["property"].startswith("kernel.A.postprocess.frame")]
    assert frame["location"]["line"] == store
    # each tracker cell the step wrote carries its writer as a tooltip, with a footnote under the step's table
    assert f'title="written by A1.py:{store} in _postprocess_replayssm_kernel: ' in card
    assert f"<b>A1.py:{store}</b> in <code>_postprocess_replayssm_kernel</code>" in card


@pytest.mark.corpus
def test_teeth_a_copy_with_the_store_moved_names_the_new_line(a1_review: dict, tmp_path: Path) -> None:
    from replayssm.base.isolation import load_isolated
    from replayssm.review.campaign import Version
    from replayssm.review.target import detect
    from replayssm.review.timeline import timeline
    from replayssm.spec import corpus

    lines = (corpus.versions() / "A1.py").read_text().splitlines()
    old = _store_line(lines, "tl.store(tracker_start + prefill_slot")
    lines[old - 1], lines[old] = lines[old], lines[old - 1]  # the two tracker stores swapped: same kernel
    planted = tmp_path / "A1_moved.py"
    planted.write_text("\n".join(lines) + "\n")
    new = _store_line(lines, "tl.store(tracker_start + prefill_slot")
    assert new == old + 1
    module = load_isolated(str(planted), "planted")
    try:
        finding = next(f for f in a1_review["verdict"]["findings"] if f["property"] == "memory")
        drawn = timeline(finding["trace"], Version("A1_moved", str(planted), module, detect(module, None)))
    finally:
        module.close()
    broke = [s for s in drawn["steps"][-1]["slots"] if s.get("broke")]
    assert broke and all(s["written_by"]["ring_start"]["line"] == new for s in broke)
    assert all(s["written_by"]["ring_start"]["text"] == lines[new - 1].strip() for s in broke)
    assert all(s["written_by"]["committed"]["line"] == old for s in broke)
    assert new in _cited(timeline_html(drawn), "A1_moved.py")


@pytest.mark.corpus
def test_a_checkpoint_materialize_wrote_names_the_kernel_lines_that_wrote_its_plan_row(a1_review: dict) -> None:
    from replayssm.base.isolation import load_isolated
    from replayssm.review.campaign import Version
    from replayssm.review.store_lines import statement
    from replayssm.review.target import detect
    from replayssm.review.timeline import timeline
    from replayssm.spec import corpus

    path = corpus.versions() / "A1.py"
    source = path.read_text().splitlines()
    dst = _store_line(source, "dst_slots + slot_offset") - 1  # `tl.store(` opens the statement a line above
    assert source[dst - 1].strip() == "tl.store("
    module = load_isolated(str(path), "A1")
    plans = []
    try:
        version = Version("A1", str(path), module, detect(module, None))
        for trace in sorted((a1_review["out"] / "traces").glob("review-*.json")):
            if json.loads(trace.read_text())["params"]["conventions"]["materialize_prefixes"]:
                plans = [layer["written_by"]["checkpoint"] for step in timeline(str(trace), version)["steps"]
                         for s in step["slots"] for layer in s["layers"]
                         if ((layer.get("written_by") or {}).get("checkpoint") or {}).get("plan")]
            if plans:
                break
    finally:
        module.close()
    assert plans, "no trace of A1's review materializes a checkpoint"
    for p in plans:
        assert p["flashinfer"].startswith("materialize of batch row ")
        by = {x["buffer"]: x for x in p["plan"]}
        assert by["dst_slots"]["line"] == dst and by["dst_slots"]["text"] == statement(source, dst)
        assert all(x["file"] == "A1.py" and x["text"].startswith(source[x["line"] - 1].strip()) for x in p["plan"])


def test_a_statement_over_several_lines_is_read_whole() -> None:
    from replayssm.review.store_lines import statement

    lines = ["    tl.store(", "        dst + o,  # the slot", "        tl.where(m, s, PAD),", "    )", "x = 1"]
    assert statement(lines, 1) == "tl.store(dst + o, tl.where(m, s, PAD))"
    assert statement(lines, 5) == "x = 1" and statement(lines, 6) is None


def test_written_cells_carry_their_writer_and_a_footnote_per_step() -> None:
    kernel = {"file": "v.py", "line": 7, "text": "tl.store(t + s, 0)", "function": "_k", "kernel": "_k"}
    slot = {"group": 0, "slot": 3, "ring_len": 4, "ring_start": 0, "committed": 1,
            "layers": [{"layer": 0, "checkpoint": None, "rows": [None] * 4}]}
    steps = [{"step": 0, "rows": "r", "finding": None, "slots": [
        {**slot, "written_by": {"ring_start": kernel, "committed": {"host": "the scheduler's block copy from slot 2"}}}]},
        {"step": 1, "rows": "r", "finding": None, "slots": [slot]}]
    plan = {"flashinfer": "materialize of batch row 0's plan",
            "plan": [{"buffer": "dst_slots", **kernel, "line": 9, "text": "tl.store(dst + o, s)"}]}
    steps[0]["slots"][0]["layers"] = [{"layer": 0, "checkpoint": (0, 3), "rows": [(0, 3), None, None, None],
                                       "written_by": {"checkpoint": plan, "rows": {0: {"flashinfer": "decode"}}}}]
    page = timeline_html({"steps": steps})
    first, second = page.split("<b>step 1</b>")
    assert 'title="written by v.py:7 in _k: tl.store(t + s, 0)"' in first
    assert "<b>v.py:7</b> in <code>_k</code>: <code>tl.store(t + s, 0)</code>" in first
    assert "host: the scheduler&#x27;s block copy from slot 2" in first
    assert ("FlashInfer (modelled): materialize of batch row 0&#x27;s plan; its plan row written by <b>v.py:9</b> "
            "(dst_slots): <code>tl.store(dst + o, s)</code>") in first
    assert 'title="written by FlashInfer (modelled): decode">0: a3<sup class="by">' in first
    # teeth: a step whose cells nobody wrote (an old timeline, or a GPU host) has no footnotes
    assert "written by" not in second and 'class="written-by"' not in second


def test_what_the_targets_process_sends_is_judged_as_data(tmp_path: Path) -> None:
    import torch

    from replayssm.fuzz.guards import Arena
    from replayssm.review.store_lines import StoreLog

    arena = Arena(torch.device("cpu"), poison_slot=4)
    region = arena.reserve("ring_start.g0", (4,), state=True)
    arena.allocate()
    source = tmp_path / "v.py"
    source.write_text("x = 1\n    tl.store(p, 0)\n")
    log = StoreLog(arena, str(source))
    log.record("_k", {"stores": [
        {"file": str(source), "line": 2, "function": "_k", "cells": [[0, region.start + 1, 0], [0, region.start + 4, 0]]},
        {"file": "/etc/passwd", "line": 1, "function": "_k", "cells": [[0, region.start + 2, 0]]},
        {"file": str(source), "line": "two", "cells": [[0, region.start, 0]]}]})
    assert log.writer("ring_start.g0[1]") == {"file": "v.py", "line": 2, "text": "tl.store(p, 0)", "function": "_k",
                                              "kernel": "_k"}
    assert log.writer("ring_start.g0[4]") == log.writer("ring_start.g0[1]")  # past the array: the poison slot
    assert log.writer("ring_start.g0[2]") == {"file": "passwd", "line": 1, "text": None, "function": "_k",
                                              "kernel": "_k"}  # not the version's file: no text read
    assert log.writer("ring_start.g0[0]") is None  # a malformed entry names nothing


@pytest.mark.parametrize("argv, message", [(["--repeat", "0"], "--repeat must be >= 1, got 0"),
                                           (["--examples", "0"], "--examples must be >= 1, got 0"),
                                           (["--json", "/no/such/folder/c.json"], "--json's folder /no/such/folder")])
def test_the_cost_benchmark_names_a_bad_option_before_any_run(argv: list[str], message: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report_lines_cost.py"), *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@needs_chromium
def test_teeth_a_page_wider_than_the_window_measures_wider(tmp_path: Path) -> None:
    from report_checks import measured_width

    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><html><body><div style="width:2000px">wide</div></body></html>')
    assert measured_width(page, tmp_path / "r", 1400, 400)[0] > 1400


def test_the_screenshot_in_the_docs_is_a_whole_report_1400_px_wide() -> None:
    from PIL import Image
    from report_checks import colours

    with Image.open(SCREENSHOT) as im:
        assert im.size[0] == 1400 and im.size[1] >= 1000
        rgb = im.convert("RGB")
        assert sum(n for n, c in rgb.getcolors(1 << 24) or [] if c == RED) > 500
    assert colours(SCREENSHOT) > 50
    assert "images/review-report-A1.png" in (REPO / "docs" / "reviewing.md").read_text()
