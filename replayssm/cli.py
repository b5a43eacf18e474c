"""``replayssm-verify``: ``prove`` the spec's obligations, ``fuzz`` an implementation against the spec,
``replay`` a saved failure or system trace, ``explain`` a system trace."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from replayssm.base import installation
from replayssm.base.host_faults import HostFault
from replayssm.base.reports import (
    EXIT_COVERAGE,
    EXIT_FINDING,
    EXIT_PASSED,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_USAGE,
    UsageError,
)
from replayssm.commands import explain, fuzz, prove, replay


def _subcommands() -> tuple:
    """The subcommand modules in ``--help``'s order (``review``'s lives in its package)."""
    from replayssm.review import command as review

    return prove, fuzz, replay, review, explain


def build_parser() -> argparse.ArgumentParser:
    """The parser: each subcommand's options come from its own module (``add_arguments``)."""
    parser = argparse.ArgumentParser(prog="replayssm-verify", description=__doc__, epilog=EXIT_CODES_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in _subcommands():
        p = sub.add_parser(command.NAME, help=command.HELP, description=command.HELP,
                           epilog=f"{command.OUTPUTS}\n\n{EXIT_CODES_HELP}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


EXIT_CODES_HELP = f"""exit status:
  {EXIT_PASSED}  passed
  {EXIT_FINDING}  a finding (failed obligation, discrepancy, broken invariant)
  {EXIT_USAGE}  bad usage or set-up (reported before any work)
  {EXIT_COVERAGE}  no finding, but a scenario class was never reached
  {EXIT_SIGINT}/{EXIT_SIGTERM}  interrupted by SIGINT/SIGTERM (partial results written)"""


def version() -> str:
    """The installed package's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("replayssm-verify")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        installation.remember(getattr(args, "device", None))  # before any target runs: checked before a verdict
        status = args.run(args)
        if installation.changed():  # a target wrote the tool's files (outside the sandbox): its finding
            installation.say(installation.changed())
            return EXIT_FINDING
        return status
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except HostFault as e:  # the harness failed in a target's process: a set-up error, never the target's finding
        print(f"error: set-up: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader left (`prove --list | head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
