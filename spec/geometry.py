"""Compile-time parameters of the worker kernels.

:class:`Geometry` holds the numeric constexprs, :class:`Conventions` the five
boolean ones that select how the postprocess kernel reads its inputs. Both are
plain records of Python ints and bools in every interpreter (the proofs too:
constexprs stay concrete so the Z3 problems stay linear, and the programs
branch on the conventions in Python, as Triton does at compile time).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from itertools import product
from typing import Any

NULL_BLOCK_ID = 0
"""vLLM's null block; the pad id every worker kernel compares slots against."""

MAX_WINDOW_LIMIT = 16
"""FlashInfer's largest supported logical window."""

CACHE_MODES = ("none", "align", "all")
"""vLLM's Mamba cache modes (``mamba_cache_mode``). The kernels never see the
mode, only :class:`Conventions`' flags; which flags a mode sets is the
version's host's choice (``all`` publishes prefixes under A1-era hosts, not
under the reference's and A3's). The caller rules the mode decides are the
functions below; ``docs/assumptions.md`` "Cache modes" says which evidence
each rests on."""


def check_cache_mode(mode: object, conv: "Conventions") -> str:
    """``mode`` if it is a cache mode the flags ``conv`` can serve, else a
    ``ValueError`` naming ``cache_mode`` and the allowed values: ``none``
    never publishes, ``align`` always does, and ``all`` moves its live
    column, so it cannot run with ``LIVE_COL_IS_ZERO``."""
    if mode not in CACHE_MODES:
        raise ValueError(f"cache_mode must be one of {', '.join(CACHE_MODES)}, got {mode!r}")
    allowed = {"none": not conv.materialize_prefixes, "align": conv.materialize_prefixes,
               "all": not conv.live_col_is_zero}[mode]
    if not allowed:
        need = {"none": "materialize_prefixes off", "align": "materialize_prefixes on",
                "all": "live_col_is_zero off (its live column moves)"}[mode]
        raise ValueError(f"cache_mode {mode!r} needs conventions with {need}, got {conv.label()}")
    return mode


def moves_live_column(mode: str) -> bool:
    """The live column is the block of the last scheduled token (``align``,
    ``all``: T1 runs ``all`` with live column 1), not column 0 (``none``)."""
    return mode != "none"


def has_prefix_cache(mode: str) -> bool:
    """The scheduler's prefix cache registers blocks and serves hits (not in ``none``)."""
    return mode != "none"


def chunks_on_boundary(mode: str) -> bool:
    """Prefill chunks are scheduled on block boundaries (``align``'s purpose,
    vLLM #30877); ``all``'s prefill writes every boundary it crosses, so a
    chunk may start and end anywhere, as in ``none``."""
    return mode == "align"


def prefill_writes_every_boundary(mode: str) -> bool:
    """A prefill chunk leaves the state at every block boundary it crosses
    in that block, a block it starts inside included (``all``: D1-D3's
    prefill reset says so); ``align``'s leaves it in the blocks it covers
    whole (model choice ``prefill_writes_covered_block_states``)."""
    return mode == "all"


def require_int(name: str, value: object, lo: int, hi: int | None = None) -> None:
    """A ``ValueError`` naming ``name`` and the range ``[lo, hi]`` unless ``value`` is an int in it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int in [{lo}, {hi if hi is not None else 'inf'}], got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name} must be in [{lo}, {hi if hi is not None else 'inf'}], got {value}")


@dataclass(frozen=True)
class Geometry:
    """Numeric constexprs: ``MAX_NUM_REQS``, ``MAMBA_BLOCK_SIZE``,
    ``LOGICAL_WINDOW`` (W), ``RING_BUFFER_LEN`` (R), ``PAD_SLOT_ID``."""

    max_num_reqs: Any
    block_size: Any
    window: Any
    ring_len: Any
    pad_slot: Any = NULL_BLOCK_ID

    def validated(self) -> "Geometry":
        """This geometry, after checking the ranges the kernels support."""
        require_int("max_num_reqs", self.max_num_reqs, 1)
        require_int("block_size", self.block_size, 1)
        require_int("window", self.window, 1, MAX_WINDOW_LIMIT)
        require_int("ring_len", self.ring_len, self.window + 1)
        require_int("pad_slot", self.pad_slot, 0)
        return self

    @property
    def max_step(self) -> Any:
        """The longest decode row the ring holds beside a full window: ``R - W``."""
        return self.ring_len - self.window


@dataclass(frozen=True)
class Conventions:
    """The postprocess kernel's boolean constexprs, in signature order."""

    cumulative: bool
    post_step: bool
    has_idx_mapping: bool
    materialize_prefixes: bool
    live_col_is_zero: bool

    @classmethod
    def all(cls) -> list["Conventions"]:
        """All 32 combinations."""
        return [cls(*flags) for flags in product((False, True), repeat=5)]

    @property
    def mode(self) -> str:
        """The cache mode these flags serve when none is named: ``align``
        when prefixes are published, else ``none`` (``all`` is a world's
        choice: ``SystemParams.cache_mode``)."""
        return "align" if self.materialize_prefixes else "none"

    def label(self) -> str:
        """A short stable name, e.g. ``cum/post/map/align/live``."""
        parts = [
            "cum" if self.cumulative else "len",
            "post" if self.post_step else "pre",
            "map" if self.has_idx_mapping else "nomap",
            self.mode,
            "col0" if self.live_col_is_zero else "live",
        ]
        return "/".join(parts)

    def as_constexprs(self) -> dict[str, bool]:
        """The kernel's keyword names for these flags."""
        names = (
            "QUERY_METADATA_IS_CUMULATIVE",
            "NUM_COMPUTED_IS_POST_STEP",
            "HAS_IDX_MAPPING",
            "MATERIALIZE_PREFIXES",
            "LIVE_COL_IS_ZERO",
        )
        return {n: getattr(self, f.name) for n, f in zip(names, fields(self))}
