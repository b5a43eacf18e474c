"""Kernel proofs decide verdicts: a kernel obligation that fails with a
counterexample the real kernel shows on replay makes the version a
``finding`` (named, with its trace, in the table, the JSON, the JUnit
report, and at the kernel line its violated part names in the SARIF log and
the HTML page). Teeth: A3 planted (made here from ``../shared``, never committed) so
that program 1, not program 0, bumps ``rand_seeds``, a write no lifecycle
property observes: only the frame obligation catches it."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

from replayssm.cli import main
from replayssm.review.verdict_parts import ReviewParts
from replayssm.review.verdicts import build_verdict, kernel_evidence
from review_corpus import needs_corpus, version_path

PLANT = ("if NUM_RAND_SEEDS > 0 and batch_idx == 0:", "if NUM_RAND_SEEDS > 0 and batch_idx == 1:")
FRAME = "kernel.A.postprocess.frame@A3_planted"


def _result(status: str, replayed: str | None) -> dict:
    r = {"obligation": "kernel.A.postprocess.frame@X", "status": status, "cases": 4, "case": "c", "violated": "v"}
    return {**r, "replayed": replayed, "trace": "t.json", "replay": "r"} if replayed else r


def test_a_kernel_failure_is_a_finding_only_when_it_replays() -> None:
    """A failure that does not show on the real kernel (or was not replayed, or has no small
    launch) is not decided: a coverage shortfall, never a pass."""
    for replayed, status in (("reproduced", "finding"), ("shows another failure", "finding"),
                             ("not reproduced", "coverage shortfall"), ("no small launch", "coverage shortfall"),
                             (None, "coverage shortfall")):
        kp = {"applies": True, "results": [_result("failed", replayed)], "seconds": 1.0}
        v = build_verdict("X", "x.py", "A", "gen A", ReviewParts(kernel_proofs=kp))
        assert v.status == status, replayed
        assert "kernel obligations proved 0/1 (A.postprocess.frame failed" in kernel_evidence(kp)


def test_a_kernel_proof_not_proved_or_proved_only_under_an_unguaranteed_clause_is_no_pass() -> None:
    """An unknown proof is a coverage shortfall; one proved only under a launch clause vLLM does
    not guarantee (``relies_on``) is latent, named in the table and the JUnit report. Teeth: proved
    outright is a pass."""
    from replayssm.review.verdicts import junit_cases

    def verdict(**result: object) -> object:
        r = {"obligation": "kernel.D.postprocess.int32@X", "status": "proved", "cases": 3, "case": None,
             "violated": None, **result}
        return build_verdict("X", "x.py", "D", "gen D", ReviewParts(kernel_proofs={
            "applies": True, "results": [r], "seconds": 1.0}))

    assert verdict().status == "pass"
    unknown = verdict(status="unknown")
    assert unknown.status == "coverage shortfall"
    assert unknown.shortfall == ["kernel obligation kernel.D.postprocess.int32@X unknown: not decided by the prover"]
    relied = verdict(relies_on=["query_start_loc_non_decreasing"])
    assert relied.status == "latent" and [x.assumption for x in relied.latent] == ["query_start_loc_non_decreasing"]
    (case,) = [c for c in junit_cases([relied]) if c.name == "X: kernel proofs"]
    assert case.kind == "failure" and "query_start_loc_non_decreasing" in (case.failure or "")


@needs_corpus
def test_a_bug_only_the_kernel_proofs_catch_makes_review_a_finding(tmp_path: Path, capsys) -> None:
    text = version_path("A3").read_text()
    assert text.count(PLANT[0]) == 1
    planted = tmp_path / "A3_planted.py"
    planted.write_text(text.replace(*PLANT))
    report, junit, sarif, html = (tmp_path / f"r.{x}" for x in ("json", "xml", "sarif", "html"))
    code = main(["review", str(planted), "--examples", "6", "--traces", str(tmp_path / "traces"),
                 "--json", str(report), "--junit", str(junit), "--sarif", str(sarif), "--html", str(html)])
    out = capsys.readouterr().out
    verdict = json.loads(report.read_text())["verdicts"][0]
    assert code == 1 and verdict["status"] == "finding", out
    assert not verdict["findings"], "the lifecycle campaign should not see it"
    (kf,) = verdict["kernel_findings"]
    assert kf["property"] == FRAME and kf["evidence"] == "proved" and Path(kf["trace"]).exists()
    assert main(["replay", kf["trace"], "--impl", str(planted)]) == 1
    assert FRAME in out and "kernel obligations proved 12/13" in out
    cases = {c.get("name"): c for c in ElementTree.parse(junit).getroot().iter("testcase")}
    failure = cases["A3_planted: kernel proofs"].find("failure")
    assert failure is not None and kf["trace"] in failure.text
    line = int(kf["violated"].split(" at A3_planted.py:")[1].split()[0])
    assert planted.read_text().splitlines()[line - 1].strip().startswith("tl.store(rand_seeds")
    assert kf["location"]["line"] == line and Path(kf["location"]["file"]).resolve() == planted.resolve()
    (result,) = [r for r in json.loads(sarif.read_text())["runs"][0]["results"] if r["ruleId"].startswith("kernel.")]
    where = result["locations"][0]["physicalLocation"]
    assert result["ruleId"] == FRAME.split("@")[0] and where["region"]["startLine"] == line
    assert Path(where["artifactLocation"]["uri"].removeprefix("file://")).name == planted.name
    page = html.read_text()
    assert f"A3_planted: {FRAME} failed (proved, " in page and f"A3_planted.py:{line}" in page
    assert "tl.store(rand_seeds" in page  # the source line itself
