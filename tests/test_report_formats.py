"""The SARIF and HTML reports without the corpus: the checks can fail (a page
that loads an image from outside is caught; a SARIF log missing its
version is refused by the schema), a fuzz finding lands on the ``def`` line
of the kernel it names, a review's kernel finding on the kernel line its
violated part names, and a system trace's page draws every used slot."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from report_checks import render, sarif_errors

from replayssm.base import html_report, html_review, sarif
from replayssm.verify.traces import timeline


def test_a_page_loading_from_outside_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/ring.png">ring</body></html>')
    shown = render(page, tmp_path / "render", 320, 200)
    assert shown.page_requests == ["http://example.invalid/ring.png"]


def test_the_schema_refuses_a_log_without_its_version() -> None:
    log = sarif.sarif_log([sarif.Issue("refinement", "m", "k.py", 3)])
    assert sarif_errors(log) == []
    del log["version"]
    assert sarif_errors(log), "the schema must require the version"


def _def_line(path: Path, name: str) -> int:
    return next(n.lineno for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_a_fuzz_finding_is_located_at_its_kernels_def_line() -> None:
    import replayssm.impl.kernels as ours

    summary = {"config": {"impl": "replayssm.impl.replayssm_utils", "level": "kernel"}, "findings": [
        {"kind": "discrepancy", "reason": "disagrees with the spec in 1 entries", "kernel": "_postprocess_replayssm_kernel",
         "cells": [{"buffer": "ring_start", "index": [0, 1], "spec": 2, "impl": 3}], "trace": "out/f.json"},
        {"kind": "memory", "reason": "red zone written", "kernel": "ReplaySSMModelContext.postprocess",
         "cells": [], "trace": None}]}
    log = sarif.sarif_log(sarif.fuzz_issues(sarif.fuzz_located(summary)))
    assert sarif_errors(log) == []
    kernel, context = (r["locations"][0]["physicalLocation"] for r in log["runs"][0]["results"])
    assert kernel["artifactLocation"]["uri"].endswith("impl/kernels.py")
    assert kernel["region"]["startLine"] == _def_line(Path(ours.__file__), "_postprocess_replayssm_kernel")
    assert context["artifactLocation"]["uri"].endswith("impl/context.py") and context["region"]["startLine"] > 1
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["discrepancy", "memory"]


def test_a_system_traces_page_draws_each_used_slot(tmp_path: Path) -> None:
    from replayssm.verify import system_world as world
    from replayssm.base.system_traces import record_run

    p = world.system_params(world.SYSTEM_CONVENTIONS["v1-align"])
    trace = record_run(p, [("admit", {"req": 0, "stream": 0, "prompt": 3}),
                           ("step", {"rows": [{"sched": 1, "q": 2, "acc": 1, "live_col": 0, "is_prefilling": 1,
                                               "slot": [1, 1]}]})])
    data = timeline(trace)
    report = {"obligations": [{"name": "system.example", "status": "failed", "cases": 1, "seconds": 0.1,
                               "assumptions": ["row_nonempty"], "counterexample": {"violated": ["refinement"]}}]}
    page = html_report.prove_html(report, {"system.example": data})
    used = sum(len(s["slots"]) for s in data["steps"])
    assert used and page.count("<svg") == used
    assert "system.example failed" in page and "row_nonempty" in page and "guaranteed" in page
    json.dumps(data)  # the timeline is plain data


def test_a_latent_reliance_is_a_sarif_warning_and_a_section_of_the_page() -> None:
    where = {"file": "vllm/ssu_dispatch.py", "line": 42, "kernel": "_postprocess_replayssm_kernel", "why": "def"}
    document = {"verdicts": [{"version": "head", "api": "A", "status": "latent", "source": "head.py",
                              "properties": {"refinement": "held"}, "findings": [], "differences": [],
                              "latent": [{"assumption": "live_move_copies_state", "property": "refinement",
                                          "message": "refinement: ...", "trace": "t.json", "replay": "r",
                                          "location": where}],
                              "assumptions": {"live_move_copies_state": {"assumptions": ["live_move_copies_state"],
                                                                         "outcome": "latent", "relied_on": True}}}]}
    log = sarif.sarif_log(sarif.review_issues(document))
    assert sarif_errors(log) == []
    (result,) = log["runs"][0]["results"]
    assert result["level"] == "warning" and result["locations"][0]["physicalLocation"]["region"]["startLine"] == 42
    assert "which vLLM does not guarantee" in result["message"]["text"]
    page = html_review.review_html(document, {})
    assert "latent refinement: relies on live_move_copies_state" in page and "status-latent" in page


def test_a_kernel_finding_is_a_sarif_error_on_its_kernel_line_and_a_section_of_the_page() -> None:
    """A kernel obligation failed with a counterexample that replays: SARIF and the
    page put it on the line its violated part names, in the file as the checkout
    names it, inside the kernel whose def spans that line; one that did not
    replay is no finding and appears in neither."""
    from replayssm.review.verdict_parts import ReviewParts
    from replayssm.review.verdicts import build_verdict, verdict_json

    failed = {"obligation": "kernel.A.postprocess.frame@head", "status": "failed", "cases": 4, "case": "v1",
              "violated": "store to rand_seeds at head.py:57 inside the program's frame", "replayed": "reproduced",
              "trace": "t/kernel.json", "replay": "replayssm-verify replay t/kernel.json --impl head.py",
              "explanation": "program ids: batch 1"}
    quiet = {**failed, "obligation": "kernel.A.postprocess.int32@head", "replayed": "not reproduced",
             "violated": "i32 result at head.py:70 fits"}
    kp = {"applies": True, "results": [failed, quiet], "seconds": 1.0}
    locations = {"file": "vllm/head.py", "changed": [], "kernels": [
        {"name": "_reset", "phases": ["migrate"], "line": 10, "end": 40, "changed": []},
        {"name": "_postprocess", "phases": ["postprocess"], "line": 50, "end": 90, "changed": []}]}
    elsewhere = build_verdict("head", "at-ref/head.py", "A", "gen A", ReviewParts(kernel_proofs=kp),
                              locations={**locations, "file": "vllm/other.py"})
    assert verdict_json(elsewhere)["kernel_findings"][0]["location"]["file"] == "at-ref/head.py"
    document = {"verdicts": [{**verdict_json(build_verdict("head", "at-ref/head.py", "A", "gen A",
                                                           ReviewParts(kernel_proofs=kp), locations=locations)), "assumptions": {}}]}
    (kf,) = document["verdicts"][0]["kernel_findings"]
    assert kf["location"] == {"file": "vllm/head.py", "line": 57, "kernel": "_postprocess",
                              "why": "the kernel source line its violated part names"}
    log = sarif.sarif_log(sarif.review_issues(document))
    assert sarif_errors(log) == []
    (result,) = log["runs"][0]["results"]
    where = result["locations"][0]["physicalLocation"]
    assert result["ruleId"] == "kernel.A.postprocess.frame" and result["level"] == "error"
    assert where["artifactLocation"]["uri"] == "vllm/head.py" and where["region"]["startLine"] == 57
    assert "replayssm-verify replay t/kernel.json" in result["message"]["text"]
    page = html_review.review_html(document, {})
    assert page.count('<section class="finding">') == 1
    assert "head: kernel.A.postprocess.frame@head failed (proved, reproduced on the real kernel)" in page
    assert "vllm/head.py:57 in <code>_postprocess</code>" in page and "program ids: batch 1" in page


def test_a_latent_reliance_stays_on_its_phases_kernel_a_finding_follows_the_change() -> None:
    from replayssm.review.locations import locate

    locations = {"file": "f.py", "changed": [30], "kernels": [
        {"name": "reset", "phases": ["migrate"], "line": 20, "end": 40, "changed": [30]},
        {"name": "post", "phases": ["postprocess"], "line": 50, "end": 90, "changed": []}]}
    finding = {"message": "refinement: request 0 ..."}
    assert locate(locations, finding)["line"] == 30  # the only change, in the migrate kernel
    assert locate(locations, finding, follow_change=False) == {
        "file": "f.py", "line": 50, "kernel": "post", "why": "the kernel's def line (the postprocess phase launches it)"}
    assert locate(locations, {"message": "memory: migrate: wrote past a row"}, follow_change=False)["line"] == 30


def test_prove_writes_sarif_at_the_line_its_kernel_counterexample_names(tmp_path: Path) -> None:
    """A planted read past a block-table row: the result is on the line the proof names, in the planted file."""
    from replayssm.cli import main

    old = "last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)"
    source = (Path(__file__).resolve().parents[1] / "impl" / "kernels.py").read_text()
    assert source.count(old) == 1
    planted = tmp_path / "planted_kernels.py"
    planted.write_text(source.replace(old, old.replace(") - 1, 0)", "), 0)")))
    out = tmp_path / "r"
    code = main(["prove", "--kernels", "--impl", str(planted), "--only", "postprocess.memory_safety", "--no-cache",
                 "--counterexamples", str(tmp_path / "cx"), "--sarif", f"{out}.sarif", "--html", f"{out}.html"])
    assert code == 1
    log = json.loads(Path(f"{out}.sarif").read_text())
    assert sarif_errors(log) == []
    (result,) = log["runs"][0]["results"]
    where = result["locations"][0]["physicalLocation"]
    named = result["message"]["text"].split(" at planted_kernels.py:")[1].split()[0]
    assert Path(where["artifactLocation"]["uri"]).name == "planted_kernels.py"
    assert where["region"]["startLine"] == int(named) and result["ruleId"].startswith("kernel.postprocess.memory")
    page = Path(f"{out}.html").read_text()
    assert f"planted_kernels.py:{named}" in page and "replayssm-verify replay " in page and "kernel-trace" in page


def test_fuzz_writes_sarif_and_a_page_with_the_findings_trace(tmp_path: Path) -> None:
    """A planted off-by-one commit count: found, located at its kernel's def line, its launches drawn."""
    from replayssm.cli import main

    source = (Path(__file__).resolve().parents[1] / "impl" / "kernels.py").read_text()
    old = "        tl.store(num_committed + live_slot, next_committed)\n"
    assert source.count(old) == 1
    planted = tmp_path / "planted_kernels.py"
    planted.write_text(source.replace(old, old.replace("next_committed)", "next_committed + 1)")))
    out = tmp_path / "s"
    code = main(["fuzz", "--impl", str(planted), "--examples", "64", "--jobs", "1", "--shrink-seconds", "2",
                 "--failures", str(tmp_path / "f"), "--sarif", f"{out}.sarif", "--html", f"{out}.html"])
    assert code == 1
    log = json.loads(Path(f"{out}.sarif").read_text())
    assert sarif_errors(log) == []
    result = log["runs"][0]["results"][0]
    where = result["locations"][0]["physicalLocation"]
    assert result["ruleId"] == "discrepancy" and where["artifactLocation"]["uri"] == planted.as_uri()
    assert where["region"]["startLine"] == _def_line(planted, "_postprocess_replayssm_kernel")
    page = Path(f"{out}.html").read_text()
    assert "discrepancy in _postprocess_replayssm_kernel" in page and "<svg" in page and "num_committed" in page
