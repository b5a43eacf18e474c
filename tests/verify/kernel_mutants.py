"""One-line changes to copies of our kernels (``impl/kernels.py``), loaded as modules.

Each :class:`Mutant` names the snippet it replaces (which must occur exactly
once, so a kernel edit that removes it fails loudly instead of planting
nothing) and the kernel obligation that must catch it.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

KERNELS_FILE = Path(__file__).resolve().parents[2] / "impl" / "kernels.py"


@dataclass(frozen=True)
class Mutant:
    """A planted bug: ``old`` becomes ``new``; ``caught_by`` is ``role.property``."""

    name: str
    old: str
    new: str
    caught_by: str
    verdict: str = ""
    case: str = ""
    """The variant whose proof must fail (the row-blocked kernel's teeth name one)."""


MUTANTS = [
    Mutant("prefill reset one column past the row",
           "last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)",
           "last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE), 0)", "postprocess.memory_safety"),
    Mutant("first_col off by one", "first_col = computed_before // MAMBA_BLOCK_SIZE",
           "first_col = tl.cdiv(computed_before, MAMBA_BLOCK_SIZE)", "postprocess.equivalence",
           "prefill_chunk_on_boundary"),
    Mutant("store one past the active list", "mask=in_capacity & (lane >= count))",
           "mask=(lane <= MAX_NUM_REQS) & (lane >= count))", "compaction.memory_safety"),
    Mutant("the plan written by every group", "tl.store(plan_flush_count + batch, plan_flush, mask=writes_plan)",
           "tl.store(plan_flush_count + batch, plan_flush)", "postprocess.conflicts"),
    Mutant("pointer-table load without its mask",
           "dst_slot = tl.load(block_table_row + dst_col, mask=wants_materialize, other=PAD_SLOT_ID)",
           "dst_slot = tl.load(block_table_row + dst_col)", "postprocess.memory_safety"),
    Mutant("read of another row's live column", "live_col = tl.load(live_cols + req)",
           "live_col = tl.load(live_cols + batch)", "postprocess.equivalence"),
    Mutant("checkpoint wraps at the window, not the ring", "(old_start + old_committed) % RING_BUFFER_LEN",
           "(old_start + old_committed) % LOGICAL_WINDOW", "postprocess.equivalence"),
    Mutant("packed entry one row late", "entry = layer * MAX_NUM_REQS + batch",
           "entry = layer * MAX_NUM_REQS + batch + 1", "postprocess.memory_safety"),
    Mutant("boundary computed through an overflowing product", "aligned = (new_num_computed // block_size) * block_size",
           "aligned = (new_num_computed * block_size) // block_size // block_size * block_size", "postprocess.int32"),
    Mutant("migration resets a fresh destination to 1", "start = tl.load(ring_start + src_slot, mask=valid_src, other=0)",
           "start = tl.load(ring_start + src_slot, mask=valid_src, other=1)", "migration.equivalence"),
    Mutant("migration reads a padding row's column", "dst_col = tl.load(dst_cols + req, mask=valid_req, other=-1)",
           "dst_col = tl.load(dst_cols + req)", "migration.memory_safety"),
    Mutant("compaction position inclusive", "tl.store(active_request_indices + running_count - 1, lane, mask=is_active)",
           "tl.store(active_request_indices + running_count, lane, mask=is_active)", "compaction.memory_safety"),
    Mutant("compaction leaves the entry at the count", "mask=in_capacity & (lane >= count))",
           "mask=in_capacity & (lane > count))", "compaction.equivalence"),
    Mutant("compaction lanes all land on the count", "tl.store(active_request_indices + running_count - 1, lane, mask=is_active)",
           "tl.store(active_request_indices + lane * 0 + count - 1, lane, mask=is_active)", "compaction.conflicts"),
    Mutant("compaction scales the plan into an overflow", "is_active = in_capacity & (lane < num_reqs) & (flush >= 0)",
           "is_active = in_capacity & (lane < num_reqs) & (flush * 65536 * 32768 >= 0)", "compaction.int32"),
    Mutant("migration scales the request into an overflow", "valid_req = req >= 0",
           "valid_req = req * 65536 * 32768 >= 0", "migration.int32"),
    Mutant("migration writes the source's trackers", "tl.store(num_committed + dst_slot, committed, mask=changed)",
           "tl.store(num_committed + src_slot, committed, mask=changed)", "migration.conflicts"),
    Mutant("postprocess clears the first plan row", "tl.store(plan_ring_start + batch, 0, mask=writes_plan)",
           "tl.store(plan_ring_start + 0, 0, mask=writes_plan)", "postprocess.frame"),
    Mutant("migration resets slot 0's count", "tl.store(num_committed + dst_slot, committed, mask=changed)",
           "tl.store(num_committed + 0 * dst_slot, committed, mask=changed)", "migration.frame"),
    Mutant("compaction pads the plan instead of the list", "tl.store(active_request_indices + lane, -1, mask=in_capacity & (lane >= count))",
           "tl.store(plan_flush_count + lane, -1, mask=in_capacity & (lane >= count))", "compaction.frame"),
]


def load_mutant(m: Mutant, folder: Path | None = None) -> tuple[ModuleType, Path]:
    """A copy of our kernels with ``m`` planted, imported from its own file."""
    source = KERNELS_FILE.read_text()
    assert source.count(m.old) == 1, f"{m.name}: the snippet occurs {source.count(m.old)} times in impl/kernels.py"
    folder = folder or Path(tempfile.mkdtemp(prefix="kernel_mutant_"))
    stem = "mutant_" + "".join(c if c.isalnum() else "_" for c in m.name)
    path = folder / f"{stem}.py"
    path.write_text(source.replace(m.old, m.new))
    spec = importlib.util.spec_from_file_location(stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[stem] = module
    spec.loader.exec_module(module)
    return module, path
