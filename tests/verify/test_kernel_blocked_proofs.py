"""Our row-blocked kernel proves its obligations (a sample of variants here;
``prove --kernels --impl replayssm.impl.kernels_blocked`` proves all 80), and
``--impl`` selects it."""

from __future__ import annotations

import pytest

from replayssm.impl import kernels_blocked
from replayssm.verify.kernels.obligations import kernel_claim, properties
from replayssm.verify.kernels.registry import BLOCKED
from replayssm.verify.kernels.selection import kernel_obligations
from replayssm.verify.obligation import Obligation, prove

SAMPLE = ["rows odd cum/pre/map/align/live", "last rows pow2 len/post/nomap/align/col0",
          "rows vllm len/pre/nomap/none/live", "work list odd len/post/map/align/live"]


@pytest.mark.parametrize("case", SAMPLE)
def test_ours_prove_every_obligation_in_sample_variants(case):
    for prop in properties(BLOCKED):
        claim = kernel_claim(kernels_blocked, "blocked", prop, case).claim
        result = prove(Obligation(f"kernel.blocked.{prop}", "blocked", "", lambda claim=claim: [claim], every_case=True))
        assert result.status == "proved", f"{case} {prop}: {result.status} {result.detail}"


def test_impl_selects_the_blocked_kernel_and_a_module_without_kernels_is_refused():
    names = kernel_obligations("replayssm.impl.kernels_blocked")
    assert sorted(names) == sorted(f"kernel.blocked.{p}@replayssm.impl.kernels_blocked" for p in properties(BLOCKED))
    assert all(n.startswith("kernel.") and "blocked" not in n for n in kernel_obligations(None))
    with pytest.raises(ValueError, match="has none of the kernels the proofs know .*postprocess_replayssm_blocked"):
        kernel_obligations("replayssm.impl.materialize")


@pytest.mark.parametrize("case", ["rows pow2 len/pre/map/none/live", "last rows unit len/pre/map/align/live"])
def test_four_rows_per_program_prove_as_two_do(case, monkeypatch):
    """A spot check of the argument that 2 lanes stand for more: with 4 rows
    per program, memory safety, equivalence (per lane) and int32 prove too
    (kept to variants that prove in seconds; the 4-lane conflict query, and
    full align-mode blocks under load, can pass the solver's 20 s)."""
    from replayssm.verify.kernels import blocked, obligations

    monkeypatch.setattr(blocked, "ROWS", 4)
    monkeypatch.setattr(obligations, "_CASES", {})
    for prop in ("memory_safety", "equivalence", "int32"):
        kc = kernel_claim(kernels_blocked, "blocked", prop, case)
        assert kc.cases[0].run.launch.constexprs["ROWS_PER_PROGRAM"] == 4
        result = prove(Obligation(f"kernel.blocked.{prop}", "blocked", "", lambda c=kc.claim: [c], every_case=True))
        assert result.status == "proved", f"{case} {prop}: {result.status} {result.detail}"


def test_replay_refuses_an_impl_without_the_traces_kernel():
    """A kernel-proof trace names its kernel; ``--impl`` must have it (a ValueError: the CLI's exit 2)."""
    from replayssm.verify.kernels.playback import replay_kernel_trace

    trace = {"actions": [{"name": "set_state"}, {"name": "postprocess"}],
             "#meta": {"property": "equivalence", "kernel": "postprocess_replayssm_blocked_kernel"}}
    with pytest.raises(ValueError, match="--impl 'replayssm.impl.materialize' has no kernel "
                                         "'postprocess_replayssm_blocked_kernel'"):
        replay_kernel_trace(trace, "replayssm.impl.materialize")
