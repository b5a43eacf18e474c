"""A verdict's latent reliances come from two places, told apart by a typed field (``LatentReliance.kind``),
not by whether the entry has a trace: a probe (its counterexample needs an assumption vLLM does not
guarantee) and a kernel proof (an obligation proved only under a launch clause vLLM does not guarantee).

Each kind is rendered as before the field: the JSON entry, the JUnit case it fails (the probe's own case,
with its trace; the kernel proofs' case, with its sentence), the table's latent column and trace list, and
the impacts. A probe entry without a trace (a summary that lost it) stays a probe's: before, it read as a
kernel proof's and failed the kernel proofs' case.
"""

from __future__ import annotations

from replayssm.review.verdict_parts import LifecycleResult, ProbeOutcome, ReviewParts
from replayssm.review.verdicts import build_verdict, impacts, junit_cases, print_table, verdict_json

PROBED, CLAUSE = "block_copy_moves_trackers", "query_start_loc_non_decreasing"
OBLIGATION = "kernel.D.postprocess.int32@X"
IMPACT = {"sentence": "request 1's next decode reads a stale state", "read": True}


def verdict(trace: str | None = "t.json"):
    probe = {"assumptions": [PROBED], "guaranteed": False, "outcome": "latent", "relied_on": True,
             "property": "forward", "trace": trace, "message": "forward: decode reads ...", "impact": IMPACT}
    kernel = {"applies": True, "seconds": 1.0, "results": [
        {"obligation": OBLIGATION, "status": "proved", "cases": 3, "case": None, "violated": None,
         "relies_on": [CLAUSE]}]}
    held = LifecycleResult({"request_steps": 100}, {"forward": "held"}, (), (), 1.0)
    return build_verdict("X", "x.py", "D", "gen D", ReviewParts(lifecycle=held, kernel_proofs=kernel,
                                                                probes=[ProbeOutcome(PROBED, probe)]))


def test_each_kind_of_latent_entry_is_typed_and_rendered_as_before(capsys) -> None:
    from replayssm.review.verdict_parts import KERNEL_PROOF, PROBE

    v = verdict()
    assert v.status == "latent" and [(x.kind, x.assumption) for x in v.latent] == [(PROBE, PROBED),
                                                                                   (KERNEL_PROOF, CLAUSE)]
    kernel_sentence = (f"kernel obligation {OBLIGATION} is proved only under the launch clause {CLAUSE}, which vLLM "
                       "does not guarantee: without it the proof fails")
    assert verdict_json(v)["latent"] == [
        {"assumption": PROBED, "property": "forward", "message": "forward: decode reads ...", "trace": "t.json",
         "replay": "replayssm-verify replay t.json --impl x.py", "impact": IMPACT, "location": None},
        {"assumption": CLAUSE, "property": OBLIGATION, "trace": None, "replay": None, "impact": None,
         "message": kernel_sentence, "location": None}]
    cases = {c.name: c for c in junit_cases([v])}
    assert cases["X: kernel proofs"].failure == f"latent: {kernel_sentence}"
    probe_case = cases[f"X: probe without {PROBED}"].failure or ""
    assert probe_case.startswith(f"latent: relies on {PROBED}, which vLLM does not guarantee") and "trace: t.json" \
        in probe_case
    print_table([v], None, wide=True)
    row = capsys.readouterr().out.splitlines()[1]
    assert f"{PROBED}, {CLAUSE}" in row and "latent: t.json" in row and "latent: None" not in row, row
    assert impacts(v) == [(f"latent on {PROBED}", "forward", IMPACT)]


def test_a_probe_entry_without_a_trace_stays_a_probes() -> None:
    from replayssm.review.verdict_parts import PROBE

    v = verdict(trace=None)
    assert [x.kind for x in v.latent][:1] == [PROBE]
    cases = {c.name: c for c in junit_cases([v])}
    assert "decode reads" not in (cases["X: kernel proofs"].failure or ""), cases["X: kernel proofs"].failure
