"""A row-blocked kernel's counterexample launch keeps its sampled rows apart.

The row-blocked kernel is proved at sampled lanes, and the proof states the
caller's ``exclusive_decode_live_slot`` only at the cells the kernel under
proof writes. A planted kernel that writes other cells leaves the sampled
rows' own live slots free to alias; a replay of such a launch (every row run)
then breaks the correct kernel too, a trace outside the caller contract. The
report's small-launch constraints (``report._sampled_rows_only``) state the
assumption between every two sampled rows in the spec's terms.
"""

from __future__ import annotations

import pytest
import z3
from test_kernel_blocked_teeth import WIDE_MUTANTS, WIDE_NONE, load_mutant

from replayssm.spec.vocab import conj
from replayssm.verify.kernels import report
from replayssm.verify.kernels.obligations import kernel_claim, register
from replayssm.verify.obligation import fact_vector, new_solver

WRITES_OTHER_CELLS = next(m for m in WIDE_MUTANTS if m.name == "lanes past the second read the next row's block-table row")


def _aliasing_launch_allowed(tmp_path) -> bool:
    """Whether the planted kernel's counterexample constraints allow two sampled decode rows of one
    group to share a live slot."""
    module, path = load_mutant(WRITES_OTHER_CELLS, tmp_path)
    register(module, path.stem)
    kc = kernel_claim(module, "blocked", WRITES_OTHER_CELLS.caught_by, WIDE_NONE)
    case = kc.cases[0]
    pad = case.constexprs["geometry"].pad_slot
    sampled = [r.trace for c in kc.cases if c.block is not None for r in c.block.rows]
    a, b = sampled[0], sampled[-1]
    num_reqs = case.spec.sizes.num_reqs
    alias = conj(a.batch < num_reqs, b.batch < num_reqs, a.group == b.group, a.batch != b.batch,
                 a.decode, a.live_slot == b.live_slot, a.live_slot != pad)
    facts = fact_vector([f for _, f in kc.claim.assumptions] + report._sampled_rows_only(kc, 1, 4))
    return new_solver(facts, report.lift(alias)).check() == z3.sat


def test_two_sampled_rows_never_share_a_live_slot_in_a_counterexample_launch(tmp_path) -> None:
    assert not _aliasing_launch_allowed(tmp_path)


def test_teeth_without_the_rows_exclusive_constraint_they_may(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "_sampled_rows_exclusive", lambda kc, sampled, num_reqs: [])
    assert _aliasing_launch_allowed(tmp_path)
