"""A kernel program beside its spec program, on one symbolic memory.

For each worker kernel the spec's own scenario (``verify.scenarios``) builds
the spec program over symbolic buffers with every caller assumption; the
kernel then runs on a second ``SymbolicMemory`` over the *same* initial
arrays and program ids, through a contract (:mod:`.contracts`) that maps each
parameter to the spec buffer it points at. Everything the spec proofs assume
about memory therefore constrains the kernel's inputs, and the two final
memories are comparable cell by cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replayssm.spec.compaction import compact_program
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.launch import next_power_of_2
from replayssm.spec.vocab import INT32_MAX, INT32_MIN

from ..memory import SymbolicMemory
from ..scenarios import MigrationCase, PostprocessCase, memory_facts, migration_case, postprocess_case
from ..terms import Fact, Sym, Symbolic, named_int
from .contracts import ABSENT, BufferArg, PointerTable, ProgramLaunch, ScalarArg, StrideTable
from .evaluator import KernelRun, run_program
from .kmemory import KernelMemory
from .source import Unsupported, is_constexpr, source_of

if TYPE_CHECKING:
    from .source import Jit


@dataclass
class KernelCase:
    """One program of one kernel variant, with the spec program it must equal."""

    kernel: str
    label: str
    spec_mem: SymbolicMemory
    run: KernelRun
    assumptions: list[Fact]
    cover: Symbolic
    show: dict
    spec: Any = None
    """The role's own spec program beside the kernel (a ``verify.scenarios`` case, a compaction trace,
    None): each role's code reads its own kind, so to the type checker it is ``Any``."""
    constexprs: dict = field(default_factory=dict)
    block: Any = None
    """The spec rows of a row-blocked program (a ``blocked.BlockSpec``; None: not row-blocked). ``Any`` to
    the type checker: the row-blocked obligations read it where they know it is set."""
    required: tuple = ()
    """Behavioural assumptions this case's equivalence needs as a precondition
    of the kernel's contract (not reported as optional)."""
    row: tuple = ()
    """``(batch, group)`` of the batch row this program owns (its frame); empty: no row."""
    padding: bool = False
    """Whether the program is a padding program (its row past ``num_reqs``): its frame holds no tracker."""

    @property
    def mem(self) -> SymbolicMemory:
        return self.run.mem


def table_shapes(shapes: dict) -> dict[str, tuple]:
    """The per-group address and stride tables beside the spec's buffers."""
    groups = shapes["block_table"][0]
    names = ("block_table_ptrs", "tracker_start_ptrs", "tracker_committed_ptrs", "src_slots_ptrs",
             "dst_slots_ptrs", "block_table_strides")
    return {n: (groups,) for n in names}


def per_group_tables(spec_mem: SymbolicMemory) -> dict[str, PointerTable | StrideTable]:
    """The roles of the per-group tables: addresses of each group's block
    table and tracker rows, of its first packed entry, and the block table's row stride."""
    num_cols = spec_mem.shapes["block_table"][2]

    def packed(buffer: str) -> PointerTable:
        return PointerTable(f"{buffer}_ptrs", buffer, lambda g: (spec_mem.initial("packed_base", (g,)),), 0)

    return {
        "block_table_ptrs": PointerTable("block_table_ptrs", "block_table", lambda g: (g, 0, 0), 1),
        "tracker_start_ptrs": PointerTable("tracker_start_ptrs", "ring_start", lambda g: (g, 0), 1),
        "tracker_committed_ptrs": PointerTable("tracker_committed_ptrs", "num_committed", lambda g: (g, 0), 1),
        "src_slots_ptrs": packed("src_slots"),
        "dst_slots_ptrs": packed("dst_slots"),
        "block_table_strides": StrideTable("block_table_strides", "block_table", 1, lambda g: num_cols),
    }


def kernel_memory(spec_mem: SymbolicMemory, program: str) -> SymbolicMemory:
    """A memory over the spec's initial arrays, with the tables added."""
    shapes = dict(spec_mem.shapes)
    if "block_table" in shapes:
        shapes.update(table_shapes(shapes))
    return KernelMemory(shapes, spec_mem.arrays, program)


def postprocess_launch(spec_mem: SymbolicMemory, conv: Conventions, geo: Geometry, program: str) -> ProgramLaunch:
    t = per_group_tables(spec_mem)
    args = [
        BufferArg("idx_mapping") if conv.has_idx_mapping else ABSENT,
        BufferArg("query_metadata"), BufferArg("num_computed_tokens"), BufferArg("num_accepted_tokens"),
        BufferArg("is_prefilling", "i1"), BufferArg("live_cols"),
        t["block_table_ptrs"], t["tracker_start_ptrs"], t["tracker_committed_ptrs"],
        t["src_slots_ptrs"], t["dst_slots_ptrs"],
        BufferArg("plan_ring_start"), BufferArg("plan_flush_count"), t["block_table_strides"], BufferArg("num_layers"),
    ]
    constexprs = {"MAX_NUM_REQS": geo.max_num_reqs, "MAMBA_BLOCK_SIZE": geo.block_size,
                  "LOGICAL_WINDOW": geo.window, "RING_BUFFER_LEN": geo.ring_len, "PAD_SLOT_ID": geo.pad_slot,
                  **conv.as_constexprs()}
    return ProgramLaunch(args, constexprs, (named_int(f"batch_{program}"), named_int(f"group_{program}")))


