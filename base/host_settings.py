"""The user's environment settings that the target's process reads, checked before any work.

A target host inherits the judging process's environment (:mod:`.isolation`),
so a setting there that is the user's, not the target's, decides how the
target's kernels run. One that contradicts the command is a set-up error
(exit 2, naming the setting and what to do), never a finding against the
target's code, and is caught before any work:

* ``$TRITON_INTERPRET`` with ``--device cpu``: the kernels run there under
  Triton's interpreter only; any other value (``0``: compile for a GPU)
  asks Triton for a GPU a CPU run has not got (on 1d5a1d0 fuzz and review
  reported correct kernels' failure to compile as their finding; since then
  the hosts silently overrode it, running something other than what the
  user asked for);
* ``$REPLAYSSM_TARGET_LOAD_SECONDS``: the load watchdog, a number of seconds
  > 0 (``nan`` would turn it off);
* ``$REPLAYSSM_SANDBOX``: ``auto``, ``require`` or ``off`` (:mod:`.sandbox`).

The rest of what a host reads from the environment is set by the judge
for it (``REPLAYSSM_TARGET_DEVICE``, ``PYTHONPATH``, ``TMPDIR``,
``PYTHONUNBUFFERED``), or changes nothing a verdict reads (Triton's
compiler settings, ``PYTHONWARNINGS``, ``PYTHONOPTIMIZE``: a fuzz campaign
of our kernels passes with each).
"""

from __future__ import annotations

import os

from . import sandbox
from .host_faults import HostFault
from .reports import UsageError

INTERPRET = "TRITON_INTERPRET"
"""Triton's switch between its interpreter (``1``) and its compiler."""


def check(device: str) -> None:
    """A :class:`~.reports.UsageError` (exit 2) naming the first setting of
    the environment that contradicts a run of the target's kernels on
    ``device`` (``cpu`` or ``cuda``), and what to do about it."""
    interpret = os.environ.get(INTERPRET)
    if device == "cpu" and interpret not in (None, "1"):
        raise UsageError(f"${INTERPRET}={interpret!r} asks Triton to compile the kernels for a GPU, but --device cpu "
                         f"runs them under Triton's interpreter: unset {INTERPRET} (or set it to 1), or run with "
                         "--device cuda on a machine with a GPU")
    from .isolation import load_seconds

    try:
        load_seconds()
        sandbox.setting()
    except (ValueError, HostFault) as e:
        raise UsageError(str(e)) from None
