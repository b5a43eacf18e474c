"""``replayssm-verify replay``: re-run a saved trace file against an implementation, by its kind
(``base.traces.load_trace``): a fuzz failure or a system trace through the fuzzer's replay, a review
trace on its versions, a kernel-proof trace on the real kernel."""

from __future__ import annotations

import argparse
import sys

from replayssm.base.interrupts import Interrupted
from replayssm.base.reports import EXIT_FINDING, EXIT_PASSED, EXIT_USAGE

from . import DEVICES, interpreter_for, seconds

NAME = "replay"
HELP = "re-run a saved trace against an implementation"
OUTPUTS = """outputs:
  each step and whether the failure is reproduced, on standard output; nothing is written"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a trace this tool wrote: a fuzz failure, a system trace, a review trace "
                        "or a kernel-proof trace (*.kernel-trace.json)")
    parser.add_argument("--impl", metavar="MODULE_OR_FILE", help="default: the trace's #meta.impl, else "
                        "replayssm.impl.replayssm_utils")
    parser.add_argument("--device", choices=DEVICES, help="default: the trace's #meta.device, else cpu")
    parser.add_argument("--level", choices=["kernel", "context"], help="default: the trace's #meta.level, else kernel")
    parser.add_argument("--watchdog", type=seconds, metavar="SECONDS",
                        help="a launch running longer is a reproduced hang (default: the ci profile's for the device)")


def run(args: argparse.Namespace) -> int:
    from replayssm.base.traces import load_trace

    try:
        loaded = load_trace(args.file)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    recorded = loaded.trace.get("#meta", {}).get("device")
    # Triton picks interpreter or compiler when it is imported: before the replay modules are
    interpreter_for(args.device or (recorded if recorded in ("cpu", "cuda") else "cpu"))
    if loaded.kind == "review":
        from replayssm.review.command import replay_trace

        return replay_trace(args, loaded.trace)
    if loaded.kind == "release":
        from replayssm.review.release_review import replay_release

        return replay_release(args, loaded.trace)
    from replayssm.fuzz.replay import replay
    from replayssm.verify.kernels.playback import replay_kernel_trace

    try:
        if loaded.kind == "kernel":
            from replayssm.verify.kernels.generation_roles import every_role

            ok, report = replay_kernel_trace(loaded.trace, args.impl, args.device or "cpu", every_role(),
                                             args.watchdog)
        else:
            ok, report = replay(args.file, args.impl, args.device, args.level, args.watchdog, loaded=loaded)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as e:
        print(f"replay {e}", file=sys.stderr)
        return e.status
    print(report)
    return EXIT_PASSED if ok else EXIT_FINDING
