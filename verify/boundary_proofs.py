"""Obligations of the block boundary, for every block size of the geometry set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from replayssm.spec import assumptions as env
from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.vocab import conj, implies

from .obligation import Claim, obligation
from .scenarios import GEOMETRIES
from .terms import Fact, Sym, Symbolic, named_int


def _block_sizes() -> list[int]:
    return sorted({geo.block_size for geo in GEOMETRIES.values()})


@dataclass
class Interval:
    """A step's interval ``[running_pos, new_computed]``, a candidate boundary
    ``k * bs``, and the kernel's answer for block size ``bs``."""

    bs: int
    running: Sym = field(default_factory=lambda: named_int("running_pos"))
    new: Sym = field(default_factory=lambda: named_int("new_computed"))
    k: Sym = field(default_factory=lambda: named_int("k"))

    def __post_init__(self) -> None:
        self.b = mamba_state_copy_boundary(self.running, self.new, self.bs)

    @property
    def assumptions(self) -> list[Fact]:
        return [("positions_nonnegative", conj(self.running >= 0, self.new >= 0, self.running <= self.new + 1))]

    @property
    def k_inside(self) -> Symbolic:
        """The candidate boundary lies in the interval."""
        return conj(self.k >= 0, self.k * self.bs >= self.running, self.k * self.bs <= self.new)

    def show(self) -> dict[str, Any]:
        return {"running_pos": self.running, "new_computed": self.new, "k": self.k, "aligned": self.b.aligned}


@obligation("boundary.exact", "boundary",
            "a copy is needed iff some block boundary k*bs (k >= 0) lies in [running_pos, new_computed]; "
            "then aligned is that boundary, dst_col its block and bias its distance from running_pos")
def exact() -> Iterator[Claim]:
    for bs in _block_sizes():
        iv = Interval(bs)
        b = iv.b
        goal = [
            ("boundary => copy", implies(iv.k_inside, b.needs_copy)),
            ("copy => aligned inside", implies(b.needs_copy, conj(b.aligned >= iv.running, b.aligned <= iv.new))),
            ("aligned is the block end", (b.dst_col + 1) * bs == b.aligned),
            ("bias", b.bias == b.aligned - iv.running),
        ]
        yield Claim(goal, iv.assumptions, conj(b.needs_copy, iv.new > b.aligned), f"bs={bs}", iv.show())


@obligation("boundary.single_when_short", "boundary",
            "when the interval is no longer than a block (query_len <= bs) it holds at most one boundary: aligned")
def single_when_short() -> Iterator[Claim]:
    for bs in _block_sizes():
        iv = Interval(bs)
        assume = iv.assumptions + [(env.DECODE_WITHIN_BLOCK.name, iv.new - iv.running + 1 <= bs)]
        goal = [("no boundary inside below aligned", implies(iv.k_inside, iv.k * bs >= iv.b.aligned)),
                ("no boundary inside above aligned", implies(iv.k_inside, iv.k * bs <= iv.b.aligned))]
        yield Claim(goal, assume, iv.b.needs_copy, f"bs={bs}", iv.show())


@obligation("boundary.last_published", "boundary",
            "when the interval holds several boundaries only the last is published: every other one lies below aligned")
def last_published() -> Iterator[Claim]:
    for bs in _block_sizes():
        iv = Interval(bs)
        cover = conj(iv.k >= 0, iv.k * bs >= iv.running, iv.k * bs < iv.b.aligned)
        goal = [("no boundary inside above aligned", implies(iv.k_inside, iv.k * bs <= iv.b.aligned))]
        yield Claim(goal, iv.assumptions, cover, f"bs={bs}", iv.show())


@obligation("boundary.prefill_exact", "boundary",
            "for a prefill (running_pos = new_computed) a copy is needed iff the chunk ends on a boundary, with bias 0")
def prefill_exact() -> Iterator[Claim]:
    for bs in _block_sizes():
        new = named_int("new_computed")
        b = mamba_state_copy_boundary(new, new, bs)
        goal = [("copy iff the chunk ends on a boundary", b.needs_copy == (b.aligned == new)),
                ("bias 0", implies(b.needs_copy, b.bias == 0))]
        yield Claim(goal, [("positions_nonnegative", new >= 0)], conj(b.needs_copy, new > 0), f"bs={bs}",
                    {"new_computed": new, "aligned": b.aligned})
