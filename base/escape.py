"""Text from outside the judge made safe to show: a target's messages, file names.

A target's exception message, what it printed, or a file name may hold a
terminal's escape sequences (``ESC``), a NUL, a carriage return that
overprints a line, characters XML 1.0 cannot hold (a JUnit file that no
longer parses) or, in a file name, a newline that starts a forged row of a
table. A line or paragraph separator (U+2028, U+2029) starts a new line
too where text is split into lines (Python's ``splitlines``, editors, some
terminals), and a bidirectional override or isolate (U+202A-U+202E,
U+2066-U+2069, and the marks U+200E, U+200F, U+061C) shows the characters
after it in another order than they are read ("Trojan Source"): a name
``x\\u202e.py`` is shown as something else. :func:`printable` writes each such
character as a visible ``\\xNN`` (``\\uNNNN`` beyond; a byte of a file name that
is not UTF-8, which Python keeps as a lone surrogate, as the ``\\xNN`` of that
byte); :func:`one_line` writes newlines and tabs so too, for one cell or one
line. Both serve every place that shows such text: the terminal, tables, the
JUnit file, and what the HTML pages show of the JSON.
"""

from __future__ import annotations

import re

_SHOWN_OTHERWISE = "\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
"""Beyond the C0 and C1 controls: the marks, separators and overrides that
move or split what is shown, lone surrogates, and the two non-characters."""
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_SHOWN_OTHERWISE}]")
_CONTROL_AND_LINES = re.compile(f"[\x00-\x1f\x7f-\x9f{_SHOWN_OTHERWISE}]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab, every
    line or paragraph separator, bidirectional override, isolate or mark
    (and every lone surrogate) written as a visible escape: safe on a
    terminal and in XML, shown in the order it is read."""
    return _CONTROL.sub(_visible, text)


def one_line(text: str) -> str:
    """:func:`printable`, newlines and tabs escaped too: one table cell, one line."""
    return _CONTROL_AND_LINES.sub(_visible, text)
