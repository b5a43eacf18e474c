"""The symbolic memory: a spec transition's accesses as Z3 terms.

Each buffer is a Z3 array over its index tuple. A load returns the array's
current value (or ``other`` where the guard fails) and is logged; a store is
logged and updates the array for later loads of the same program. A store
inside ``each`` is a *family*: one logged write whose index, value and guard
mention the loop variable, universally quantified in every obligation. Loads
of a buffer after a family store to it are refused (they would need
quantifiers); the spec orders its reads first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
import z3

from replayssm.spec.vocab import conj, ite

from .terms import Sym, Symbolic, fresh_int, lift, within


@dataclass(frozen=True)
class Access:
    """One load or store, with its guard (loop ranges included)."""

    kind: str
    buffer: str
    index: tuple
    value: Symbolic
    guard: Symbolic
    loop_vars: tuple = ()
    program: str = ""


@dataclass
class SymbolicMemory:
    """Symbolic buffers with shapes (ints or Syms) for the bounds obligations.

    ``arrays`` maps a buffer to its Z3 array before the program; two programs
    of one launch share these to reason about races.
    """

    shapes: Mapping[str, tuple]
    arrays: dict[str, z3.ArrayRef] = field(default_factory=dict)
    program: str = "p"
    accesses: list[Access] = field(default_factory=list)
    current: dict[str, z3.ArrayRef] = field(default_factory=dict)
    _loops: list[tuple[Sym, Symbolic]] = field(default_factory=list)
    _family_written: set[str] = field(default_factory=set)

    def array(self, buffer: str) -> z3.ArrayRef:
        """The buffer's array before this program ran."""
        if buffer not in self.arrays:
            dims = len(self.shapes[buffer])
            sort = z3.ArraySort(*([z3.IntSort()] * dims), z3.IntSort())
            self.arrays[buffer] = z3.Const(f"mem_{buffer}", sort)
        return self.arrays[buffer]

    def initial(self, buffer: str, index: tuple) -> Sym:
        """The buffer's entry at ``index`` before this program ran."""
        return Sym(z3.Select(self.array(buffer), *[lift(i) for i in index]))

    def _now(self, buffer: str) -> z3.ArrayRef:
        if buffer not in self.current:
            self.current[buffer] = self.array(buffer)
        return self.current[buffer]

    def _guard(self, guard: Symbolic) -> Symbolic:
        return conj(guard, *[g for _, g in self._loops]) if self._loops else guard

    def load(self, buffer: str, index: tuple, guard: Symbolic = True, other: Symbolic = 0) -> Sym:
        if buffer in self._family_written:
            raise RuntimeError(f"spec reads {buffer} after a loop stored to it; read it before the loop")
        g = self._guard(guard)
        value = Sym(z3.Select(self._now(buffer), *[lift(i) for i in index]))
        self.accesses.append(Access("read", buffer, tuple(index), value, g, self._loop_vars(), self.program))
        return ite(g, value, other)

    def store(self, buffer: str, index: tuple, value: Symbolic, guard: Symbolic = True) -> None:
        g = self._guard(guard)
        self.accesses.append(Access("write", buffer, tuple(index), value, g, self._loop_vars(), self.program))
        if self._loops:
            self._family_written.add(buffer)
            return
        arr = self._now(buffer)
        self.current[buffer] = z3.If(
            lift(g), z3.Store(arr, *[lift(i) for i in index], lift(value)), arr
        )

    def each(self, lo: Symbolic, hi: Symbolic, guard: Symbolic = True) -> Iterator[Sym]:
        var = fresh_int(f"{self.program}_loop")
        in_range = conj(guard, var >= lo, var < hi)
        self._loops.append((var, in_range))
        try:
            with within(in_range):
                yield var
        finally:
            self._loops.pop()

    def _loop_vars(self) -> tuple:
        return tuple(v for v, _ in self._loops)

    @property
    def reads(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "read"]

    @property
    def writes(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "write"]

    def final(self, buffer: str, index: tuple) -> Sym:
        """The buffer's entry at ``index`` after the program: the last store
        that hits it, in program order. A loop store hits when some iteration
        does (its value must not depend on the loop variable)."""
        target = [lift(i) for i in index]
        value = self.initial(buffer, index).z
        for w in self.writes:
            if w.buffer != buffer:
                continue
            hit = z3.And(lift(w.guard), *[lift(i) == t for i, t in zip(w.index, target)])
            if w.loop_vars:
                hit = z3.Exists([lift(v) for v in w.loop_vars], hit)
            value = z3.If(hit, lift(w.value), value)
        return Sym(value)

    def in_bounds(self, access: Access) -> Sym:
        """The access's guard implies every index component lies in its dimension."""
        dims = self.shapes[access.buffer]
        inside = conj(*[conj(i >= 0, i < n) for i, n in zip(access.index, dims)])
        return Sym(z3.Implies(lift(access.guard), lift(inside)))
