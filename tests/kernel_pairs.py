"""Planted pairs for the kernel diff: a corpus version and a copy of it with
one changed line, made at test time (the corpus is read, never copied into
the repository; a test using them carries the ``corpus`` marker)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from replayssm.base.reference_page import module_source
from replayssm.base.targets import load_source
from replayssm.spec import corpus

ONLY_FRESH = ("changed = valid_dst & (~valid_src | (src_slot != dst_slot))", "changed = valid_dst & ~valid_src")
"""The planted line: the reference's reset kernel zeroes fresh destinations
only and no longer copies the trackers of a moved live slot (generation A's
behaviour)."""


def page_file(folder: Path, name: str, change: tuple[str, str] | None = None) -> Path:
    """The reference page's module as a file of its own, with ``change`` planted."""
    text = module_source(corpus.reference_page().read_text())
    if change is not None:
        assert text.count(change[0]) == 1, "the planted line must occur once in the reference page"
        text = text.replace(*change)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


def page_copy(folder: Path, name: str, change: tuple[str, str] | None = None) -> ModuleType:
    """:func:`page_file`, loaded."""
    return load_source(page_file(folder, name, change), name)
