"""Generation D (D1-D3): one model-wide context over every cache group.

From the versions' ``ReplaySSMModelContext``: grid ``(max_num_reqs,
num_groups)``; each program loads its group's block table and trackers from
int64 pointer tables (``block_table_ptrs``, ``tracker_ring_start_ptrs``,
``tracker_num_committed_ptrs``), bounds slots by ``tracker_capacities``, and
writes its group's layers ``group_layer_offsets[g]..[g+1]`` of the
``[num_layers, max_num_reqs]`` plan tables. Before the forward pass, D1's
``reset_new_slots`` launches the model-wide reset kernel; D2's
``materialize_reassigned_slots`` / D3's ``copy_reassigned_slots`` launch the
copy kernel into the ``precopy`` plan and materialize it (align mode). After
it, the model-wide postprocess takes per row ``materialize_src_cols``,
``materialize_dst_cols``, ``materialize_token_counts`` and the block size,
then one FlashInfer call materializes every layer (D1/D2 in align mode, D3
always; a mode-none plan has no work). There is no work list.
"""

from .api import Api, Launch, Phase
from .contract import QUERY_START_LOC_NON_DECREASING, LaunchContract
from .roles import MIGRATION_ROW, MODEL, POSTPROCESS_ROW, GenerationRole, RoleLaunch

GRID = ("max_num_reqs", "num_groups")

ROLES = (
    GenerationRole("D.postprocess", "postprocess", ("_postprocess_replayssm_modelwide_kernel",),
                   RoleLaunch(POSTPROCESS_ROW, MODEL, padded=True)),
    GenerationRole("D.migration", "migration", ("_reset_new_replayssm_slots_kernel",),
                   RoleLaunch(MIGRATION_ROW, MODEL, padded=True)),
    GenerationRole("D.copy", "copy", ("_copy_reassigned_replayssm_slots_kernel",),
                   RoleLaunch(MIGRATION_ROW, MODEL, padded=True)),
)
"""D's kernel roles: model-wide programs ``(batch, group)`` over pointer
tables, on a grid of ``max_num_reqs`` rows (``padded``)."""

API = Api(
    name="D",
    summary="one model-wide context; (max_num_reqs, num_groups) grid over per-group pointer tables",
    scope="model",
    signature={"_postprocess_replayssm_modelwide_kernel": ("block_table_ptrs", "group_layer_offsets")},
    phases={
        "migrate": Phase((
            Launch("_reset_new_replayssm_slots_kernel", GRID, scope="model",
                   if_defined="_reset_new_replayssm_slots_kernel"),
            Launch("_copy_reassigned_replayssm_slots_kernel", GRID, scope="model", plan="precopy",
                   if_defined="_copy_reassigned_replayssm_slots_kernel", when="MATERIALIZE_PREFIXES"),
        ), materialize="precopy"),
        "postprocess": Phase((Launch("_postprocess_replayssm_modelwide_kernel", GRID, scope="model",
                                     inputs={"live_cols": "live_cols_required"}),), materialize="plan"),
    },
    work_list=False,
    roles=ROLES,
    contract=LaunchContract(rows=(QUERY_START_LOC_NON_DECREASING,)),
    plans=("plan", "precopy"),
)

