"""The lockstep systems' choices: one draw per rule for all K systems, decoded per system.

A rule of :class:`.lockstep.LockstepMachine` draws one bytes choice of
``K * ROW_BYTES`` bytes (:func:`rows_of`); system k's callers decode their
draws (``draw(strategy)``, :data:`.caller_policy.Draw`) from its k-th row, in
order (:class:`BulkDraw`). A system whose row runs out draws a row of its own
(one more choice), so a step may make as many decisions as it needs.

What a decoded choice is, byte by byte: a bounded integer or ``sampled_from``
of n values takes one byte for n up to 16 and two (big-endian) up to 256,
reduced modulo n; a boolean is a byte's low bit; ``just`` takes none. Byte 0
decodes to the simplest choice (the lower bound, the first element,
False), so Hypothesis's shrinking of bytes towards zero shrinks each
decision towards the simplest, and a system's row keeps its place in the
rule's draw when the shrinker idles the others. Hypothesis draws these
strategies uniformly itself (bounded integers inside its uniform inner
range [-256, 256], booleans at one half, apart from its 5% pool of constants), so
the decoded decisions have the distribution of drawn ones, within the
modulo's bias (at most 1/16 of a value's share). Any other strategy, or a
wider range, is drawn by Hypothesis as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis.strategies._internal.misc import JustStrategy
from hypothesis.strategies._internal.strategies import SampledFromStrategy

ROW_BYTES = 16
"""Bytes per system and rule: a model step of one system decodes about ten
decisions per scheduled request (``benchmarks/fuzz_harness_cost.py``
measures how often a row runs out: ``refills``)."""

ONE_BYTE = 16
"""The most values a choice decodes from one byte (the modulo's bias is at most 1/16 there)."""

MAX_VALUES = 256
"""The most values a choice decodes from bytes (two); a wider range is drawn by Hypothesis."""

T = TypeVar("T")


class BulkDraw:
    """One system's decisions in one rule, decoded in order from its bytes:
    as a :data:`.caller_policy.Draw` (``draw(strategy)``) and through
    :func:`.caller_policy.integer`, ``boolean`` and ``element``, which build no strategy."""

    __slots__ = ("cd", "data", "at", "refills")

    def __init__(self, cd: Any, data: bytes) -> None:
        self.cd, self.data, self.at, self.refills = cd, data, 0, 0

    def byte(self) -> int:
        """The row's next byte (a fresh row of the system's own once this one is used up)."""
        if self.at == len(self.data):
            self.data, self.at = self.cd.draw_bytes(ROW_BYTES, ROW_BYTES), 0
            self.refills += 1
        self.at += 1
        return self.data[self.at - 1]

    def below(self, n: int) -> int:
        """A decision among ``n`` values (``0`` for byte 0), ``1 <= n <= MAX_VALUES``."""
        if n == 1:
            return 0
        if n <= ONE_BYTE:
            return self.byte() % n
        return (self.byte() << 8 | self.byte()) % n

    def integer(self, lo: int, hi: int) -> int:
        """A decision in ``[lo, hi]`` (a range wider than :data:`MAX_VALUES` drawn by Hypothesis)."""
        if hi - lo < MAX_VALUES:
            return lo + self.below(hi - lo + 1)
        return self.cd.draw_integer(lo, hi)

    def boolean(self) -> bool:
        return bool(self.byte() & 1)

    def element(self, options: Sequence[T]) -> T:
        """One of ``options`` (non-empty), the first for byte 0."""
        return options[self.integer(0, len(options) - 1)]

    def __call__(self, strategy: Any) -> Any:
        kind = type(strategy)
        if kind is SampledFromStrategy and not strategy._transformations:
            return self.element(strategy.elements)
        if kind is JustStrategy:
            return strategy.value
        name = getattr(getattr(strategy, "function", None), "__name__", None)
        args: tuple = getattr(strategy, "_LazyStrategy__args", None) or ()
        plain = not getattr(strategy, "_LazyStrategy__kwargs", True)  # a lazy strategy without keywords
        if name == "booleans" and not args and plain:
            return self.boolean()
        if name == "integers" and plain and len(args) == 2 and all(type(a) is int for a in args) \
                and args[0] <= args[1]:
            return self.integer(args[0], args[1])
        return self.cd.draw(strategy)


def rows_of(data: Any, systems: int) -> list[BulkDraw]:
    """The ``systems`` rows of one rule, from one drawn bytes choice (``data``: Hypothesis's ``hs.data()``)."""
    cd = data.conjecture_data
    block = cd.draw_bytes(systems * ROW_BYTES, systems * ROW_BYTES)
    return [BulkDraw(cd, block[k * ROW_BYTES:(k + 1) * ROW_BYTES]) for k in range(systems)]
