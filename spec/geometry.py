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


def require_int(name: str, value: Any, lo: int, hi: int | None = None) -> None:
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
        """``align`` when prefixes are published, else ``none``."""
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