def migration_launch(spec_mem: SymbolicMemory, has_idx_mapping: bool, geo: Geometry, program: str) -> ProgramLaunch:
    t = per_group_tables(spec_mem)
    args = [BufferArg("idx_mapping") if has_idx_mapping else ABSENT, BufferArg("src_cols"), BufferArg("dst_cols"),
            t["block_table_ptrs"], t["tracker_start_ptrs"], t["tracker_committed_ptrs"], t["block_table_strides"]]
    constexprs = {"PAD_SLOT_ID": geo.pad_slot, "HAS_IDX_MAPPING": has_idx_mapping}
    return ProgramLaunch(args, constexprs, (named_int(f"batch_{program}"), named_int(f"group_{program}")))


COMPACTION_ARGS = {"plan_flush_count": "plan_flush_count", "active_request_indices": "active_request_indices",
                   "num_active_ptr": "num_active"}
"""The compaction kernel's pointer parameters by name, and the buffer each points at
(A5's ``num_active_ptr``: the count it also stores, a buffer the spec does not have)."""


def compaction_launch(jit: Jit, cap: int, num_reqs: Sym) -> ProgramLaunch:
    """The compaction kernel's arguments bound by parameter name (``num_reqs`` the count)."""
    src = source_of(jit)
    args = []
    for p in src.node.args.args:
        if is_constexpr(p):
            continue
        if p.arg not in COMPACTION_ARGS and p.arg != "num_reqs":
            raise Unsupported(f"compaction parameter {p.arg} (known: {', '.join(COMPACTION_ARGS)}, num_reqs)",
                              src.file, p.lineno)
        args.append(ScalarArg(num_reqs) if p.arg == "num_reqs" else BufferArg(COMPACTION_ARGS[p.arg]))
    return ProgramLaunch(args, {"MAX_NUM_REQS": cap, "BLOCK_SIZE": next_power_of_2(cap)}, (0,))


def run_kernel(jit: Jit, launch: ProgramLaunch, spec_mem: SymbolicMemory, program: str) -> KernelRun:
    """Run ``jit`` for ``launch`` on a memory sharing ``spec_mem``'s initial arrays."""
    return run_program(jit, launch, kernel_memory(spec_mem, program))


def postprocess_kernel_case(jit: Jit, conv: Conventions, geo: Geometry, label: str, *, program: str = "p",
                            spec: PostprocessCase | None = None) -> KernelCase:
    """The postprocess kernel's program ``(batch_<program>, group_<program>)``."""
    c = spec if spec is not None else postprocess_case(conv, geo, program=program)
    run = run_kernel(jit, postprocess_launch(c.mem, conv, geo, program), c.mem, program)
    facts = memory_facts(run.mem, geo, c.sizes)
    cover = c.trace.wants_materialize if conv.materialize_prefixes else c.trace.decode
    return KernelCase("postprocess", label, c.mem, run, c.assumptions + facts, cover, c.show(), c,
                      {**conv.as_constexprs(), "geometry": geo}, row=(c.trace.batch, c.trace.group))


def migration_kernel_case(jit: Jit, has_idx_mapping: bool, geo: Geometry, label: str, *, program: str = "p",
                          spec: MigrationCase | None = None) -> KernelCase:
    """The migration kernel's program ``(batch_<program>, group_<program>)``."""
    c = spec if spec is not None else migration_case(has_idx_mapping, geo, program=program)
    run = run_kernel(jit, migration_launch(c.mem, has_idx_mapping, geo, program), c.mem, program)
    facts = memory_facts(run.mem, geo, c.sizes)
    return KernelCase("migration", label, c.mem, run, c.assumptions + facts, c.trace.changed, c.show(), c,
                      {"HAS_IDX_MAPPING": has_idx_mapping, "geometry": geo}, row=(c.batch, c.group))


def compaction_kernel_case(jit: Jit, cap: int, label: str) -> KernelCase:
    """The compaction kernel's single program for capacity ``cap``."""
    num_reqs = named_int("num_reqs")
    spec_mem = SymbolicMemory({"plan_flush_count": (cap,), "active_request_indices": (cap,)}, {}, "spec")
    trace = compact_program(spec_mem, cap, num_reqs, next_power_of_2(cap))
    run = run_program(jit, compaction_launch(jit, cap, num_reqs),
                      KernelMemory({**spec_mem.shapes, "num_active": (1,)}, spec_mem.arrays, "p"))
    flush = {f"plan_flush_count[{i}]": spec_mem.initial("plan_flush_count", (i,)) for i in range(cap)}
    assume: list[Fact] = [("num_reqs_in_capacity", (num_reqs >= 0) & (num_reqs <= cap))]
    assume += [("int32_inputs", (v >= INT32_MIN) & (v <= INT32_MAX)) for v in flush.values()]
    return KernelCase("compaction", label, spec_mem, run, assume, trace.num_active >= 1,
                      {"num_reqs": num_reqs, **flush}, trace, {"MAX_NUM_REQS": cap})

