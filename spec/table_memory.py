"""The table memory: the kernels' memory over the system model's lists.

``spec.system`` runs the worker's kernels (migration, postprocess,
compaction) inside its engine step on buffers laid out from its own state.
:class:`TableMemory` is the ``spec.memory.Memory`` those launches use: small
flat lists of vocabulary values, so one step runs on Python ints (the
concrete simulation) and on Z3 terms (the system proofs) alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .arrays import fold_and, fold_ite, int_offset, is_concrete, lookup, update
from .memory import MemoryFault
from .vocab import Cond, Value, conj, disj, negate

Buffers = dict[str, tuple[tuple[int, ...], list[Value]]]
"""Named buffers: each one's shape and its entries, flat in row-major order."""

_COLLECTORS: list[list["TableMemory"]] = []
"""The lists of the open :func:`collecting_faults` blocks, innermost last."""


@contextmanager
def collecting_faults() -> Iterator[list["TableMemory"]]:
    """Every :class:`TableMemory` made inside the block, in order (their
    ``faults`` then name every access a symbolic run recorded as a fault,
    also those of memories whose faults the code that made them drops)."""
    made: list[TableMemory] = []
    _COLLECTORS.append(made)
    try:
        yield made
    finally:
        _COLLECTORS.pop()


@dataclass
class TableMemory:
    """A ``spec.memory.Memory`` over small lists of vocabulary values.

    Shapes are concrete; indices, guards and values may be ints or Z3 terms.
    On concrete inputs an executed out-of-bounds access raises
    :class:`MemoryFault` (the oracle's behaviour); on symbolic ones it is
    recorded in ``faults`` as a condition, which the proofs require false.
    Loops over a symbolic range iterate the concrete range ``[0, loop_bound)``
    under a mask; a range reaching outside it is a fault too.
    """

    buffers: Buffers
    loop_bound: int
    faults: list[tuple[str, Cond]] = field(default_factory=list)
    _masks: list[Cond] = field(default_factory=list)

    def __post_init__(self) -> None:
        for made in _COLLECTORS:
            made.append(self)

    def _guard(self, guard: Cond) -> Cond:
        return fold_and(guard, *self._masks) if self._masks else guard

    @contextmanager
    def masked(self, guard: Cond) -> Iterator[None]:
        if guard is True:
            yield
            return
        self._masks.append(guard)
        try:
            yield
        finally:
            self._masks.pop()

    def _check_bounds(self, buffer: str, index: tuple[Value, ...], guard: Cond) -> tuple[int, ...]:
        shape, _ = self.buffers[buffer]
        if len(index) != len(shape):
            raise MemoryFault(buffer, index, shape)
        inside = conj(*[conj(i >= 0, i < n) for i, n in zip(index, shape)])
        if is_concrete(guard, inside):
            if guard and not inside:
                raise MemoryFault(buffer, index, shape)
        else:
            self.faults.append((f"{buffer} index in bounds", conj(guard, negate(inside))))
        return shape

    def _concrete_offset(self, buffer: str, index: tuple) -> int | None:
        """The flat offset of an all-int ``index`` (None when a component is
        symbolic); raises MemoryFault when it lies outside the buffer."""
        shape = self.buffers[buffer][0]
        flat = int_offset(shape, index)
        if flat is not None and flat < 0:
            raise MemoryFault(buffer, index, shape)
        return flat

    def load(self, buffer: str, index: tuple[Value, ...], guard: Cond = True, other: Value = 0) -> Value:
        """The entry at ``index`` (``other`` where ``guard`` is off). A
        symbolic component selects within its own dimension: where the
        bounds checks hold this is the flat address the kernel computes."""
        g = self._guard(guard)
        if g is False:
            return other
        if g is True:  # the concrete simulation's fast path
            flat = self._concrete_offset(buffer, index)
            if flat is not None:
                return self.buffers[buffer][1][flat]
        shape = self._check_bounds(buffer, index, g)
        return fold_ite(g, lookup(self.buffers[buffer][1], shape, index, other), other)

    def store(self, buffer: str, index: tuple[Value, ...], value: Value, guard: Cond = True) -> None:
        g = self._guard(guard)
        if g is False:
            return
        if g is True:  # the concrete simulation's fast path
            flat = self._concrete_offset(buffer, index)
            if flat is not None:
                self.buffers[buffer][1][flat] = value
                return
        shape = self._check_bounds(buffer, index, g)
        update(self.buffers[buffer][1], shape, index, value, g)

    def each(self, lo: Value, hi: Value, guard: Cond = True) -> Iterator[Value]:
        g = self._guard(guard)
        if is_concrete(lo, hi, g):
            if g:
                yield from range(lo, hi)
            return
        self.faults.append(("loop range within the bound", conj(g, lo < hi, disj(lo < 0, hi > self.loop_bound))))
        for v in range(self.loop_bound):
            self._masks.append(conj(g, lo <= v, v < hi))
            try:
                yield v
            finally:
                self._masks.pop()
