"""The reference's entry points with the row-blocked postprocess: a selectable
implementation (``replayssm-verify fuzz --impl replayssm.impl.replayssm_utils_blocked``).

* Context level: ``ReplaySSMModelContext`` is :class:`RowBlockedModelContext`
  (a row block per program, the compaction in the same launch).
* Kernel level: ``_postprocess_replayssm_kernel`` takes the reference kernel's
  grid and arguments and launches the row-blocked kernel with
  ``KERNEL_LEVEL_ROWS_PER_PROGRAM`` rows per program and the compaction left
  to ``_compact_replayssm_requests_kernel``, so the fuzzer's launches span
  several programs with a partly masked last one.

Everything else is :mod:`replayssm.impl.replayssm_utils`.
"""

from __future__ import annotations

from collections.abc import Callable

import triton

from . import replayssm_utils as _reference_facade
from .context_blocked import RowBlockedModelContext as ReplaySSMModelContext
from .kernels_blocked import postprocess_replayssm_blocked_kernel
from .replayssm_utils import (
    NULL_BLOCK_ID,
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaBase,
    MambaConfig,
    MambaSpec,
    _compact_replayssm_requests_kernel,
    _load_replayssm_materialize,
    _reinterpret_u64_as_i64,
    _ReplaySSMMaterializeTables,
    _reset_new_replayssm_slots_kernel,
    extract_layer_index,
    get_replayssm_block_copy_tensors,
    initialize_replayssm_ring_trackers,
    mamba_state_copy_boundary,
)

KERNEL_LEVEL_ROWS_PER_PROGRAM = 2


class _RowBlockedLaunch:
    """``kernel[(num_reqs, groups)](*reference_args, **constexprs)`` for the
    row-blocked kernel (the reference's 15 positional arguments)."""

    def __init__(self, rows_per_program: int) -> None:
        self.rows_per_program = rows_per_program

    def __getitem__(self, grid: tuple[int, int]) -> Callable[..., None]:
        num_reqs, groups = grid
        rows = self.rows_per_program

        def launch(*args: object, **constexprs: object) -> None:
            plan_and_tables, tables_tail = args[:13], args[13:]
            postprocess_replayssm_blocked_kernel[(triton.cdiv(num_reqs, rows), groups)](
                *plan_and_tables, None, *tables_tail, num_reqs,
                **constexprs, ROWS_PER_PROGRAM=rows, COMPACT=False, COMPACT_BLOCK=1,
            )

        return launch


_postprocess_replayssm_kernel = _RowBlockedLaunch(KERNEL_LEVEL_ROWS_PER_PROGRAM)

__all__ = list(_reference_facade.__all__)  # its names; ReplaySSMModelContext and the postprocess kernel rebound here
