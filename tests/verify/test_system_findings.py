"""The findings of ``verify.system_findings``: each still breaks its invariant, and the world beside
it that differs only in what the host publishes (all mode under an A1-era host) proves there."""

from __future__ import annotations

import pytest

from replayssm.verify import system_findings as sf
from replayssm.verify.bmc import explicit_bmc
from replayssm.verify.obligation import first_violation
from replayssm.verify.system_proofs import preservation_claim, selecting
from replayssm.verify.system_steps import case_transition
from replayssm.verify.system_world import world_params
from replayssm.spec.system import CANONICAL


@pytest.mark.parametrize("name", sorted(sf.FINDINGS))
def test_each_finding_breaks_its_invariant(name: str) -> None:
    f = sf.FINDINGS[name]
    trace = sf.finding_trace(f)
    assert trace is not None, f"{name}: its world proves now; the finding is gone (update docs/assumptions.md)"
    assert any(v.endswith(f.invariant) for v in trace["#meta"]["violated"]), trace["#meta"]["violated"]


@pytest.mark.parametrize("name", sorted(sf.FINDINGS))
def test_the_publishing_host_keeps_the_invariant_there(name: str) -> None:
    """The same run or step shape in all mode under a host that publishes in it (``v2-all``) proves."""
    f = sf.FINDINGS[name]
    if f.case is None:
        _, r = explicit_bmc("v2-all", depth=f.depth)
        assert r["status"] == "proved", r.get("violated")
    else:
        claim = preservation_claim(case_transition(world_params("v2-all"), f.case), name, selecting(CANONICAL))
        assert first_violation(claim) is None


def test_a_finding_names_a_world_of_the_unpublished_table() -> None:
    with pytest.raises(ValueError, match="is not a world of UNPUBLISHED_ALL"):
        sf.finding_trace(sf.SystemFinding("x", "v2-align", "canonical", "?"))
