"""Teeth of the kernel obligations: each planted one-line bug in a copy of our
kernels is caught by the obligation it names, with a counterexample whose
launch reproduces the failure on the real kernel under Triton's interpreter
(a counterexample that does not reproduce is a bug of the tool)."""

from __future__ import annotations

import pytest

from replayssm.verify.kernels.obligations import properties, register, variants
from replayssm.verify.kernels.registry import REFERENCE
from replayssm.verify.kernels.playback import playback
from replayssm.verify.kernels.report import explain
from replayssm.verify.obligation import REGISTRY, prove

from kernel_mutants import MUTANTS, load_mutant


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_planted_bug_is_caught_and_replays(mutant, tmp_path):
    module, path = load_mutant(mutant, tmp_path)
    label = path.stem
    register(module, label)
    name = f"kernel.{mutant.caught_by}@{label}"
    result = prove(REGISTRY[name])
    assert result.status == "failed", f"{mutant.name}: {name} {result.status}"
    case = result.counterexample["case"]
    finding = explain(name, case, str(path))
    assert finding.trace is not None, finding.text
    if mutant.verdict:
        assert f"equals the spec under {{{mutant.verdict}}}" in finding.verdict, finding.verdict
    seen = playback(finding.trace, module)
    assert seen.reproduces(mutant.caught_by.split(".")[1]), f"{mutant.name}: not reproduced\n{finding.text}\n{seen.report()}"
    assert not seen.spec_fault, f"{mutant.name}: the example lies outside the spec's domain\n{finding.text}"


def test_every_kernel_obligation_of_ours_has_a_planted_bug():
    caught = {m.caught_by for m in MUTANTS}
    ours = {f"{role.name}.{prop}" for role in REFERENCE for prop in properties(role)}
    assert sorted(ours - caught) == []
    assert len(MUTANTS) >= 12 and len({m.name for m in MUTANTS}) == len(MUTANTS)


def test_every_variant_is_a_case():
    """Each obligation has one case per constexpr variant: all 32 flag
    combinations of the postprocess kernel, both of migration, nine capacities."""
    assert len(variants("postprocess")) >= 32 and len(variants("migration")) == 8 and len(variants("compaction")) == 9
