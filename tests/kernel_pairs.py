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


def page_file(folder: Path, name: str, change: tuple[str, str] | None = None, *more: tuple[str, str]) -> Path:
    """The reference page's module as a file of its own, with ``change`` (and ``more``) planted."""
    text = module_source(corpus.reference_page().read_text())
    for c in (change, *more) if change is not None else ():
        assert text.count(c[0]) == 1, "the planted line must occur once in the reference page"
        text = text.replace(*c)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


def page_copy(folder: Path, name: str, change: tuple[str, str] | None = None, *more: tuple[str, str]) -> ModuleType:
    """:func:`page_file`, loaded."""
    return load_source(page_file(folder, name, change, *more), name)


PLAN_START_PLUS_ONE = ("tl.store(plan_ring_start + batch_idx, next_start, mask=writes_plan)",
                       "tl.store(plan_ring_start + batch_idx, next_start + 1, mask=writes_plan)")
"""A planted line: a decode row that publishes a prefix writes its plan's ring start one row late."""

COMMITTED_PLUS_ONE = ("next_committed = tl.where(checkpointed, accepted, old_committed + accepted)",
                      "next_committed = tl.where(checkpointed, accepted, old_committed + accepted + 1)")
"""A planted line, independent of :data:`PLAN_START_PLUS_ONE`: a decode step
that does not checkpoint commits one row too many."""
