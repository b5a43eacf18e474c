"""Generation C (C1-C2): per cache group, a preprocess and a postprocess kernel.

From the versions' ``_ReplaySSMGroupContext``: before the forward pass,
``preprocess`` (grid ``(max_num_reqs,)``) takes the caller's old and new live
column per request and the step metadata with the *pre-step* computed count
(the kernel has no post-step flag), plans an exact copy of a moved live slot
and resets prefill-touched slots; ``group.materialize()`` then executes that
plan. After it, ``postprocess`` (grid ``(max_num_reqs,)``, no computed count)
commits the live slot and plans the prefix snapshot from the caller's
``materialize_dst_cols`` and ``materialize_token_counts`` (C2 also
``materialize_src_cols``: the live column of a row with work, else -1), then
``group.materialize()`` again.
"""

from .api import Api, Launch, Phase
from .contract import SCHEDULED_COLUMNS_ALLOCATED, LaunchContract
from .roles import GROUP, POSTPROCESS_ROW, GenerationRole, RoleFrame, RoleLaunch

LIVE = {"live_cols": "live_cols_required"}

WORK_LIST_IN_PROGRAM_0 = RoleFrame(work_list_program=0)

ROLES = (
    GenerationRole("C.preprocess", "preprocess", ("_preprocess_replayssm_kernel",),
                   RoleLaunch(POSTPROCESS_ROW, GROUP, inputs={"num_computed_tokens": "num_computed_before"},
                              post_step=False, moves=True, padded=True), frame=WORK_LIST_IN_PROGRAM_0),
    GenerationRole("C.postprocess", "postprocess", ("_postprocess_replayssm_kernel",),
                   RoleLaunch(POSTPROCESS_ROW, GROUP, post_step=False, padded=True), frame=WORK_LIST_IN_PROGRAM_0),
)
"""C's kernel roles: both kernels plan per row and build the work list in
program 0, on a grid of ``max_num_reqs`` rows (``padded``)."""

API = Api(
    name="C",
    summary="per cache group; separate preprocess and postprocess kernels",
    scope="group",
    signature={"_preprocess_replayssm_kernel": ("src_cols", "dst_cols", "block_table"),
               "_postprocess_replayssm_kernel": ("materialize_dst_cols",)},
    phases={
        "migrate": Phase((Launch("_preprocess_replayssm_kernel", ("max_num_reqs",),
                                 inputs={"num_computed_tokens": "num_computed_before"}),), materialize="plan"),
        "postprocess": Phase((Launch("_postprocess_replayssm_kernel", ("max_num_reqs",), inputs=LIVE),),
                             materialize="plan"),
    },
    work_list=True,
    roles=ROLES,
    contract=LaunchContract(rows=(SCHEDULED_COLUMNS_ALLOCATED,)),
)

