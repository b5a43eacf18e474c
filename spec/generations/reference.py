"""The reference API (``vllm.v1.worker.replayssm_utils``; ours in ``replayssm.impl``).

Grid ``(num_reqs, num_groups)`` for the migration and postprocess kernels,
per-group int64 pointer tables for block tables and trackers, per-group
pointers into the packed ``[layer, batch]`` src/dst tables with their
``num_layers``, per-group block-table strides; compaction in align mode; one
FlashInfer materialize for all layers. This API also has a spec program, so
``fuzz`` compares it buffer by buffer; ``review`` judges it at the lifecycle
level like any generation.
"""

from .api import Api, Launch, Phase
from .roles import SharedRole

ROLES = (SharedRole("postprocess"), SharedRole("migration"), SharedRole("compaction"))
"""The reference API's roles, each beside its spec program (``verify/kernels/registry.py``)."""

GRID = ("num_reqs", "num_groups")

API = Api(
    name="reference",
    summary="model-wide, (num_reqs, num_groups) grid, packed per-group slot tables (the spec's API)",
    scope="packed",
    signature={"_postprocess_replayssm_kernel": ("block_table_ptrs", "src_slots_ptrs", "num_layers")},
    phases={
        "migrate": Phase((Launch("_reset_new_replayssm_slots_kernel", GRID, scope="model"),), materialize=None),
        "postprocess": Phase((
            Launch("_postprocess_replayssm_kernel", GRID, scope="model"),
            Launch("_compact_replayssm_requests_kernel", (1,), scope="model", when="MATERIALIZE_PREFIXES"),
        ), materialize="plan"),
    },
    work_list=True,
    roles=ROLES,
)

