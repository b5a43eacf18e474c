"""The suite does not depend on how it was started: a pytest run begun with SIGINT ignored (``nohup ... &``
from a non-interactive shell) passes its signal tests as one begun from a terminal (``tests/conftest.py``
gives SIGINT Python's default handler back). Before, such a run failed every test that sends itself SIGINT
or checks the handler a command leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORED = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
           "os.execv(sys.executable, [sys.executable, '-m', 'pytest', *sys.argv[1:]])")


def test_a_run_started_with_sigint_ignored_passes_the_signal_tests() -> None:
    # The child runs one test that reads no corpus: it is not a CI run (with CI=true it would require the
    # corpus, which this unmarked test's setting hides).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"}
    done = subprocess.run(
        [sys.executable, "-c", IGNORED, "-q", "-p", "no:cacheprovider", "-k", "without_a_signal",
         "tests/base/test_interrupts.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # nor in this run
