"""The subcommands of ``replayssm-verify``, one module each: its ``NAME``, its ``HELP`` line, its
options (``add_arguments(parser)``) beside the code that runs it (``run(args) -> exit status``);
``replayssm.cli`` only assembles them, with each module's ``OUTPUTS`` (what it writes, and where)
and the exit codes as its ``--help``'s closing text. ``review``'s module is ``replayssm.review.command``.

Shared here: the argparse type of a number of seconds, and the Triton mode a device asks for."""

from __future__ import annotations

import argparse
import os

DEVICES = ("cpu", "cuda")
"""The ``--device`` choices of ``fuzz`` and ``replay``."""


def interpreter_for(device: str) -> None:
    """Triton chooses interpreter or compiler when it is imported: on cpu, the
    interpreter; and the fork server of the target hosts starts now, its
    imports beside the command's own (:func:`replayssm.base.fork_server.prepare`). The settings of
    the environment the target's process reads are checked first (:func:`replayssm.base.host_settings.check`:
    a :class:`~replayssm.base.reports.UsageError`, exit 2, for one that contradicts ``device``)."""
    from replayssm.base import host_settings

    host_settings.check(device)
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        from replayssm.base import fork_server

        fork_server.prepare()


def seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value
