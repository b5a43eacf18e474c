"""The spec's symbolic memory, with the one relaxation kernels need.

``SymbolicMemory`` refuses to read a buffer after a loop stored to it (the
spec orders its reads first). A kernel cannot be reordered, but its reads
after a loop usually sit on a path the loop never runs on (the decode branch
after the prefill branch's reset loop). Such a read is exact without
quantifiers when no iteration of any earlier loop store to the buffer can
run together with it: Z3 checks that the guards are disjoint. A read that may
follow one of those stores is refused, as in the spec.
"""

from __future__ import annotations

import z3

from ..memory import SymbolicMemory
from ..terms import Sym, Symbolic, lift


class OverlappingLoopRead(RuntimeError):
    """A read that may see a store of an earlier loop iteration family."""


def disjoint(a: Symbolic, b: Symbolic) -> bool:
    """No assignment makes both guards true (a quick Z3 check)."""
    s = z3.Solver()
    s.set("timeout", 2000)
    s.add(lift(a), lift(b))
    return s.check() == z3.unsat


class KernelMemory(SymbolicMemory):
    """``SymbolicMemory`` that admits reads on paths disjoint from earlier loop stores."""

    def load(self, buffer: str, index: tuple, guard: Symbolic = True, other: Symbolic = 0) -> Sym:
        if buffer in self._family_written:
            g = self._guard(guard)
            for w in self.writes:
                if w.buffer == buffer and w.loop_vars and not disjoint(g, w.guard):
                    raise OverlappingLoopRead(
                        f"a read of {buffer} that may follow a loop's store to it (line order of the kernel)")
            self._family_written.discard(buffer)
            try:
                return super().load(buffer, index, guard, other)
            finally:
                self._family_written.add(buffer)
        return super().load(buffer, index, guard, other)
