"""The fuzz tests' fixtures: planted bugs in a copy of the implementation, and
the CI fuzz campaign's statistics in pytest's terminal summary."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_REPORTS: list[str] = []


@pytest.fixture()
def campaign_report():
    """A stream whose contents end up in the terminal summary."""
    stream = io.StringIO()
    yield stream
    _REPORTS.append(stream.getvalue())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for report in _REPORTS:
        terminalreporter.write_sep("-", "fuzz campaign")
        terminalreporter.write(report)


@pytest.fixture()
def mutant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Plant a bug: ``make(old, new)`` copies ``replayssm.impl`` into a
    temporary package, replaces the one occurrence of ``old`` in its
    ``kernels.py`` with ``new`` and returns the module name to fuzz."""

    def make(old: str, new: str) -> str:
        package = tmp_path / "mutant_impl"
        shutil.copytree(REPO / "impl", package)
        kernels = package / "kernels.py"
        source = kernels.read_text()
        assert source.count(old) == 1, f"planted bug anchor {old!r} not found exactly once"
        kernels.write_text(source.replace(old, new))
        monkeypatch.syspath_prepend(str(tmp_path))
        for name in list(sys.modules):
            if name.startswith("mutant_impl"):
                del sys.modules[name]
        return "mutant_impl.replayssm_utils"

    return make
