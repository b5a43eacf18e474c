"""Tables a person reads in a terminal: within :data:`WIDTH` columns, each cell wrapped in its column.

:func:`layout` sets rows of cells (the first row the header) in columns
whose widths add up to at most ``width``: a column wider than its share
is narrowed (the widest first, never below its header's longest word or its
``floor``) and its cells wrap at ``, `` / ``; `` / spaces onto the row's
next lines, so a row may take several lines but no line is longer than
``width``. A header is never wrapped when its column can hold it whole
(``floor`` = its length). ``review``'s verdict table uses it
(``review/verdicts.py``); ``--wide`` prints the unwrapped table instead.
"""

from __future__ import annotations

import textwrap

WIDTH = 120
"""The terminal width the tables fit by default."""

GAP = "  "


def _natural(rows: list[list[str]], i: int) -> int:
    return max(len(r[i]) for r in rows)


def widths(rows: list[list[str]], width: int = WIDTH, floors: dict[int, int] | None = None) -> list[int]:
    """Each column's width: its longest cell, narrowed widest-first until the row fits ``width``
    (a column never below its ``floors`` entry, its header's longest word, or 3)."""
    n = len(rows[0])
    out = [_natural(rows, i) for i in range(n)]
    low = [max(3, max((len(w) for w in rows[0][i].split()), default=0), (floors or {}).get(i, 0)) for i in range(n)]
    budget = width - len(GAP) * (n - 1)
    while sum(out) > budget:
        shrinkable = [i for i in range(n) if out[i] > low[i]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda k: out[k] - low[k])
        out[i] = max(low[i], out[i] - (sum(out) - budget))
    return out


def _wrap(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def layout(rows: list[list[str]], width: int = WIDTH, floors: dict[int, int] | None = None) -> list[str]:
    """The table's lines (see the module docstring); trailing spaces stripped."""
    ws = widths(rows, width, floors)
    lines = []
    for row in rows:
        cells = [_wrap(c, w) for c, w in zip(row, ws)]
        for k in range(max(len(c) for c in cells)):
            lines.append(GAP.join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, ws)).rstrip())
    return lines


def wrapped(text: str, width: int = WIDTH, indent: str = "  ") -> list[str]:
    """``text`` as lines of at most ``width`` columns, the later ones indented by ``indent`` more; a word
    longer than a line (a trace's path, a command) stays whole on a line of its own, to be copied."""
    return textwrap.wrap(text, width, subsequent_indent=indent + "  ", initial_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent]
