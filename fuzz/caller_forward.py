"""The forward pass as the callers see it after a step: FlashInfer's view of each live slot, and the prefix cache.

:func:`advance` moves each scheduled request on (its computed tokens, ring
start and checkpoint position by FlashInfer's own rule, independently of the
host mirror under test) and publishes the blocks whose boundary the step
crossed, as the scheduler's prefix cache does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.flashinfer import executed_rows, kernel_checkpoints, kernel_window_after
from replayssm.spec.postprocess import running_position

if TYPE_CHECKING:
    from .callers import Callers


def advance(callers: Callers, batch_rows: list) -> None:
    """The forward pass (FlashInfer's view) and the scheduler's bookkeeping."""
    bs, W, R = callers.geo.block_size, callers.geo.window, callers.geo.ring_len
    for row in batch_rows:
        if row is None:
            continue
        r, plan = row
        before = r.computed
        if plan.prefilling:
            r.computed = before + plan.query_len
            r.ring_start, r.checkpoint_pos = 0, r.computed
            callers.saw("multi-column prefill reset", callers.align and plan.live_col > before // bs)
        else:
            pnat = before - r.checkpoint_pos
            width = executed_rows(plan.query_len, callers.setup.executed_width)
            if kernel_checkpoints(pnat, width, W):
                callers.saw("ring wrap", r.ring_start + pnat >= R)
                callers.saw("checkpoint")
                plan.checkpointed = True
            r.ring_start, committed = kernel_window_after(r.ring_start, pnat, width, plan.accepted, W, R)
            r.computed = before + plan.accepted
            r.checkpoint_pos = r.computed - committed
        r.live_col = plan.live_col
        callers.saw("table full", r.computed == callers.setup.max_model_len)
        running = running_position(plan.prefilling, r.computed, plan.accepted)
        boundary = mamba_state_copy_boundary(running, r.computed, bs)
        if callers.align and boundary.needs_copy and boundary.dst_col >= 0:
            dst, aligned = boundary.dst_col, boundary.aligned
            slots = [cols[dst] for cols in r.cols]
            if dst == r.live_col:
                r.ring_start, r.checkpoint_pos = 0, aligned
                callers.saw("live == destination publish")
            if not plan.prefilling:
                callers.saw("boundary with checkpoint" if plan.checkpointed else "boundary without checkpoint")
            if r.rid in callers.lost:  # its state in some group is lost: no prefix to register
                callers.saw("boundary of a request whose state is lost")
            elif all(s != callers.geo.pad_slot for s in slots):
                callers.published.setdefault((r.stream, dst), slots)
            else:
                callers.saw("null destination")
