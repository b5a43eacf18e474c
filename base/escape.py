"""Text from outside the judge made safe to show: a target's messages, file names.

A target's exception message, what it printed, or a file name may hold a
terminal's escape sequences (``ESC``), a NUL, a carriage return that
overprints a line, characters XML 1.0 cannot hold (a JUnit file that no
longer parses) or, in a file name, a newline that starts a forged row of a
table. :func:`printable` writes each such character as a visible ``\\xNN``
(``\\uNNNN`` beyond; a byte of a file name that is not UTF-8, which Python
keeps as a lone surrogate, as the ``\\xNN`` of that byte); :func:`one_line`
writes newlines and tabs so too, for one cell or one line.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_CONTROL_AND_LINES = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab (and every
    lone surrogate) written as a visible escape: safe on a terminal and in XML."""
    return _CONTROL.sub(_visible, text)


def one_line(text: str) -> str:
    """:func:`printable`, newlines and tabs escaped too: one table cell, one line."""
    return _CONTROL_AND_LINES.sub(_visible, text)
