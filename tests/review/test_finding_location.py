"""A lifecycle finding is reported at the kernel store that wrote the cell it breaks (issue 40 item 3): its
saved trace replayed once with the stores recorded in the version's process (``review/campaign.py``'s
``broken_store``, ``review/store_lines.py``), read by ``review/locations.py``'s ``locate``. A1's memory
finding lands on the store line found by its text in A1's source, the line the kernel proofs' frame failure
names, so the page draws one card and SARIF one location for both; teeth: a copy of A1 with the store moved a
line down moves the location; a cell only the host wrote, a replay that breaks otherwise, a GPU run, keep the
kernel's ``def`` line and say so; against a base, a line the change touched stays the place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.review.locations import locate

DEF_LINE_WHY = "the kernel's def line (the postprocess phase launches it)"
LOCATIONS = {"file": "v.py", "changed": [], "kernels": [
    {"name": "_post", "phases": ["postprocess"], "line": 10, "end": 40, "changed": []}]}


def _store_line(source: list[str], text: str) -> int:
    """The 1-based line of ``source`` that holds ``text`` (found by its text, not by number)."""
    [line] = [n for n, x in enumerate(source, 1) if text in x]
    return line


STORE = "tl.store(tracker_start + prefill_slot"


@pytest.mark.corpus
def test_a1s_lifecycle_finding_is_at_the_store_that_broke_the_slot_as_the_kernel_finding_is(a1_review: dict) -> None:
    from replayssm.base.html_review import bugs
    from replayssm.spec import corpus

    source = (corpus.versions() / "A1.py").read_text().splitlines()
    store = _store_line(source, STORE)
    v = a1_review["verdict"]
    [memory] = [f for f in v["findings"] if f["property"] == "memory"]
    written = memory["written_by"]
    assert written["cell"] in memory["message"] and written["text"] == source[store - 1].strip()
    assert memory["location"] == {"file": v["locations"]["file"], "line": store,
                                  "kernel": "_postprocess_replayssm_kernel",
                                  "why": f"the store that wrote {written['cell']} (recorded on replay)"}
    [frame] = [k for k in v["kernel_findings"] if k["property"].startswith("kernel.A.postprocess.frame")]
    assert frame["location"]["line"] == memory["location"]["line"]
    # one card: the lifecycle finding with the kernel's frame and memory_safety failures
    [card] = [b for b in bugs(v) if b.kind == "finding"
              and any(e.entry.get("property") == "memory" for e in b.evidence)]
    assert {e.entry["property"].split("@")[0] for e in card.evidence} == {
        "memory", "kernel.A.postprocess.frame", "kernel.A.postprocess.memory_safety"}
    # SARIF: one location for the lifecycle finding and the frame failure
    results = a1_review["sarif"]["runs"][0]["results"]
    at = {r["ruleId"]: json.dumps(r["locations"]) for r in results if r["level"] == "error"}  # not the latent ones
    assert at["memory"] == at["kernel.A.postprocess.frame"]
    assert json.loads(at["memory"])[0]["physicalLocation"]["region"] == {"startLine": store}


@pytest.mark.corpus
def test_teeth_a_copy_with_the_store_moved_down_moves_the_location(a1_review: dict, tmp_path: Path) -> None:
    from replayssm.base.isolation import load_isolated
    from replayssm.review.campaign import Version, broken_store
    from replayssm.review.target import detect
    from replayssm.spec import corpus

    lines = (corpus.versions() / "A1.py").read_text().splitlines()
    old = _store_line(lines, STORE)
    lines[old - 1], lines[old] = lines[old], lines[old - 1]  # the two tracker stores swapped: same kernel
    planted = tmp_path / "A1_moved.py"
    planted.write_text("\n".join(lines) + "\n")
    [memory] = [f for f in a1_review["verdict"]["findings"] if f["property"] == "memory"]
    trace = json.loads(Path(memory["trace"]).read_text())
    module = load_isolated(str(planted), "planted")
    try:
        version = Version("A1_moved", str(planted), module, detect(module, None))
        written = broken_store(trace, version)
        assert broken_store(trace, version, device="cuda") is None  # a GPU runs no interpreter: nothing recorded
        changed = {**trace, "#meta": {**trace["#meta"], "failure": "memory: postprocess: something else"}}
        assert broken_store(changed, version) is None  # the replay does not break the same way
    finally:
        module.close()
    assert written is not None and written["line"] == old + 1 and written["text"] == lines[old].strip()
    kernels = [{**k, "line": 1, "end": len(lines)} for k in LOCATIONS["kernels"]]
    assert locate({**LOCATIONS, "kernels": kernels}, {**memory, "written_by": written})["line"] == old + 1


def test_a_cell_only_the_host_wrote_keeps_the_def_line_and_a_kernel_store_moves_it(tmp_path: Path) -> None:
    import torch

    from replayssm.fuzz.guards import Arena
    from replayssm.review.store_lines import StoreLog

    arena = Arena(torch.device("cpu"), poison_slot=4)
    region = arena.reserve("ring_start.g0", (4,), state=True)
    arena.allocate()
    source = tmp_path / "v.py"
    source.write_text("\n" * 19 + "    tl.store(p, 0)\n")
    log = StoreLog(arena, str(source))
    log.host("ring_start.g0[2]", "the scheduler's block copy from slot 1")
    log.record("_post", {"stores": [{"file": "/elsewhere/w.py", "line": 5, "function": "_post",
                                     "cells": [[0, region.start + 3, 0]]}]})
    message = "memory: postprocess: ring_start.g0[2] holds 0 where the block copy left 3; ring_start.g0[3] too"
    nobody = log.first_stored(["ring_start.g0[2]", "ring_start.g0[3]", "ring_start.g0[1]"])
    assert nobody is None  # the host's copy, a file not the version's, a cell nobody wrote
    assert locate(LOCATIONS, {"message": message, "written_by": nobody}) == {
        "file": "v.py", "line": 10, "kernel": "_post", "why": DEF_LINE_WHY}
    # the same cell written by a store in the version's own file: located there
    log.record("_post", {"stores": [{"file": str(source), "line": 20, "function": "_post",
                                     "cells": [[0, region.start + 2, 0]]}]})
    written = log.first_stored(["ring_start.g0[2]"])
    assert written == {"cell": "ring_start.g0[2]", "file": "v.py", "line": 20, "text": "tl.store(p, 0)",
                       "function": "_post", "kernel": "_post"}
    assert locate(LOCATIONS, {"message": message, "written_by": written}) == {
        "file": "v.py", "line": 20, "kernel": "_post", "why": "the store that wrote ring_start.g0[2] (recorded on replay)"}
    # against a base, a line the change touched stays the place (a pull request's annotation is on its diff)
    changed = {**LOCATIONS, "kernels": [{**LOCATIONS["kernels"][0], "changed": [25]}]}
    assert locate(changed, {"message": message, "written_by": written})["line"] == 25
