"""Generation A (A1-A5): one context per cache group; the kernel derives the boundary.

From the versions' ``_ReplaySSMGroupContext``: ``reset_new_slots`` launches the
reset kernel on grid ``(num_reqs,)`` with the caller's old and new live column
per request (``src_cols``/``dst_cols``); ``postprocess`` launches the
postprocess kernel on grid ``(num_reqs,)`` with the step metadata, the
per-row ``is_prefilling`` and the per-request ``live_cols`` (None: column 0),
then, in align mode, the one-program compaction (``BLOCK_SIZE`` the next power
of two of ``max_num_reqs``; A5 also stores the count in ``num_active``), then
one FlashInfer materialize per group. A3's ``rand_seeds``, A4/A5's
``EXECUTED_QUERY_WIDTH`` (the mixer's executed width; 0 when unset, as the
host passes for Mamba2 layers) and A5's ``GDN_STP`` (False for Mamba2 layers)
are bound by name.
"""

from .api import Api, Launch, Phase
from .contract import A_MODES, EXECUTED_WIDTH_PASSED, LaunchContract
from .roles import (
    GROUP, MIGRATION_ROW, POSTPROCESS_ROW, DeclaredOutput, GenerationRole, RoleFrame, RoleLaunch, SharedRole,
)

ROLES = (
    GenerationRole("A.postprocess", "postprocess", ("_postprocess_replayssm_kernel",),
                   RoleLaunch(POSTPROCESS_ROW, GROUP, live_col_is_zero=True),
                   frame=RoleFrame(outputs=(DeclaredOutput("rand_seeds", program=0),))),
    GenerationRole("A.migration", "migration", ("_reset_new_replayssm_slots_kernel",),
                   RoleLaunch(MIGRATION_ROW, GROUP)),
    SharedRole("compaction"),
)
"""A's kernel roles: the per-group postprocess and reset over the reference
caller's row, bound by name; its compaction is the reference API's kernel.
The postprocess also declares A3's extra output: program 0 increments each of
the ``rand_seeds`` (``NUM_RAND_SEEDS`` of them), a write of the launch, not of
the lifecycle state."""

API = Api(
    name="A",
    summary="per cache group; destination column and flush count derived in the kernel",
    scope="group",
    signature={"_postprocess_replayssm_kernel": ("block_table", "tracker_start", "live_cols", "NUM_LAYERS",
                                                 "LIVE_COL_IS_ZERO")},
    phases={
        "migrate": Phase((Launch("_reset_new_replayssm_slots_kernel", ("num_reqs",)),), materialize=None),
        "postprocess": Phase((
            Launch("_postprocess_replayssm_kernel", ("num_reqs",)),
            Launch("_compact_replayssm_requests_kernel", (1,), when="MATERIALIZE_PREFIXES"),
        ), materialize="plan"),
    },
    work_list=True,
    roles=ROLES,
    contract=LaunchContract(modes=A_MODES, executed_width=EXECUTED_WIDTH_PASSED),
)

