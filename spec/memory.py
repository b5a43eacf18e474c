"""Memory as the kernels see it: named buffers, guarded loads and stores.

A transition never indexes an array directly. It calls ``mem.load`` and
``mem.store`` with a *guard* (Triton's mask) and iterates loops with
``mem.each``. Each memory is one interpreter of the same transition:

* :class:`ConcreteMemory` runs one program on Python ints (the oracle) and
  faults on any out-of-bounds access or any value its buffer cannot hold;
* :class:`VectorMemory` runs all programs of a launch at once on numpy arrays;
* ``replayssm.verify.memory.SymbolicMemory`` records every access as Z3 terms;
* :class:`~replayssm.spec.table_memory.TableMemory` runs the kernels inside the
  system model's engine step (``spec.system``) on small lists of vocabulary
  values, ints or Z3 terms alike: a concrete out-of-bounds access raises
  :class:`MemoryFault`, a symbolic one is kept as a fault condition the
  system proofs require false.

An index is a tuple with one component per buffer dimension, so a column past
the end of a block-table row is out of bounds even where the flat address
would land in the next row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .vocab import Cond, Value


class MemoryFault(IndexError):
    """A guarded access whose index lies outside its buffer."""

    def __init__(self, buffer: str, index: tuple, shape: tuple) -> None:
        super().__init__(f"out-of-bounds access to {buffer}{list(index)} (shape {list(shape)})")
        self.buffer, self.index, self.shape = buffer, index, shape


class ValueOverflow(OverflowError):
    """A store of a value its buffer's integer type cannot represent."""

    def __init__(self, buffer: str, index: tuple, value: int, dtype: np.dtype) -> None:
        super().__init__(f"store of {value} into {buffer}{list(index)} overflows {dtype}")
        self.buffer, self.index, self.value = buffer, index, value


class Memory(Protocol):
    """What a transition may do with memory."""

    def load(self, buffer: str, index: tuple[Value, ...], guard: Cond = True, other: Value = 0) -> Value: ...

    def store(self, buffer: str, index: tuple[Value, ...], value: Value, guard: Cond = True) -> None: ...

    def each(self, lo: Value, hi: Value, guard: Cond = True) -> Iterator[Value]: ...


_LIMITS: dict[np.dtype, tuple[int, int] | None] = {}
"""The value range of each buffer dtype met so far (None: not an integer type)."""


def _limits(dtype: np.dtype) -> tuple[int, int] | None:
    if dtype not in _LIMITS:
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        _LIMITS[dtype] = (int(info.min), int(info.max)) if info is not None else None
    return _LIMITS[dtype]


def _check_value(buffer: str, arr: np.ndarray, index: tuple, value: int) -> None:
    limits = _limits(arr.dtype)
    if limits is not None and not (limits[0] <= value <= limits[1]):
        raise ValueOverflow(buffer, index, value, arr.dtype)


@dataclass
class ConcreteMemory:
    """The oracle's memory: numpy buffers, one program at a time.

    Loads return Python ints; every executed access is bounds-checked and every
    stored value must fit its buffer.
    """

    buffers: Mapping[str, np.ndarray]

    def _checked(self, buffer: str, index: tuple) -> tuple:
        arr = self.buffers[buffer]
        shape = arr.shape
        if len(index) != len(shape):
            raise MemoryFault(buffer, index, shape)
        checked = []
        for i, n in zip(index, shape):
            i = int(i)
            if not 0 <= i < n:
                raise MemoryFault(buffer, index, shape)
            checked.append(i)
        return tuple(checked)

    def load(self, buffer: str, index: tuple, guard: bool = True, other: int = 0) -> int:
        if not guard:
            return other
        return int(self.buffers[buffer][self._checked(buffer, index)])

    def store(self, buffer: str, index: tuple, value: int, guard: bool = True) -> None:
        if not guard:
            return
        idx = self._checked(buffer, index)
        arr = self.buffers[buffer]
        _check_value(buffer, arr, idx, int(value))
        arr[idx] = int(value)

    def each(self, lo: int, hi: int, guard: bool = True) -> Iterator[int]:
        return iter(range(int(lo), int(hi)) if guard else ())


@dataclass
class VectorMemory:
    """All programs of one launch side by side, one numpy lane per program.

    Stores execute statement by statement across lanes in lane order, so two
    lanes writing one entry leave the later lane's value: equal to the
    sequential oracle whenever the launch is deterministic.
    """

    buffers: Mapping[str, np.ndarray]
    lanes: int
    _masks: list[np.ndarray] = field(default_factory=list)

    def _mask(self, guard: npt.ArrayLike) -> np.ndarray:
        m = np.broadcast_to(np.asarray(guard, dtype=bool), (self.lanes,))
        for extra in self._masks:
            m = m & extra
        return m

    def _lanes_index(self, buffer: str, index: tuple, mask: np.ndarray) -> tuple:
        arr = self.buffers[buffer]
        comps = [np.broadcast_to(np.asarray(i, dtype=np.int64), (self.lanes,)) for i in index]
        for c, n in zip(comps, arr.shape):
            bad = mask & ((c < 0) | (c >= n))
            if bad.any():
                lane = int(np.argmax(bad))
                raise MemoryFault(buffer, tuple(int(x[lane]) for x in comps), arr.shape)
        return tuple(np.where(mask, c, 0) for c in comps)

    def load(self, buffer: str, index: tuple, guard: npt.ArrayLike = True, other: npt.ArrayLike = 0) -> np.ndarray:
        mask = self._mask(guard)
        idx = self._lanes_index(buffer, index, mask)
        return np.where(mask, self.buffers[buffer][idx].astype(np.int64), other)

    def store(self, buffer: str, index: tuple, value: npt.ArrayLike, guard: npt.ArrayLike = True) -> None:
        mask = self._mask(guard)
        if not mask.any():
            return
        idx = self._lanes_index(buffer, index, mask)
        arr = self.buffers[buffer]
        vals = np.broadcast_to(np.asarray(value, dtype=np.int64), (self.lanes,))[mask]
        info = np.iinfo(arr.dtype)
        if vals.size and (vals.min() < info.min or vals.max() > info.max):
            lane = int(np.argmax((vals < info.min) | (vals > info.max)))
            raise ValueOverflow(buffer, tuple(int(i[mask][lane]) for i in idx), int(vals[lane]), arr.dtype)
        arr[tuple(i[mask] for i in idx)] = vals

    def each(self, lo: npt.ArrayLike, hi: npt.ArrayLike, guard: npt.ArrayLike = True) -> Iterator[int]:
        first = np.broadcast_to(np.asarray(lo, dtype=np.int64), (self.lanes,))
        end = np.broadcast_to(np.asarray(hi, dtype=np.int64), (self.lanes,))
        live = self._mask(guard) & (first < end)
        if not live.any():
            return
        for v in range(int(first[live].min()), int(end[live].max())):
            self._masks.append(live & (first <= v) & (v < end))
            try:
                yield v
            finally:
                self._masks.pop()
