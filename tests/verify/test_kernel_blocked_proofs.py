"""Our row-blocked kernel proves its obligations (a sample of variants here;
plain ``prove`` proves all 80), the variants are the launches we make, and
``--impl`` selects it as well."""

from __future__ import annotations

import pytest

from replayssm.impl import kernels_blocked
from replayssm.verify.kernels.obligations import kernel_claim, properties
from replayssm.verify.kernels.registry import BLOCKED
from replayssm.verify.kernels.selection import kernel_obligations
from replayssm.verify.obligation import Obligation, prove

SAMPLE = ["block2 odd cum/pre/map/align/live", "block128 pow2 len/post/nomap/align/col0",
          "block128 vllm len/pre/nomap/none/live", "work list odd len/post/map/align/live"]


@pytest.mark.parametrize("case", SAMPLE)
def test_ours_prove_every_obligation_in_sample_variants(case):
    for prop in properties(BLOCKED):
        claim = kernel_claim(kernels_blocked, "blocked", prop, case).claim
        result = prove(Obligation(f"kernel.blocked.{prop}", "blocked", "", lambda claim=claim: [claim], every_case=True))
        assert result.status == "proved", f"{case} {prop}: {result.status} {result.detail}"


def test_impl_selects_the_blocked_kernel_and_a_module_without_kernels_is_refused():
    names = kernel_obligations("replayssm.impl.kernels_blocked")
    assert sorted(names) == sorted(f"kernel.blocked.{p}@replayssm.impl.kernels_blocked" for p in properties(BLOCKED))
    # plain prove (and prove --kernels) proves it too, under its own names
    assert sorted(n for n in kernel_obligations(None) if "blocked" in n) == \
        sorted(f"kernel.blocked.{p}" for p in properties(BLOCKED))
    with pytest.raises(ValueError, match="has none of the kernels the proofs know .*postprocess_replayssm_blocked"):
        kernel_obligations("replayssm.impl.materialize")


def test_the_variants_are_the_launches_we_make():
    """Rows per program and the work list as the context (``context_blocked``)
    and the kernel-level facade (``replayssm_utils_blocked``) launch them."""
    from replayssm.impl import replayssm_utils_blocked
    from replayssm.verify.kernels import blocked
    from replayssm.verify.kernels.obligations import variants

    launched = {(params[3], params[4], params[1].materialize_prefixes) for _, params in variants("blocked")
                if params[0] == "rows"}
    assert blocked.ROWS == replayssm_utils_blocked.KERNEL_LEVEL_ROWS_PER_PROGRAM
    wide = kernels_blocked.DEFAULT_ROWS_PER_PROGRAM
    # the facade: no work list; the context: the work list in align mode
    assert launched == {(blocked.ROWS, False, False), (blocked.ROWS, False, True), (wide, False, False),
                        (wide, True, True)}
    assert {params[3] for _, params in variants("blocked") if params[0] == "work list"} == {wide}


def test_replay_refuses_an_impl_without_the_traces_kernel():
    """A kernel-proof trace names its kernel; ``--impl`` must have it (a ValueError: the CLI's exit 2)."""
    from replayssm.verify.kernels.playback import replay_kernel_trace

    trace = {"actions": [{"name": "set_state"}, {"name": "postprocess"}],
             "#meta": {"property": "equivalence", "kernel": "postprocess_replayssm_blocked_kernel"}}
    with pytest.raises(ValueError, match="--impl 'replayssm.impl.materialize' has no kernel "
                                         "'postprocess_replayssm_blocked_kernel'"):
        replay_kernel_trace(trace, "replayssm.impl.materialize")
