"""``replayssm-verify replay``: re-run a saved trace file against an implementation, by its kind
(``base.traces.load_trace``): a fuzz failure or a system trace through the fuzzer's replay, a review
trace on its versions, a kernel-proof trace on the real kernel."""

from __future__ import annotations

import argparse
import sys

from replayssm.base.escape import one_line
from replayssm.base.interrupts import Interrupted
from replayssm.base.reports import EXIT_FINDING, EXIT_PASSED, EXIT_USAGE, replay_command
from replayssm.base.targets import DEFAULT_TARGET

from . import DEVICES, interpreter_for, seconds

NAME = "replay"
HELP = "re-run a saved trace against an implementation"
OUTPUTS = """outputs:
  each step and whether the failure is reproduced, on standard output; nothing is written"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a trace this tool wrote: a fuzz failure, a system trace, a review trace "
                        "or a kernel-proof trace (*.kernel-trace.json)")
    parser.add_argument("--impl", metavar="MODULE_OR_FILE", help="the implementation to run (default: "
                        "replayssm.impl.replayssm_utils; the trace's #meta.impl only with --recorded)")
    parser.add_argument("--recorded", action="store_true",
                        help="run the code the trace names (its #meta.impl, a review trace's versions, a release "
                        "trace's file) where --impl names none: a trace from elsewhere can name any module")
    parser.add_argument("--device", choices=DEVICES, help="default: the trace's #meta.device, else cpu")
    parser.add_argument("--level", choices=["kernel", "context"], help="default: the trace's #meta.level, else kernel")
    parser.add_argument("--watchdog", type=seconds, metavar="SECONDS",
                        help="a launch running longer is a reproduced hang (default: the ci profile's for the device)")


OURS = (DEFAULT_TARGET, "replayssm.impl")
"""The tool's own implementation (the second, as traces saved before it was named in full): run unasked."""


def recorded_targets(kind: str, trace: dict, impl: str | None) -> list[str]:
    """The code a replay of ``trace`` (of ``kind``) would run that the trace
    names and ``--impl`` (``impl``) does not: a fuzz launch or kernel trace's
    ``#meta.impl``, a review trace's versions (``--impl`` stands for the
    last), a release trace's ``file``; the tool's own implementation aside."""
    meta = trace.get("#meta", {})
    if kind == "review":
        versions = meta.get("versions", [])
        named = versions[:-1] if impl else versions
        return [str(v[1]) for v in named if isinstance(v, list) and len(v) > 1 and v[1] not in OURS]
    if kind == "release":
        return [] if impl or not trace.get("file") else [str(trace["file"])]
    recorded = meta.get("impl") if kind in ("launch", "kernel") else None  # a system trace's is not read
    return [] if impl or not recorded or recorded in OURS else [str(recorded)]


def run(args: argparse.Namespace) -> int:
    from replayssm.base.traces import load_trace

    try:
        loaded = load_trace(args.file)
    except (ValueError, OSError) as e:
        print(f"error: cannot replay {args.file}: {e}", file=sys.stderr)
        return EXIT_USAGE
    unnamed = recorded_targets(loaded.kind, loaded.trace, args.impl)
    if unnamed and not args.recorded:
        how = f"give it with --impl ({replay_command(args.file, unnamed[0])}) or " if len(unnamed) == 1 else ""
        print(f"error: cannot replay {one_line(args.file)}: the trace names the code it would run "
              f"({', '.join(repr(one_line(t)) for t in unnamed)}), and replay runs only code you name: {how}"
              f"confirm the trace's with --recorded", file=sys.stderr)
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
