"""Print the CI fuzz campaign's statistics in pytest's terminal summary."""

from __future__ import annotations

import io

import pytest

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
