"""Generation B (B1-B3): per cache group, slots bounded by the tracker capacity.

From the versions' ``_ReplaySSMGroupContext``: kernels take ``tracker_capacity``
(the trackers' length) and ``num_reqs``. ``reset_new_slots``: grid
``(num_reqs,)`` in B1, ``(max_num_reqs,)`` in B2/B3 (the versions without the
separate compaction kernel). ``postprocess``: grid ``(max_num_reqs,)``,
``live_cols`` always a tensor (the caller passes column 0 explicitly in mode
none); B1 then compacts; B2/B3 take the caller's ``materialize_dst_cols``
(-1: none) and ``materialize_token_counts`` per row and build the work list in
program 0. Then one FlashInfer materialize per group.
"""

from .api import Api, Launch, Phase
from .roles import GROUP, MIGRATION_ROW, POSTPROCESS_ROW, GenerationRole, RoleFrame, RoleLaunch, SharedRole

LIVE = {"live_cols": "live_cols_required"}

ROLES = (
    GenerationRole("B.postprocess", "postprocess", ("_postprocess_replayssm_kernel",),
                   RoleLaunch(POSTPROCESS_ROW, GROUP, padded=True),
                   frame=RoleFrame(work_list_program=0)),
    GenerationRole("B.migration", "migration", ("_reset_new_replayssm_slots_kernel",),
                   RoleLaunch(MIGRATION_ROW, GROUP, padded=True)),
    SharedRole("compaction"),
)
"""B's kernel roles: B2/B3's postprocess builds the work list in program 0
(its frame); B1 compacts with the reference API's kernel. Both kernels run on
a grid of ``max_num_reqs`` rows (``padded``: their padding programs are
proved), but for B1's reset, launched on ``num_reqs`` rows: its padding
programs are proved too, a stronger claim than its launch needs."""

API = Api(
    name="B",
    summary="per cache group; tracker-capacity checks, max_num_reqs-wide grid",
    scope="group",
    signature={"_postprocess_replayssm_kernel": ("block_table", "tracker_start", "tracker_capacity", "num_reqs")},
    phases={
        "migrate": Phase((Launch("_reset_new_replayssm_slots_kernel", ("max_num_reqs",),
                                 grid_if_defined=("_compact_replayssm_requests_kernel", ("num_reqs",))),),
                         materialize=None),
        "postprocess": Phase((
            Launch("_postprocess_replayssm_kernel", ("max_num_reqs",), inputs=LIVE),
            Launch("_compact_replayssm_requests_kernel", (1,), when="MATERIALIZE_PREFIXES",
                   if_defined="_compact_replayssm_requests_kernel"),
        ), materialize="plan"),
    },
    work_list=True,
    roles=ROLES,
)

