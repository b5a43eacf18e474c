"""``replayssm-verify explain``: a trace file drawn step by step (a system trace, a fuzz failure or
a system trace's launches, a prove counterexample file), read once with ``base.traces.load_trace``."""

from __future__ import annotations

import argparse
import sys

from replayssm.base.reports import EXIT_PASSED, EXIT_USAGE, replay_command

from . import interpreter_for

NAME = "explain"
HELP = ("print a trace step by step with ring diagrams: a system trace, a fuzz "
          "failure, a prove counterexample file or a kernel-proof trace (review's *.kernel-trace.json)")
OUTPUTS = """outputs:
  the drawing on standard output; nothing is written and no kernel runs (replay runs them)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a trace this tool wrote (a review trace is named with its replay command)")


def run(args: argparse.Namespace) -> int:
    from replayssm.base.traces import load_trace
    from replayssm.verify.kernel_trace_explain import explain_kernel_trace, is_named_launch_trace
    from replayssm.verify.launch_explain import explain_launches
    from replayssm.verify.traces import explain, explain_counterexample

    try:
        kind, document = load_trace(args.file)
        if kind == "counterexample":
            text = explain_counterexample(document)
        elif kind == "kernel" and is_named_launch_trace(document):  # a vLLM version's kernel (review)
            text = explain_kernel_trace(document, args.file)
        elif kind in ("launch", "kernel"):
            if "states" not in document:  # a system trace's launches: the spec computes the states
                interpreter_for("cpu")
                from replayssm.fuzz.launch_traces import spec_states

                document["states"] = spec_states(document)
            text = explain_launches(document)
        elif kind == "system":
            text = explain(document)
        elif kind == "release":  # review --vllm: a released vLLM's ring trackers
            from replayssm.review.release_explain import explain_release

            text = explain_release(document)
        else:
            raise ValueError(f"a {kind} trace is not drawn by explain (it draws system and launch traces and prove "
                             f"counterexamples); run it with: {replay_command(args.file)}")
    except (OSError, ValueError) as e:
        print(f"error: cannot explain {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    return EXIT_PASSED
