"""Every ``postprocess.*`` obligation proves (and is not vacuous: ``prove``
fails an obligation whose assumptions never admit the covered situation)."""

from __future__ import annotations

import pytest

import replayssm.verify.postprocess_proofs  # noqa: F401  (registers the obligations)
from replayssm.verify.obligation import REGISTRY, prove

NAMES = sorted(n for n in REGISTRY if n.startswith("postprocess."))


def test_obligations_are_registered():
    assert len(NAMES) >= 10, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_postprocess_obligation_proves(name):
    result = prove(REGISTRY[name])
    assert result.status == "proved", (result.status, result.detail, result.counterexample)
    assert result.cases >= 1
