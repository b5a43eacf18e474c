"""The frame obligation: every store of a program lands in the cells its role's
:class:`.roles.Frame` gives it, for every input inside the caller contract.

A tracker store's slot must be an entry of the program's own block-table row:
the slot term is taken apart where the kernel read it (a ``Select`` of the
block table's initial array, through the ``ite`` of masks and branches), and
each such read must be at the program's group and batch, inside the row and
not the null id. A slot the kernel did not read from its row (a constant, an
input, another row's entry) is outside the frame unless the guard of the
store is false. A declared extra output of the launch
(:class:`.roles.DeclaredOutput`, e.g. A3's ``rand_seeds``) may be written by
its one program only, inside the buffer's extent. A padding program (its
row past ``num_reqs`` on a ``max_num_reqs`` grid) writes no tracker. A frame
with ``null_block`` (:class:`.roles.Frame`) admits any store to the null
block's trackers besides.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import z3

from replayssm.spec.vocab import conj, implies

from ..goals import TRACKERS
from ..terms import Sym, Symbolic, lift

if TYPE_CHECKING:
    from ..memory import Access
    from .cases import KernelCase
    from .roles import Frame

P = TypeVar("P")

PLAN_ROWS = ("plan_ring_start", "plan_flush_count")
SLOT_TABLES = ("src_slots", "dst_slots")
WORK_LIST = ("active_request_indices", "num_active")


def _block_table_entry(term: z3.ExprRef) -> bool:
    return z3.is_select(term) and z3.is_const(term.arg(0)) and term.arg(0).decl().name() == "mem_block_table"


def slot_of_row(slot: Symbolic, batch: Symbolic, group: Symbolic, num_cols: Symbolic, pad: int) -> z3.BoolRef:
    """The condition that ``slot`` (a term) is a non-null entry the program read
    from block-table row ``(group, batch)``: false for any other origin."""
    t = lift(slot)
    if z3.is_app_of(t, z3.Z3_OP_ITE):
        c, a, b = t.children()
        return z3.If(c, lift(slot_of_row(a, batch, group, num_cols, pad)), lift(slot_of_row(b, batch, group, num_cols, pad)))
    if _block_table_entry(t) and t.num_args() == 4:
        g, b, col = (t.arg(i) for i in (1, 2, 3))
        return lift(conj(Sym(g) == group, Sym(b) == batch, Sym(col) >= 0, Sym(col) < num_cols, Sym(t) != pad))
    return lift(False)


def allowed(case: KernelCase, frame: Frame, write: Access) -> z3.BoolRef:
    """Whether the frame admits ``write`` (a term over the program's inputs)."""
    b = write.buffer
    out = frame.output(b)
    if out is not None:
        e, (numel,) = Sym(lift(write.index[0])), case.mem.shapes[b]
        return lift(conj(Sym(lift(case.row[0] if case.row else 0)) == out.program, e >= 0, e < numel))
    if b in WORK_LIST:
        return lift(frame.work_list(case.row[0] if case.row else 0)) if frame.work_list is not None else lift(False)
    if b in TRACKERS and frame.null_block:
        null = lift(Sym(lift(write.index[1])) == case.constexprs["geometry"].pad_slot)
        return z3.Or(null, _own_cell(case, frame, write))
    return _own_cell(case, frame, write)


def _own_cell(case: KernelCase, frame: Frame, write: Access) -> z3.BoolRef:
    """Whether ``write`` lands in the program's own row's cells: :func:`allowed` less the declared outputs,
    the work list and the null block."""
    b = write.buffer
    if not frame.row or not case.row:
        return lift(False)
    batch, group = case.row
    mem, geo = case.mem, case.constexprs["geometry"]
    if b in TRACKERS:
        if case.padding:  # a padding row's block-table entries name no request's slots
            return lift(False)
        num_cols = mem.shapes["block_table"][2]
        return lift(conj(Sym(lift(write.index[0])) == group,
                         Sym(slot_of_row(write.index[1], batch, group, num_cols, geo.pad_slot))))
    if b in PLAN_ROWS:
        return lift(Sym(lift(write.index[0])) == batch)
    if b in SLOT_TABLES:
        base, layers = mem.initial("packed_base", (group,)), mem.initial("num_layers", (group,))
        e, rows = Sym(lift(write.index[0])), geo.max_num_reqs
        return lift(conj(e >= base, e < base + layers * rows, Sym(lift((lift(e) - lift(base)) % rows)) == batch))
    return lift(False)


SEEN_COLUMNS = 6
"""The block-table columns :func:`seen` reads of the program's own row: the small launches' widest
(``report.SMALL_LAUNCHES``), where a counterexample is first looked for."""


def seen(case: KernelCase, frame: Frame, write: Access) -> z3.BoolRef:
    """When a replay (:func:`replay_violations`, which judges a tracker store by the slot's value) sees
    ``write`` outside the frame: a tracker store to another group, or to a slot that is none of the
    entries of the program's own row (its first :data:`SEEN_COLUMNS` columns, the table at most that wide),
    the null block not counted where the frame admits it. The proof reads where the slot was loaded from,
    so its counterexample may store a slot read elsewhere that equals one of the row's own: the report
    prefers a model where this holds (:attr:`.obligations.Part.observable`)."""
    if write.buffer not in TRACKERS or not frame.row or not case.row or case.padding:
        return lift(True)
    batch, group = case.row
    mem, pad = case.mem, case.constexprs["geometry"].pad_slot
    slot, num_cols = Sym(lift(write.index[1])), Sym(lift(mem.shapes["block_table"][2]))
    elsewhere = [Sym(lift(conj(num_cols <= SEEN_COLUMNS, slot != pad) if frame.null_block else
                          (num_cols <= SEEN_COLUMNS)))]
    elsewhere += [Sym(lift(z3.Or(lift(num_cols <= col), lift(slot != mem.initial("block_table", (group, batch, col))))))
                  for col in range(SEEN_COLUMNS)]
    return z3.Or(lift(Sym(lift(write.index[0])) != group), lift(conj(*elsewhere)))


def frame_parts(case: KernelCase, frame: Frame, part: Callable[..., P],
                where: Callable[[KernelCase, int], tuple[str, int]]) -> list[P]:
    """One part per store: its guard implies the frame admits it (``part``
    builds the obligation's :class:`.obligations.Part`; observable where a replay sees it: :func:`seen`)."""
    out = []
    for i, a in enumerate(case.mem.accesses):
        if a.kind != "write":
            continue
        at = where(case, i)
        out.append(part(f"store to {a.buffer} at {at[0]}:{at[1]} inside the program's frame",
                        implies(Sym(lift(a.guard)), Sym(allowed(case, frame, a))), at, case.mem.program,
                        {"index": tuple(a.index), "guard": a.guard}, seen(case, frame, a)))
    return out


@dataclass(frozen=True)
class FrameViolation:
    """A store a replayed launch made outside its program's frame: program
    ``(batch, group, ...)`` wrote ``element`` of ``region``."""

    program: tuple[int, ...]
    region: str
    element: int

    @property
    def batch(self) -> int:
        """The batch row of the program that stored (0 for a one-dimensional grid's group)."""
        return (self.program + (0,))[0]

    def __str__(self) -> str:
        return f"program {self.program} wrote {self.region} element {self.element}, outside its frame"


def replay_violations(log: list, buffers: dict, frame: Frame, pad: int, rows: int,
                      num_reqs: int) -> list[FrameViolation]:
    """The frame read concretely on a replayed launch's log (``playback``):
    each write ``(program, "write", (region, element), value)`` whose cell the
    frame does not give program ``(batch, group)`` (a padding program, batch
    ``>= num_reqs``, owns no tracker)."""
    out = []
    for program, kind, (region, element), _ in log:
        if kind != "write":
            continue
        batch, group = (tuple(program) + (0, 0))[:2]
        name = re.sub(r"\[\d+\]$", "", region)
        own = re.search(r"\[(\d+)\]$", region)
        declared = frame.output(name)
        if declared is not None:
            ok = batch == declared.program and 0 <= element < np.asarray(buffers[name]).size
        elif name in WORK_LIST:
            ok = frame.work_list is not None and bool(frame.work_list(batch))
        elif not frame.row:
            ok = False
        elif name in TRACKERS:
            row = [int(s) for s in buffers["block_table"][group][batch]] \
                if batch < min(num_reqs, len(buffers["block_table"][group])) else []
            ok = (own is not None and int(own.group(1)) == group and element != pad and element in row
                  or frame.null_block and element == pad)
        elif name in PLAN_ROWS:
            ok = element == batch
        elif name in SLOT_TABLES:
            base, layers = int(buffers["packed_base"][group]), int(buffers["num_layers"][group])
            ok = base <= element < base + layers * rows and (element - base) % rows == batch
        else:
            ok = False
        if not ok:
            out.append(FrameViolation(tuple(int(i) for i in program), region, int(element)))
    return out
