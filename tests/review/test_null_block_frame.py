"""A kernel's frame store to the null block is a note only where a proof shows it stores outside its row's
blocks nowhere else (``review/kernel_proofs.py`` ``beside_the_null_block``, ``Frame.null_block``).

C1/C2's ``postprocess`` stores the published destination's trackers through ``materialize_dst_cols``, and the
frame obligation's counterexample stores them to slot 0, the null block, which nobody reads. One model doing
so does not show the kernel cannot store to a block another request holds for another input: the
obligation is asked again with the null block's cells in the frame, a note only if that is proved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replayssm.base.isolation import load_isolated
from replayssm.review.host_modes import version_publishing_modes
from replayssm.review.kernel_proofs import beside_the_null_block
from replayssm.review.verdict_parts import kernel_findings
from replayssm.spec import corpus
from replayssm.spec.generations import detect
from replayssm.verify.kernels.generation_roles import roles_of
from replayssm.verify.kernels.obligations import register
from replayssm.verify.kernels.source_module import kernel_module

pytestmark = pytest.mark.corpus

VERSIONS = corpus.versions() if corpus.present() else Path(".")

ANCHOR = "    # The published destination is canonical and therefore has no live replay.\n"
HELD = ("    if (dst_col == 1) & (batch_idx + 1 < num_reqs):\n"
        "        dst_slot = tl.load(block_table + (batch_idx + 1) * block_table_stride_req + dst_col)\n")
"""Planted (tests only): a destination in column 1 is read from the next batch row, a block another
request holds, and the published destination's trackers reset there."""


def _beside(source: Path, traces: Path) -> dict:
    """``beside_the_null_block`` of ``source``'s ``C.postprocess`` frame obligation."""
    module = kernel_module(str(source))
    roles = roles_of(detect(module), version_publishing_modes(str(source)))
    label = source.stem
    name = next(n for n in register(module, label, roles) if n.startswith("kernel.C.postprocess.frame@"))
    remote = load_isolated(str(source), "--impl", cuda=False, launch_seconds=120)
    try:
        return {"obligation": name, "status": "failed", **beside_the_null_block(module, remote, roles, name, label,
                                                                              str(source), traces)}
    finally:
        remote.close()


@pytest.mark.skipif(not corpus.present(), reason="the vLLM corpus is not present")
@pytest.mark.parametrize("version", ["C1", "C2"])
def test_c1_and_c2s_postprocess_store_outside_their_rows_only_to_the_null_block(version: str, tmp_path: Path) -> None:
    assert _beside(VERSIONS / f"{version}.py", tmp_path) == {"obligation": f"kernel.C.postprocess.frame@{version}",
                                                             "status": "failed", "null_block_only": True}


@pytest.mark.skipif(not corpus.present(), reason="the vLLM corpus is not present")
def test_teeth_a_postprocess_that_also_stores_to_another_requests_block_is_a_finding(tmp_path: Path) -> None:
    text = (VERSIONS / "C1.py").read_text()
    assert text.count(ANCHOR) == 1, "the plant's anchor moved in C1"
    source = tmp_path / "C1_held.py"
    source.write_text(text.replace(ANCHOR, HELD + ANCHOR))
    entry = _beside(source, tmp_path)
    assert entry["null_block_only"] is False and entry["replayed"] == "reproduced", entry
    assert "store to ring_start" in entry["violated"] or "store to num_committed" in entry["violated"]
    (finding,) = kernel_findings({"results": [entry]})
    assert finding.impact is not None and (finding.impact.whose, finding.impact.read) == ("another request", True)
    assert entry["cell"][1] != 0 and f"slot {entry['cell'][1]}" in finding.impact.who, finding.impact.who
