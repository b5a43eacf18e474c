"""Obligations of the block boundary, for every block size of the geometry set."""

from __future__ import annotations

from collections.abc import Iterator

from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.vocab import conj, implies

from .obligation import Claim, obligation
from .scenarios import GEOMETRIES
from .terms import named_int


def _block_sizes() -> list[int]:
    return sorted({geo.block_size for geo in GEOMETRIES.values()})


def _interval() -> tuple:
    running, new, k = named_int("running_pos"), named_int("new_computed"), named_int("k")
    return running, new, k, [("positions_nonnegative", conj(running >= 0, new >= 0, running <= new + 1))]


@obligation("boundary.exact", "boundary",
            "a copy is needed iff some block boundary k*bs (k >= 0) lies in [running_pos, new_computed]; "
            "then aligned is that boundary, dst_col its block and bias its distance from running_pos")
def exact() -> Iterator[Claim]:
    for bs in _block_sizes():
        running, new, k, assume = _interval()
        b = mamba_state_copy_boundary(running, new, bs)
        boundary_inside = conj(k >= 0, k * bs >= running, k * bs <= new)
        goal = [
            ("boundary => copy", implies(boundary_inside, b.needs_copy)),
            ("copy => aligned inside", implies(b.needs_copy, conj(b.aligned >= running, b.aligned <= new))),
            ("aligned is the block end", (b.dst_col + 1) * bs == b.aligned),
            ("bias", b.bias == b.aligned - running),
        ]
        yield Claim(goal, assume, conj(b.needs_copy, new > b.aligned), f"bs={bs}",
                    {"running_pos": running, "new_computed": new, "k": k, "aligned": b.aligned})


@obligation("boundary.single_when_short", "boundary",
            "when the interval is no longer than a block (query_len <= bs) it holds at most one boundary: aligned")
def single_when_short() -> Iterator[Claim]:
    for bs in _block_sizes():
        running, new, k, assume = _interval()
        b = mamba_state_copy_boundary(running, new, bs)
        assume = assume + [("decode_within_block", new - running + 1 <= bs)]
        goal = implies(conj(k >= 0, k * bs >= running, k * bs <= new), k * bs == b.aligned)
        yield Claim(goal, assume, b.needs_copy, f"bs={bs}",
                    {"running_pos": running, "new_computed": new, "k": k, "aligned": b.aligned})


@obligation("boundary.last_published", "boundary",
            "when the interval holds several boundaries only the last is published: every other one lies below aligned")
def last_published() -> Iterator[Claim]:
    for bs in _block_sizes():
        running, new, k, assume = _interval()
        b = mamba_state_copy_boundary(running, new, bs)
        goal = implies(conj(k >= 0, k * bs >= running, k * bs <= new), k * bs <= b.aligned)
        cover = conj(k >= 0, k * bs >= running, k * bs < b.aligned)
        yield Claim(goal, assume, cover, f"bs={bs}",
                    {"running_pos": running, "new_computed": new, "k": k, "aligned": b.aligned})


@obligation("boundary.prefill_exact", "boundary",
            "for a prefill (running_pos = new_computed) a copy is needed iff the chunk ends on a boundary, with bias 0")
def prefill_exact() -> Iterator[Claim]:
    for bs in _block_sizes():
        new = named_int("new_computed")
        b = mamba_state_copy_boundary(new, new, bs)
        goal = conj(b.needs_copy == (b.aligned == new), implies(b.needs_copy, b.bias == 0))
        yield Claim(goal, [("positions_nonnegative", new >= 0)], conj(b.needs_copy, new > 0), f"bs={bs}",
                    {"new_computed": new, "aligned": b.aligned})
