"""The block boundary (`mamba_state_copy_boundary`).

For a step whose running state covers tokens up to ``running_pos`` and whose
computed count becomes ``new_computed``, the last block boundary at or below
``new_computed`` is ``aligned``. It is published when it is not behind the
running state; ``bias`` counts the tokens from the running state to it, and
``dst_col`` is the block column that ends there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .vocab import cdiv


@dataclass(frozen=True)
class Boundary:
    """The boundary decision of one row."""

    needs_copy: Any
    bias: Any
    dst_col: Any
    aligned: Any


def mamba_state_copy_boundary(running_pos: Any, new_computed: Any, block_size: Any) -> Boundary:
    """``aligned = (new_computed / bs) * bs`` (C division), published when ``aligned >= running_pos``."""
    aligned = cdiv(new_computed, block_size) * block_size
    return Boundary(
        needs_copy=aligned >= running_pos,
        bias=aligned - running_pos,
        dst_col=cdiv(aligned, block_size) - 1,
        aligned=aligned,
    )
