"""``prove --sarif/--html`` and ``fuzz --sarif/--html``: the command's JSON
document, each finding located at a source line, written as SARIF
(:mod:`replayssm.base.sarif`) and as an HTML page with each finding's trace drawn
(:mod:`replayssm.base.html_report`). ``review`` writes its own (``review/verdicts.py``).
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

from replayssm.base.html_report import fuzz_html, prove_html, write_html
from replayssm.base.reports import check_output_file, replay_command, tool_command
from replayssm.base.sarif import fuzz_issues, fuzz_located, prove_issues, prove_located, write_sarif

OPTIONS = (("--sarif", "write SARIF 2.1.0 for code scanning: each finding at the source line it names"),
           ("--html", "write one self-contained HTML page: the results, each finding with its trace drawn as "
                      "ring diagrams, the assumptions with their provenance"))


def add_options(p: argparse.ArgumentParser) -> None:
    """``--sarif FILE`` and ``--html FILE``."""
    for option, text in OPTIONS:
        p.add_argument(option, metavar="FILE", help=text)


def check_options(args: argparse.Namespace) -> None:
    """Both paths writable (:class:`~replayssm.base.reports.UsageError` naming the option), before any work."""
    check_output_file(args.sarif, "--sarif")
    check_output_file(args.html, "--html")


def declared_in(name: str) -> tuple[str, int] | None:
    """The file and ``def`` line of the function that declares obligation ``name``."""
    from replayssm.verify.obligation import REGISTRY

    ob = REGISTRY.get(name)
    if ob is None:
        return None
    build = inspect.unwrap(ob.build)
    try:
        return inspect.getsourcefile(build) or "", inspect.getsourcelines(build)[1]
    except (OSError, TypeError):
        return None


def _prove_document(report: dict, saved: list[str], impl: str | None) -> tuple[dict, dict[str, dict]]:
    """The located report, each failure with its replay command, and the
    timelines of the system traces its saved counterexamples point to (by obligation)."""
    from replayssm.base.traces import read_json
    from replayssm.verify.traces import timeline

    located = prove_located(report, impl, declared_in)
    timelines, commands = {}, {}
    for path in saved:
        scenario = json.loads(Path(path).read_text())
        name = scenario.get("obligation")
        kernel_trace = Path(path).with_name(f"{name}.kernel-trace.json")
        commands[name] = (replay_command(str(kernel_trace), impl) if kernel_trace.is_file()
                          else tool_command("explain", path))
        if scenario.get("trace_file"):
            try:
                timelines[name] = timeline(read_json(scenario["trace_file"]))
            except (OSError, ValueError):
                pass  # the page then shows the failure without its run
    located["obligations"] = [{**r, "replay": commands[r["name"]]} if r["name"] in commands else r
                              for r in located["obligations"]]
    return located, timelines


def prove_reports(args: argparse.Namespace, report: dict, saved: list[str]) -> list[tuple]:
    """The ``write_reports`` entries of ``prove --sarif`` and ``--html``
    (``report``: the ``--json`` document; ``saved``: the counterexample files)."""
    def document() -> tuple[dict, dict]:
        return _prove_document(report, saved, args.impl)

    return [("--sarif", args.sarif, lambda: write_sarif(args.sarif, prove_issues(document()[0]))),
            ("--html", args.html, lambda: write_html(args.html, prove_html(*document())))]


def _fuzz_timelines(summary: dict) -> dict[str, dict]:
    """Each finding's launch trace, with the spec's states where the trace has none (by trace path)."""
    from replayssm.fuzz.launch_traces import spec_states

    out = {}
    for f in summary.get("findings", []):
        path = f.get("trace")
        if not path or not Path(path).is_file():
            continue
        trace = json.loads(Path(path).read_text())
        if "states" not in trace:
            try:
                trace["states"] = spec_states(trace)
            except (ValueError, KeyError):
                continue
        out[path] = trace
    return out


def fuzz_reports(args: argparse.Namespace, summary: dict) -> list[tuple]:
    """The ``write_reports`` entries of ``fuzz --sarif`` and ``--html`` (``summary``: the JSON summary)."""
    return [("--sarif", args.sarif, lambda: write_sarif(args.sarif, fuzz_issues(fuzz_located(summary)))),
            ("--html", args.html, lambda: write_html(args.html, fuzz_html(fuzz_located(summary),
                                                                          _fuzz_timelines(summary))))]
