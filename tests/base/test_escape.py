"""A name or message from outside the judge cannot start a line of its own
or reorder what is shown (``base/escape.py``, issue 39): the line and
paragraph separators (U+2028, U+2029) and the bidirectional overrides,
isolates and marks are written as visible escapes, like the control
characters, in the terminal, the verdict table, the JUnit file and the HTML
pages; ordinary text beyond ASCII is shown as it is."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from replayssm.base.escape import one_line, printable

SEPARATORS = ("\u2028", "\u2029")
BIDI = ("\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
        "\u200e", "\u200f", "\u061c")
"""Overrides and embeddings, isolates, and the marks (left-to-right, right-to-left, Arabic letter)."""


@pytest.mark.parametrize("char", SEPARATORS + BIDI, ids=lambda c: f"U+{ord(c):04X}")
def test_a_separator_or_bidirectional_control_is_written_as_its_escape(char: str) -> None:
    for escaped in (one_line(f"x{char}y"), printable(f"x{char}y")):
        assert escaped == f"x\\u{ord(char):04x}y" and len(escaped.splitlines()) == 1, ascii(escaped)


def test_text_beyond_ascii_that_moves_nothing_is_shown_as_it_is() -> None:
    """No false alarm: accents, CJK, right-to-left letters themselves and an
    emoji stay; the newline and tab stay in :func:`printable`."""
    text = "café 中文 שלום \U0001f600 x\u00a0y"
    assert one_line(text) == printable(text) == text
    assert printable("a\nb\tc") == "a\nb\tc" and one_line("a\nb\tc") == "a\\x0ab\\x09c"


def test_a_line_separator_in_a_file_name_cannot_forge_a_row_of_the_verdict_table(capsys) -> None:
    """``review`` of a file named ``x.py\\u2028B  A  1/1 held  pass``: the
    forged row is not a line of the table (a reader splitting lines, an editor,
    a CI log would show it as one), in the table and in its wide form."""
    from replayssm.review.verdict_parts import LifecycleResult, ReviewParts
    from replayssm.review.verdicts import build_verdict, print_table

    held = LifecycleResult({"request_steps": 100}, {"refinement": "held"}, (), (), 1.0)
    label = "x.py\u2028B  A  1/1 held  pass\u2029\u202egnissap"
    for wide in (False, True):
        print_table([build_verdict(label, label, "A", "gen A", ReviewParts(lifecycle=held))], None, wide=wide)
        printed = capsys.readouterr().out
        assert not any(c in printed for c in SEPARATORS + BIDI), ascii(printed)
        assert "x.py\\u2028B" in printed and "\\u202egnissap" in printed, printed
        assert not [line for line in printed.splitlines() if line.startswith("B ")], printed


def test_a_targets_message_and_name_in_the_junit_file_and_the_terminal_are_escaped() -> None:
    """A target's reason (what the terminal and the JSON show) and a case
    name in the JUnit file: no separator or override survives, the message
    attribute (the failure's first line) is the whole reason, the XML parses."""
    from replayssm.base.host_faults import TargetFault
    from replayssm.base.reports import JunitCase, junit_xml

    fault = TargetFault("exception", "import", "ValueError: bad\u2028PASSED: 0 findings\u202e")
    assert fault.reason == "ValueError: bad\\u2028PASSED: 0 findings\\u202e" and len(fault.report().splitlines()) == 1
    name = "evil\u2029\u2066.py"
    root = ET.fromstring(junit_xml(name, [JunitCase(name, 1.0, "first\u2028second\u202e"),
                                          JunitCase("ok", 1.0)]).encode())
    case = root.find(".//testcase[@name='evil\\u2029\\u2066.py']")
    assert case is not None, ET.tostring(root)
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == "first\\u2028second\\u202e"
    assert not any(c in ET.tostring(root, encoding="unicode") for c in SEPARATORS + BIDI)


def test_the_html_pages_show_a_name_in_the_order_it_is_read() -> None:
    """Every text the HTML pages show goes through ``html_report._e``: a
    right-to-left override in a file name is shown as its escape, not obeyed."""
    from replayssm.base.html_report import _e

    assert _e("evil\u202ecod.py<b>") == "evil\\u202ecod.py&lt;b&gt;"
    assert _e("x\u2028y\u2066") == "x\\u2028y\\u2066" and _e("café\n") == "café\n"
