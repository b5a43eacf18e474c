"""A deviation no consumer reads is a note of the lifecycle campaign, kept with its trace (issue 36 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

from replayssm.spec.generations.contract import WORK_LIST_READ_TO_FIRST_END
from review_corpus import needs_corpus, version_path

END = "            tl.store(active_request_indices + active_count, -1)\n"
STALE = END + ("            if active_count + 1 < MAX_NUM_REQS:\n"
               "                tl.store(active_request_indices + MAX_NUM_REQS - 1, 0)\n")
"""B2 planted: after its work list's -1 it leaves a stale 0 in the last entry, which FlashInfer never reads."""


def _version(path: Path, label: str):
    from replayssm.base.targets import load_target
    from replayssm.review.campaign import Version
    from replayssm.spec.generations import detect

    module = load_target(str(path))
    return Version(label, str(path), module, detect(module))


@needs_corpus
def test_a_stale_work_list_tail_is_a_note_with_its_trace_not_a_finding(tmp_path: Path) -> None:
    from replayssm.review.campaign import campaign

    text = version_path("B2").read_text()
    assert text.count(END) == 1
    planted = tmp_path / "B2_stale.py"
    planted.write_text(text.replace(END, STALE))
    outcome = campaign((_version(planted, "B2_stale"),), budget=600, seed=0, out_dir=tmp_path, tag="stale",
                       examples=8, shrink=False)
    assert "materialize" not in {f.prop for f in outcome.failures}
    (note,) = outcome.notes
    assert note.clause == WORK_LIST_READ_TO_FIRST_END.name and "entries after the first -1" in note.message
    assert json.loads(Path(note.trace).read_text())["steps"], "the trace holds the schedule up to the note"
    quiet = campaign((_version(version_path("B2"), "B2"),), budget=600, seed=0, out_dir=tmp_path, tag="b2",
                     examples=8, shrink=False)
    assert not quiet.notes  # teeth: the unplanted version leaves no stale tail in these examples
