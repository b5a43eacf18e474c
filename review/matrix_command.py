"""``review HEAD --matrix [N]`` and ``review --vllm PATH --matrix [N]``: the hazard matrix of one version.

Checks the options first (exit 2 naming the one that cannot be: more than one
HEAD, ``--base``, ``--repo``, ``--junit``, ``--sarif``, N < 1), loads the
version (a worker-side file as ``review`` loads it, or a vLLM as ``--vllm``
finds it), fills its matrix (:mod:`.matrix_corpus`, :mod:`.matrix_release`),
prints it (:func:`.matrix.text`; ``--wide`` for each cell's full detail) and
writes ``--json`` (schema :data:`.matrix.SCHEMA`), ``--markdown`` and
``--html``. Exit 0 when every configuration vLLM accepts passes, 1 when one
has a finding or a latent reliance, 3 when none has but one's evidence did not
finish (a coverage shortfall, as ``review`` says it) or when vLLM accepts none
(nothing judged), 2 for bad input, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from replayssm.base.escape import one_line
from replayssm.base.interrupts import Interrupted, interruptible, stop_children
from replayssm.base.reports import (
    EXIT_COVERAGE, EXIT_FINDING, EXIT_PASSED, EXIT_USAGE, STDOUT, check_distinct_outputs, check_output_file,
    check_output_folder, write_json, write_reports, write_text,
)

from .matrix import PASS, SCHEMA, SHORTFALL, Matrix, markdown, text

DEFAULT = -1
"""``--matrix`` given without N: each kind of version's own default (:data:`.matrix_corpus.EXAMPLES`
examples per campaign; for a released vLLM, ``release_review.DEFAULT_PASSES`` forward passes)."""

REFUSED_OPTIONS = ("base", "repo", "pr_head", "base_ref", "head_ref", "junit", "sarif", "report_url")
"""``review`` options ``--matrix`` does not take."""


class Misbehaved(Exception):
    """The version misbehaved at import (in its own process): a finding, and no matrix to fill."""


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why ``args`` cannot be a matrix run (None: they can)."""
    given = [f"--{o.replace('pr_', '').replace('_', '-')}" for o in REFUSED_OPTIONS if getattr(args, o, None)]
    if given:
        return f"--matrix does not take {', '.join(given)} (it reviews one version per configuration)"
    if args.matrix != DEFAULT and args.matrix < 1:
        return f"--matrix N: N (examples per campaign of each configuration) must be >= 1, got {args.matrix}"
    if args.vllm is None and len(args.head) != 1:
        return f"--matrix reviews one version: give one HEAD or --vllm PATH (got {len(args.head)} HEAD)"
    if args.vllm is not None and args.head:
        return "--matrix with --vllm: give no HEAD besides it"
    return None


def run_matrix(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The ``--matrix`` run (see the module docstring); returns the exit status."""
    problem = usage_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    check_output_file(args.json, "--json", stdout_ok=True)
    check_output_file(args.markdown, "--markdown")
    check_output_file(args.html, "--html")
    check_distinct_outputs({"--json": args.json, "--markdown": args.markdown, "--html": args.html})
    check_output_folder(args.traces, "--traces")
    out = out or (sys.stderr if args.json == STDOUT else sys.stdout)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    traces = Path(args.traces)
    with interruptible():
        try:
            matrix = _matrix(args, traces, out)
        except Misbehaved as e:
            print(f"{e}\nthe version misbehaved at import: a finding in every configuration", file=out, flush=True)
            return EXIT_FINDING
        except Interrupted as e:
            workers = stop_children()
            print(f"{e}: the matrix stopped" + (f", {workers} worker process(es) ended" if workers else "")
                  + "; nothing written", file=out, flush=True)
            return e.status
    if matrix is None:
        return EXIT_USAGE
    print(text(matrix, wide=args.wide), file=out, flush=True)
    written = write_reports([
        ("--json", args.json, lambda: write_json(args.json, SCHEMA, matrix.document())),
        ("--markdown", args.markdown, lambda: write_text(args.markdown, markdown(matrix))),
        ("--html", args.html, lambda: _write_html(args.html, matrix)),
    ], "the matrix above")
    if not written:
        return EXIT_USAGE
    return exit_status(matrix)


def exit_status(matrix: Matrix) -> int:
    """The exit status of a filled matrix (see the module docstring)."""
    return {PASS: EXIT_PASSED, SHORTFALL: EXIT_COVERAGE}.get(matrix.status, EXIT_FINDING)


def _write_html(path: str, matrix: Matrix) -> None:
    from replayssm.base.html_report import write_html
    from replayssm.base.html_matrix import matrix_page

    write_html(path, matrix_page(matrix.document()))


def _matrix(args: argparse.Namespace, traces: Path, out: TextIO) -> Matrix | None:
    """Load the version and fill its matrix (None: bad input, said on standard error)."""
    if args.vllm is not None:
        from .release_review import DEFAULT_PASSES
        from .vllm_locator import P, LocateError, locate

        try:
            located = locate(args.vllm)
        except LocateError as e:
            print(f"error: {e}", file=sys.stderr)
            return None
        print(f"found {one_line(located.describe())}", file=out, flush=True)
        if located.generation == P:
            from .matrix_release import release_matrix

            passes = DEFAULT_PASSES if args.matrix == DEFAULT else args.matrix
            return release_matrix(located, args, passes, traces, out)
        args.head = [str(located.file)]
    from replayssm.base.targets import TargetError

    from .command import Faulted, _load
    from .host_modes import describe, version_publishing_modes
    from .matrix_corpus import EXAMPLES, corpus_matrix

    try:
        versions, _ = _load(args)
    except TargetError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    v = versions[0]
    if isinstance(v, Faulted):  # its finding, and nothing to run: every configuration imports it
        raise Misbehaved(f"{one_line(v.label)} ({one_line(v.source)}): {v.fault.report()}")
    examples = EXAMPLES if args.matrix == DEFAULT else args.matrix
    print(f"matrix of {one_line(v.label)} ({one_line(v.source)}): API {v.api.name}, {examples} examples per campaign; "
          f"{describe(version_publishing_modes(v.source))}", file=out, flush=True)
    return corpus_matrix(v, args, examples, traces, out)
