"""Which kernel line wrote each cell: a launch's stores, recorded in the target's process, read here.

The HTML report's lifecycle (``review/timeline.py``) names, for each tracker
cell a step wrote, the source line of the store that wrote it. The target's
code never runs in the judging process, so the record is made where it runs:

- in the target's process, :func:`recorded_stores` (entered around one launch
  through :meth:`~replayssm.base.isolation.TargetHost.launch`'s ``watch``, as
  playback's watch is) wraps Triton's interpreter's masked store
  (``TRITON_INTERPRET=1``, the CPU host) and, for each store whose lanes land
  in the judge's state arena, sends back the kernel frame's file, line and
  function (the innermost frame outside Triton and this module: the
  ``tl.store`` statement, in a ``@triton.jit`` helper too) and the arena words
  written with their values, as plain data. A GPU launch runs no interpreter:
  it records nothing, and the report names no line.
- here, :class:`StoreLog` maps each word back to its cell
  (``ring_start.g0[48]``: past the tracker array is the guards' poison slot)
  and keeps each cell's last writer in the step; the line's text is read here,
  from the version's own source file (a file the target names that is not the
  version's is shown by name and line, without its text). Cells the caller
  writes (the scheduler's block copy, :meth:`StoreLog.host`) are ``host``.

A lifecycle finding is reported at the store that wrote the cell it breaks
(:meth:`StoreLog.first_stored`, on one replay of its saved trace:
``review/campaign.py``'s ``broken_store``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from triton.runtime.interpreter import TensorHandle

    from replayssm.base.isolation import ImportRef
    from replayssm.fuzz.guards import Arena, Region


def _kernel_frame(skip: tuple[str, ...]) -> tuple[str, int, str] | None:
    """The innermost caller frame outside the files under ``skip``: the kernel's statement."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(skip) and name != __file__:
            return name, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


