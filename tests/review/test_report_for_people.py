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
bad store went) is drawn framed, as it broke. The screenshot in ``docs/`` is
checked too. Skipped only where Chromium is not installed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def a1_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from replayssm.cli import main
    from replayssm.spec import corpus

    out = tmp_path_factory.mktemp("a1-report")
    status = main(["review", str(corpus.versions() / "A1.py"), "--examples", "4", "--seed", "0",
                   "--traces", str(out / "traces"), "--json", str(out / "review.json"), "--html",
                   str(out / "review.html")])
    assert status == 1
    return {"out": out, "html": (out / "review.html").read_text(),
            "verdict": json.loads((out / "review.json").read_text())["verdicts"][0]}


def _cards(html: str) -> list[str]:
    return [c.split("</section>")[0] for c in html.split('<section class="finding">')[1:]]


@pytest.mark.corpus
def test_each_card_leads_with_the_impact_then_the_next_step_and_the_memory_bug_is_one_card(a1_report: dict) -> None:
    cards = _cards(a1_report["html"])
    assert len(cards) == len(bugs(a1_report["verdict"])) >= 2
    for card in cards:
        impact, step, evidence = (card.index(x) for x in ('class="impact', 'class="next"', "<h4>Evidence ("))
        assert impact < step < evidence, card[:300]
        assert all(x in card for x in ("<b>Reproduce:</b>", "<b>Assumption to check:</b>"))
    kernel = a1_report["verdict"]["kernel_findings"]
    assert kernel, "A1's kernel proofs fail (memory safety, frame)"
    memory = [c for c in cards if "memory broken (lifecycle campaign" in c]
    assert len(memory) == 1 and all(f"{k['property']} failed (proved" in memory[0] for k in kernel)
    assert "<b>Smallest input:</b> step " in memory[0] and "another request" in memory[0]


@pytest.mark.corpus
def test_the_slot_that_broke_is_drawn_as_it_broke(a1_report: dict) -> None:
    finding = next(f for f in a1_report["verdict"]["findings"] if f["property"] == "memory")
    [(group, slot)] = broken_slots(finding["message"])
    card = next(c for c in _cards(a1_report["html"]) if "memory broken (lifecycle campaign" in c)
    framed = [f for f in card.split("<figure")[1:] if f.startswith(' class="broke"')]
    assert framed and all(f"as it broke: group {group} slot {slot} " in f for f in framed)
    assert f"<b>broke</b> g{group} slot {slot} " in card  # its row in the step's table of slots


@pytest.mark.corpus
@needs_chromium
def test_the_page_fits_1400_px_in_chromium_and_its_screenshot_shows_the_cards(a1_report: dict, tmp_path: Path) -> None:
    from PIL import Image
    from report_checks import colours, measured_width

    width, shown = measured_width(a1_report["out"] / "review.html", tmp_path / "a1", 1400, 2000)
    assert width <= 1400, f"the page is {width} px wide"
    assert shown.page_requests == []
    assert colours(shown.png) > 50
    with Image.open(shown.png) as im:
        assert im.size == (1400, 2000)
        red = sum(n for n, c in im.convert("RGB").getcolors(1 << 24) or [] if c == RED)
    assert red > 500, "no finding card's red border in the screenshot"
    assert "findings on this page" in shown.dom  # the page's own script ran


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
