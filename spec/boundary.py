"""The block boundary (`mamba_state_copy_boundary`).

For a step whose running state covers tokens up to ``running_pos`` and whose
computed count becomes ``new_computed``, the last block boundary at or below
``new_computed`` is ``aligned``. It is published when it is not behind the
running state; ``bias`` counts the tokens from the running state to it, and
``dst_col`` is the block column that ends there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocab import Cond, Value, cdiv


@dataclass(frozen=True)
class Boundary:
    """The boundary decision of one row."""

    needs_copy: Cond
    bias: Value
    dst_col: Value
    aligned: Cond


def mamba_state_copy_boundary(running_pos: Value, new_computed: Value, block_size: Value) -> Boundary:
    """``aligned = (new_computed / bs) * bs`` (C division), published when ``aligned >= running_pos``."""
    aligned = cdiv(new_computed, block_size) * block_size
    return Boundary(
        needs_copy=aligned >= running_pos,
        bias=aligned - running_pos,
        dst_col=cdiv(aligned, block_size) - 1,
        aligned=aligned,
    )
