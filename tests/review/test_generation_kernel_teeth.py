"""Teeth of the generations' kernel obligations: one planted one-line bug in a
copy of one corpus version per generation (made here from ``../shared``, never
committed), caught by the named kernel obligation of its adapter's role, with
a counterexample whose launch reproduces the failure on the real (mutated)
kernel under Triton's interpreter (a padding program's on the grid the
version launches, ``max_num_reqs`` rows). One variant each keeps the test small."""

from __future__ import annotations

import pytest

from replayssm.base.targets import load_target
from replayssm.spec.generations import detect
from replayssm.verify.kernels.generation_roles import roles_of
from replayssm.spec import corpus
from replayssm.verify.kernels.obligations import kernel_claim, register
from replayssm.verify.kernels.playback import playback
from replayssm.verify.kernels.report import explain
from replayssm.verify.obligation import Obligation, prove

VERSIONS = corpus.versions()

PLANTED = [
    # in align mode: A1's prefill reset reads past a one-column mode-none table without any plant
    ("A1", "for col in tl.range(first_col, last_col + 1):", "for col in tl.range(first_col, last_col + 2):",
     "A.postprocess", "memory_safety", "unit len/post/nomap/align/live L1"),
    ("B1", "tl.store(tracker_committed + dst_slot, 0, mask=fresh)",
     "tl.store(tracker_committed + 0 * dst_slot, 0, mask=fresh)", "B.migration", "frame", "pow2 nomap"),
    ("C1", "checkpointed = old_committed + query_len > LOGICAL_WINDOW",
     "checkpointed = old_committed * 65536 * 32768 + query_len > LOGICAL_WINDOW", "C.postprocess", "int32",
     "pow2 len/pre/nomap/none/live L1"),
    ("D1", "tl.store(tracker_committed + dst_slot, 0, mask=valid_slot)",
     "tl.store(tracker_committed + 0 * dst_slot, 0, mask=valid_slot)", "D.migration", "frame", "pow2 nomap"),
    # a padding program (row num_reqs + k of the max_num_reqs grid) clears real row k's plan entry: no real
    # program's obligation sees it, only the padding programs'
    ("C1", "early exit.\n    tl.store(plan_flush_count + batch_idx, -1)",
     "early exit.\n    tl.store(plan_flush_count + batch_idx - num_reqs * (batch_idx >= num_reqs), -1)",
     "C.postprocess", "padding", "unit len/pre/map/none/live L1"),
]


@pytest.mark.skipif(not corpus.present(), reason=corpus.missing() if not corpus.present() else "")
@pytest.mark.parametrize("version,old,new,role,prop,case", PLANTED, ids=[f"{p[0]}-{p[4]}" for p in PLANTED])
def test_planted_bug_in_a_corpus_copy_is_caught_and_replays(version, old, new, role, prop, case, tmp_path):
    text = (VERSIONS / f"{version}.py").read_text()
    assert text.count(old) == 1, f"{version}: the planted line occurs {text.count(old)} times"
    path = tmp_path / f"{version}_planted.py"
    path.write_text(text.replace(old, new))
    module = load_target(str(path))
    roles = roles_of(detect(module))
    record = next(r for r in roles if r.name == role)
    label = path.stem
    register(module, label, roles)
    name = f"kernel.{role}.{prop}@{label}"
    claim = kernel_claim(module, record, prop, case).claim
    result = prove(Obligation(name, role, "", lambda: [claim]))
    assert result.status == "failed", f"{version}: {name} {result.status}"
    finding = explain(name, case, str(path))
    assert finding.trace is not None, finding.text
    seen = playback(finding.trace, module, roles)
    assert seen.reproduces(prop), f"{version}: not reproduced\n{finding.text}\n{seen.report()}"
    original = load_target(str(VERSIONS / f"{version}.py"))
    assert not playback(finding.trace, original, roles).reproduces(prop), f"{version}: the unplanted copy fails too"