@contextmanager
def recorded_stores(regions: list[list[int]], relocate: Callable[[int], int]) -> Iterator[dict]:
    """In the target's process, around one launch: every masked-on lane of the
    interpreter's stores that lands in one of ``regions`` (the judge's ``[start,
    end, element size]`` byte ranges, moved here by ``relocate``), grouped per
    store as ``{"file", "line", "function", "cells": [[region, element, value], ...]}``
    in the yielded dict's ``"stores"`` (plain data)."""
    import triton
    from triton.runtime import interpreter as interp

    builder = interp.interpreter_builder
    skip = (str(Path(triton.__file__).parent),)
    here = [(relocate(start), relocate(start) + end - start, size) for start, end, size in regions]
    stores: list[dict] = []
    original = builder.create_masked_store

    def note(ptrs: TensorHandle, value: TensorHandle, mask: TensorHandle) -> None:
        shape = np.asarray(ptrs.data).shape
        addresses = np.asarray(ptrs.data).reshape(-1).astype(np.int64)
        on = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape).reshape(-1)
        values = np.broadcast_to(np.asarray(value.data), shape).reshape(-1)
        cells = []
        for r, (lo, hi, size) in enumerate(here):
            lanes = np.nonzero(on & (addresses >= lo) & (addresses < hi))[0]
            cells += [[r, int((addresses[lane] - lo) // size), values[lane].item()] for lane in lanes]
        if cells:
            where = _kernel_frame(skip)
            if where is not None:
                stores.append({"file": where[0], "line": where[1], "function": where[2], "cells": cells})

    def store(ptrs: TensorHandle, value: TensorHandle, mask: TensorHandle, *rest: object) -> Any:
        try:
            note(ptrs, value, mask)
        except Exception:  # noqa: BLE001 - the record is for the page: a store it cannot read stays unnamed,
            pass  # never a fault of the launch (which would read as the target's)
        return original(ptrs, value, mask, *rest)

    found: dict = {}
    builder.create_masked_store = store
    try:
        yield found
    finally:
        del builder.create_masked_store
        found["stores"] = stores


def _cell(region: Region, word: int) -> str:
    """``name[index]`` of an arena word (a tracker word just past its array: the poison slot's)."""
    return region.describe(word)[0]


def statement(lines: list[str], line: int, most: int = 8) -> str | None:
    """The statement that starts at 1-based ``line`` of ``lines`` on one line: its lines while brackets
    stay open (at most ``most``), joined (``tl.store(dst_slots + o, v)`` from a store written over four)."""
    if not 0 < line <= len(lines):
        return None
    parts, depth = [], 0
    for text in lines[line - 1:line - 1 + most]:
        code = text.split("#", 1)[0].strip()
        parts.append(code)
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth <= 0:
            break
    joined = re.sub(r"([(\[{])\s+", r"\1", " ".join(p for p in parts if p))
    return re.sub(r",?\s*([)\]}])", r"\1", joined)


class StoreLog:
    """The cells of a harness's state arena that the step's launches and its
    caller wrote, each with its last writer: ``{"file", "line", "text",
    "function", "kernel"}`` for a kernel's store, ``{"host": what}`` for the caller's."""

    def __init__(self, arena: Arena, source: str) -> None:
        self.arena, self.source = arena, Path(source)
        self.writers: dict[str, dict[str, Any]] = {}
        self._lines: list[str] | None = None

    def watch(self) -> ImportRef:
        """The watch a launch is run under (:func:`recorded_stores` over this arena)."""
        from replayssm.base.isolation import ImportRef

        return ImportRef(f"{__name__}:recorded_stores", (self._regions(),))

    def _regions(self) -> list[list[int]]:
        if self.arena.flat is not None:
            flat = self.arena.flat
            return [[flat.data_ptr(), flat.data_ptr() + flat.numel() * 4, 4]]
        return [[t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(), t.element_size()]
                for t in self.arena.plain.values()]

    def _name(self, region: int, element: int) -> str | None:
        """The cell a recorded (region, element) names, None when it names none."""
        if self.arena.flat is None:
            names = list(self.arena.plain)
            return f"{names[region]}[{element}]" if 0 <= region < len(names) else None
        near = [r for r in self.arena.regions.values() if r.start - 16 <= element < r.start + r.words + 16]
        if not near:
            return None
        inside = [r for r in near if r.start <= element < r.start + r.words]
        return _cell((inside or sorted(near, key=lambda r: abs(element - r.start)))[0], element)

    def _text(self, file: str, line: int) -> str | None:
        """Line ``line`` of the version's own source, when ``file`` is it."""
        try:
            if Path(file).resolve() != self.source.resolve():
                return None
            if self._lines is None:
                self._lines = self.source.read_text().splitlines()
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        return statement(self._lines, line)

    def record(self, kernel: str, watched: dict | None) -> None:
        """What :func:`recorded_stores` sent back for a launch of ``kernel`` (a later store wins)."""
        for s in (watched or {}).get("stores", []):
            try:
                file, line, function = str(s["file"]), int(s["line"]), str(s["function"])
                cells = [(int(r), int(e)) for r, e, _ in s["cells"]]
            except (KeyError, TypeError, ValueError):
                continue  # what the target's process sent is data, judged here: a malformed entry names nothing
            writer = {"file": Path(file).name, "line": line, "text": self._text(file, line), "function": function,
                      "kernel": kernel}
            for region, element in cells:
                name = self._name(region, element)
                if name is not None:
                    self.writers[name] = writer

    def host(self, cell: str, what: str) -> None:
        """Cell ``cell`` (``ring_start.g0[5]``) written by the caller, not a kernel (``what`` says how)."""
        self.writers[cell] = {"host": what}

    def clear(self) -> None:
        """Forget the writers (a new step)."""
        self.writers = {}

    def writer(self, cell: str) -> dict[str, Any] | None:
        """The last writer of ``cell`` since :meth:`clear`, None if nothing wrote it."""
        return self.writers.get(cell)

    def first_stored(self, cells: list[str]) -> dict[str, Any] | None:
        """Of ``cells``, the first whose last writer is a kernel store in the version's own source (its text
        read), as ``{"cell", "file", "line", "text", "function", "kernel"}``; None when none is (unwritten,
        written by the host, or by a file that is not the version's)."""
        for cell in cells:
            w = self.writer(cell)
            if w is not None and w.get("text") is not None:
                return {"cell": cell, **w}
        return None
