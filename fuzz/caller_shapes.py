"""The systems the fuzz callers drive: geometries, model lengths, caller behaviours, and the aims that steer them.

A fuzzed system is a :class:`~.launcher.Setup` (geometry, conventions,
cache mode, layers, block table as vLLM sizes it) and the optional caller
behaviours its run uses (:class:`Features`, swarm testing); :func:`systems`
draws both, towards one of the :data:`AIMS`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from hypothesis import strategies as hs

from replayssm.spec.geometry import Conventions, Geometry

from .caller_policy import Draw, boolean
from .launcher import Setup

GEOMETRIES = (
    Geometry(max_num_reqs=4, block_size=8, window=16, ring_len=20),
    Geometry(max_num_reqs=4, block_size=4, window=4, ring_len=8),
    Geometry(max_num_reqs=4, block_size=5, window=3, ring_len=5),
    Geometry(max_num_reqs=3, block_size=3, window=2, ring_len=4),
    Geometry(max_num_reqs=4, block_size=1, window=2, ring_len=3),
    Geometry(max_num_reqs=3, block_size=2, window=4, ring_len=7),
)
"""Fuzzed geometries: vLLM's non-power-of-two ring (W=16, T<=4, R=20) with a
small block, a power-of-two ring, odd blocks and rings, T = W, block size 1
(every token a boundary; R = 3) and block size 2 with a ring of 7 that holds
decode rows of 3 tokens (longer than a block: only under ``--drop``)."""

MODEL_BLOCKS = (3, 1, 2, 10)
"""Model lengths in blocks: small ones that requests fill (a prompt and its
decode steps up to ``max_model_len`` tokens), and a long one. The block table
is as vLLM sizes it (``Setup.sized``): that many columns in align mode, one
live column in mode none."""

NUM_SLOTS = 48
"""Tracker entries per group (slot 0 is the null block)."""


@dataclass
class Features:
    """Which optional caller behaviours this run uses (swarm testing)."""

    prefix_hits: bool = True
    padding_rows: bool = True
    block_copies: bool = True
    null_columns: bool = True
    stale_slots: bool = False
    """Block-table entries the kernels must not read hold other owners' real
    slots: columns past a row's live column, padding rows, rows past
    ``num_reqs`` (vLLM reuses table rows without clearing them)."""
    shared_prompts: bool = False
    """All prompts come from one stream, publish their first block at once
    and take their longest prefix hit; skipped columns are null."""
    short_prompts: bool = False
    """Prompts of at most two blocks and a token, leaving the table to decode steps."""


@dataclass(frozen=True)
class Aim:
    """Where one example points the callers: geometries, model lengths and
    fixed caller behaviours for scenario classes that free draws reach too
    rarely in a few examples per convention combination (the ci profile runs
    4 per combination)."""

    name: str
    geometries: tuple[Geometry, ...]
    model_blocks: tuple[int, ...]
    """``max_model_len`` in blocks (:data:`MODEL_BLOCKS`)."""
    fixed: tuple[tuple[str, bool], ...] = ()
    """:class:`Features` set by the aim; the others are drawn."""
    moving_live_column: bool = False
    """Only for callers whose live column moves (align mode, explicit live columns)."""


AIMS = (
    Aim("free", GEOMETRIES, MODEL_BLOCKS),
    Aim("table edges", GEOMETRIES, (1, 2, 3), (("stale_slots", True), ("short_prompts", False))),
    Aim("shared prefixes", GEOMETRIES, (3, 10), (("prefix_hits", True), ("null_columns", True),
                                                 ("shared_prompts", True), ("short_prompts", False)),
        moving_live_column=True),
    Aim("long decodes", tuple(g for g in GEOMETRIES if g.window < 2 * g.block_size), (10,),
        (("block_copies", True), ("short_prompts", True), ("shared_prompts", False))),
)
"""The aims an example draws from: free draws; tables of 1 to 3 columns that
requests fill, with other owners' slots where the kernels must not read
(table full, live column is the last one, one-column table); requests
sharing prefixes (align mode: prefix hits, null columns, multi-column
prefill resets); long decodes in a wide table with a window shorter than two
blocks (checkpoints at boundaries, ring wraps, migrations to copied slots)."""


@hs.composite
def shapes(draw: Draw, conventions: tuple[Conventions, ...]) -> tuple[Setup, Aim]:
    """One fuzzed system's fixed shape, and the aim it was drawn for."""
    conv = draw(hs.sampled_from(conventions))
    # all mode under either host: with publishing on an A1-era host's flags, off the reference's
    mode = draw(hs.sampled_from([conv.mode] + ([] if conv.live_col_is_zero else ["all"])))
    moving = conv.materialize_prefixes and not conv.live_col_is_zero
    aim = draw(hs.sampled_from([a for a in AIMS if moving or not a.moving_live_column]))
    geo = draw(hs.sampled_from(aim.geometries))
    model_blocks = draw(hs.sampled_from(aim.model_blocks))
    layers = tuple(draw(hs.lists(hs.integers(1, 3), min_size=1, max_size=3)))
    return Setup.sized(geo, conv, layers, model_blocks, NUM_SLOTS, mode), aim


def features_for(draw: Draw, aim: Aim) -> Features:
    """The caller behaviours of one run: those ``aim`` fixes, the others drawn."""
    fixed = dict(aim.fixed)
    return Features(**{f.name: fixed[f.name] if f.name in fixed else boolean(draw) for f in fields(Features)})


@hs.composite
def systems(draw: Draw, conventions: tuple[Conventions, ...]) -> tuple[Setup, Features]:
    """One fuzzed system's fixed shape and the caller behaviours its run uses."""
    setup, aim = draw(shapes(conventions))
    return setup, features_for(draw, aim)
