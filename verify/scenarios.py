"""Symbolic launches: the spec's programs run on Z3 terms, with their assumptions.

A scenario is one program (or two, for race obligations) of a launch over
symbolic geometry, symbolic buffers and a symbolic ghost row, together with
every named assumption that ties them together. Obligations pick the parts
they need from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from replayssm.spec import assumptions as env
from replayssm.spec import row_assumptions  # MAX_MODEL_LEN_LIMIT, read when asked (a teeth test plants another)
from replayssm.spec.assumptions import GhostRow, encode_row
from replayssm.spec.flashinfer import tracker_in_range
from replayssm.spec.geometry import Conventions, Geometry, check_cache_mode
from replayssm.spec.migration import MigrationTrace, migrate_program
from replayssm.spec import postprocess as postprocess_spec
from replayssm.spec.postprocess import PostprocessTrace, RowStep, postprocess_program
from replayssm.spec.vocab import INT32_MAX, INT32_MIN, Cond, conj, implies, negate

from .memory import SymbolicMemory
from .terms import Fact, Sym, Symbolic, named_bool, named_int, recording

INVARIANT_TRACKER_RANGE = "inv.tracker_range"
INVARIANT_LIVE_REFINES = "inv.live_slot_refines_request"


@dataclass(frozen=True)
class Sizes:
    """Symbolic launch and allocation sizes."""

    num_reqs: Sym
    groups: Sym
    num_slots: Sym
    num_cols: Sym
    total_layers: Sym
    max_model_len: Sym


GEOMETRIES: dict[str, Geometry] = {
    "vllm": Geometry(max_num_reqs=256, block_size=2048, window=16, ring_len=20),
    "pow2": Geometry(max_num_reqs=8, block_size=16, window=8, ring_len=16),
    "odd": Geometry(max_num_reqs=3, block_size=3, window=3, ring_len=5),
    "unit": Geometry(max_num_reqs=2, block_size=1, window=1, ring_len=2),
}
"""The constexpr geometries every per-kernel obligation is proved for.

Everything else (positions, row lengths, trackers, slot ids, table contents,
batch and group indices, sizes) is symbolic. Constexprs are concrete because a
symbolic divisor makes the arithmetic nonlinear, which Z3 does not decide in
reasonable time; the set covers vLLM's non-power-of-two ring (W=16, T=4,
R=20), a power-of-two ring, odd block sizes and rings, and the degenerate
W = 1, block size 1.
"""


def symbolic_sizes() -> Sizes:
    return Sizes(*(named_int(n) for n in ("num_reqs", "groups", "num_slots", "num_cols", "total_layers", "max_model_len")))


def buffer_shapes(geo: Geometry, sz: Sizes, cumulative: bool) -> dict[str, tuple]:
    """The shape of every buffer the worker kernels touch."""
    per_req = (geo.max_num_reqs,)
    return {
        "idx_mapping": (sz.num_reqs,),
        "query_metadata": (sz.num_reqs + 1,) if cumulative else (sz.num_reqs,),
        "num_computed_tokens": per_req,
        "num_accepted_tokens": per_req,
        "is_prefilling": (sz.num_reqs,),
        "live_cols": per_req,
        "src_cols": per_req,
        "dst_cols": per_req,
        "block_table": (sz.groups, geo.max_num_reqs, sz.num_cols),
        "ring_start": (sz.groups, sz.num_slots),
        "num_committed": (sz.groups, sz.num_slots),
        "plan_ring_start": per_req,
        "plan_flush_count": per_req,
        "active_request_indices": per_req,
        "packed_base": (sz.groups,),
        "num_layers": (sz.groups,),
        "src_slots": (sz.total_layers * geo.max_num_reqs,),
        "dst_slots": (sz.total_layers * geo.max_num_reqs,),
    }


def int32_sizes(geo: Geometry, sz: Sizes) -> Cond:
    """The model choice ``int32_sizes`` (``spec/model_choices.py``): the launch's sizes, the packed
    [layer, batch] tables' entries and ``max_model_len`` (up to ``MAX_MODEL_LEN_LIMIT``, read when
    asked) fit int32."""
    return conj(*[conj(n >= 0, n <= INT32_MAX) for n in (sz.num_reqs, sz.groups, sz.num_slots, sz.num_cols,
                                                          sz.total_layers)],
                sz.total_layers * geo.max_num_reqs <= INT32_MAX,
                sz.max_model_len <= row_assumptions.MAX_MODEL_LEN_LIMIT)


def memory_facts(mem: SymbolicMemory, geo: Geometry, sz: Sizes) -> list[Fact]:
    """Assumptions on the sizes (int32, a pool holding at least the null
    block) and on what the program read: slot ids in capacity, trackers in range."""
    facts: list[Fact] = [
        ("int32_sizes", int32_sizes(geo, sz)),
        # without it an empty pool makes a null-slot access a spurious out-of-bounds counterexample
        (env.POOL_HAS_NULL_BLOCK.name, env.POOL_HAS_NULL_BLOCK(sz.num_slots, geo.pad_slot)),
    ]
    for r in mem.reads:
        facts.append(("int32_inputs", conj(r.value >= INT32_MIN, r.value <= INT32_MAX)))
        if r.buffer == "block_table":
            facts.append((env.SLOT_IN_CAPACITY.name, env.SLOT_IN_CAPACITY(r.value, sz.num_slots, geo.pad_slot)))
        elif r.buffer in ("ring_start", "num_committed"):
            facts.append((INVARIANT_TRACKER_RANGE, tracker_in_range(r.buffer, r.value, geo)))
        elif r.buffer in ("live_cols", "src_cols", "dst_cols"):
            facts.append((env.COLUMNS_IN_TABLE.name, env.COLUMNS_IN_TABLE(r.value, sz.num_cols)))
        elif r.buffer == "idx_mapping":
            facts.append((env.IDX_MAPPING_IN_RANGE.name, env.IDX_MAPPING_IN_RANGE(r.value, geo.max_num_reqs)))
        elif r.buffer == "packed_base":
            layers = mem.initial("num_layers", r.index)
            facts.append((env.PACKED_TABLES_MATCH_LAYERS.name,
                          env.PACKED_TABLES_MATCH_LAYERS(r.value, layers, sz.total_layers, geo.max_num_reqs)))
    return facts


@dataclass
class PostprocessCase:
    """One symbolic postprocess program and everything assumed about it."""

    conv: Conventions
    geo: Geometry
    sizes: Sizes
    mem: SymbolicMemory
    trace: PostprocessTrace
    ghost: GhostRow
    final_chunk: Sym
    intermediates: list = field(default_factory=list)
    assumptions: list[Fact] = field(default_factory=list)
    mode: str = ""
    """The cache mode whose caller rules the assumptions follow (``spec.geometry.CACHE_MODES``)."""

    def show(self) -> dict[str, Any]:
        t, g = self.trace, self.ghost
        return {
            "batch": t.batch, "group": t.group, "req": g.req,
            "MAMBA_BLOCK_SIZE": self.geo.block_size, "LOGICAL_WINDOW": self.geo.window,
            "RING_BUFFER_LEN": self.geo.ring_len, "MAX_NUM_REQS": self.geo.max_num_reqs,
            "prefilling": g.prefilling, "computed_before": g.computed_before,
            "query_len": g.query_len, "accepted": g.accepted, "live_col": g.live_col,
            "running_pos": t.row.running_pos, "computed_after": t.row.computed_after,
            "aligned": t.boundary.aligned, "dst_col": t.boundary.dst_col,
            "live_slot": t.live_slot, "dst_slot": t.dst_slot,
            "checkpointed": t.commit.checkpointed, "plan_flush": t.plan_flush,
        }


def _row_setup(conv: Conventions, geo: Geometry, sz: Sizes, mem: SymbolicMemory, program: str,
               mode: str | None = None) -> tuple:
    """A symbolic batch row, its ghost step, and the caller's encoding of it,
    under the caller rules of cache mode ``mode`` (``None``: the one ``conv``
    serves by default)."""
    mode = check_cache_mode(conv.mode if mode is None else mode, conv)
    batch, group = named_int(f"batch_{program}"), named_int(f"group_{program}")
    req = named_int(f"req_{program}") if conv.has_idx_mapping else batch
    ghost = GhostRow(
        computed_before=named_int(f"computed_before_{program}"),
        query_len=named_int(f"query_len_{program}"),
        accepted=named_int(f"accepted_{program}"),
        prefilling=named_bool(f"prefilling_{program}"),
        live_col=named_int(f"live_col_{program}") if not conv.live_col_is_zero else 0,
        req=req,
        cum_base=named_int(f"cum_base_{program}"),
    )
    final_chunk = named_bool(f"final_chunk_{program}")
    encoded = conj(*[
        mem.initial(buf, idx) == v for buf, idx, v in encode_row(conv, batch, ghost)
    ])
    real = req >= 0
    a: list[Fact] = [
        (env.GEOMETRY_SUPPORTED.name, env.GEOMETRY_SUPPORTED(geo)),
        (env.BATCH_IN_LAUNCH.name, env.BATCH_IN_LAUNCH(batch, group, sz.num_reqs, sz.groups, geo.max_num_reqs)),
        ("caller_encodes_row", encoded),
        (env.IDX_MAPPING_IN_RANGE.name, env.IDX_MAPPING_IN_RANGE(req, geo.max_num_reqs)),
        (env.DECODE_ROW_FITS.name, implies(real, env.DECODE_ROW_FITS(geo, ghost))),
        (env.ACCEPTED_WITHIN_ROW.name, implies(real, env.ACCEPTED_WITHIN_ROW(geo, ghost))),
        (env.ROW_NONEMPTY.name, implies(real, env.ROW_NONEMPTY(geo, ghost))),
        (env.DECODE_WITHIN_BLOCK.name, implies(real, env.DECODE_WITHIN_BLOCK(geo, ghost))),
        (env.POSITIONS_IN_MODEL.name, implies(real, env.POSITIONS_IN_MODEL(geo, ghost, sz.max_model_len))),
        (env.MODEL_FITS_TABLE.name, env.MODEL_FITS_TABLE(mode, sz.max_model_len, geo.block_size, sz.num_cols)),
        (env.LIVE_COL_IS_LAST_BLOCK.name, implies(real, env.LIVE_COL_IS_LAST_BLOCK(geo, mode, ghost))),
        (env.PREFILL_CHUNK_ON_BOUNDARY.name, implies(real, env.PREFILL_CHUNK_ON_BOUNDARY(geo, mode, ghost, final_chunk))),
    ]
    return batch, group, ghost, final_chunk, a


def postprocess_case(
    conv: Conventions,
    geo: Geometry,
    *,
    program: str = "p",
    sizes: Sizes | None = None,
    arrays: dict | None = None,
    cache_mode: str | None = None,
) -> PostprocessCase:
    """A postprocess program for symbolic row ``batch_<program>`` of group
    ``group_<program>``, under every caller assumption of the kernel in
    ``cache_mode`` (``None``: the one ``conv`` serves by default)."""
    sz = sizes or symbolic_sizes()
    mem = SymbolicMemory(buffer_shapes(geo, sz, conv.cumulative), arrays if arrays is not None else {}, program)
    mode = conv.mode if cache_mode is None else cache_mode
    batch, group, ghost, final_chunk, a = _row_setup(conv, geo, sz, mem, program, mode)
    with recording() as intermediates:
        trace = postprocess_program(mem, geo, conv, batch, group)
    a += memory_facts(mem, geo, sz)
    a += _distinct_slot_facts(mem, trace, geo)
    return PostprocessCase(conv, geo, sz, mem, trace, ghost, final_chunk, intermediates, a, mode)


@dataclass
class DecodeCase:
    """Only the decoding of one row's inputs (and its live column read)."""

    row: RowStep
    live_col: Symbolic
    ghost: GhostRow
    mem: SymbolicMemory
    assumptions: list[Fact]


def decode_case(conv: Conventions, geo: Geometry) -> DecodeCase:
    """``decode_row`` and the live-column read of a symbolic row."""
    sz = symbolic_sizes()
    mem = SymbolicMemory(buffer_shapes(geo, sz, conv.cumulative), {}, "p")
    batch, _, ghost, _, a = _row_setup(conv, geo, sz, mem, "p")
    row = postprocess_spec.decode_row(mem, conv, batch)
    live_col = 0 if conv.live_col_is_zero else mem.load("live_cols", (row.req,), negate(row.is_padding))
    return DecodeCase(row, live_col, ghost, mem, a + memory_facts(mem, geo, sz))


def _distinct_slot_facts(mem: SymbolicMemory, t: PostprocessTrace, geo: Geometry) -> list[Fact]:
    """Distinctness of the row's slots, instantiated at the columns the program reads."""
    cols = [(t.live_col, t.live_slot), (t.boundary.dst_col, t.dst_slot)]
    cols += [(r.index[2], r.value) for r in mem.reads if r.buffer == "block_table" and r.loop_vars]
    facts = []
    for i, (ca, sa) in enumerate(cols):
        for cb, sb in cols[i + 1:]:
            facts.append((env.DISTINCT_SLOTS_IN_ROW.name, env.DISTINCT_SLOTS_IN_ROW(sa, sb, ca, cb, geo.pad_slot)))
    return facts


@dataclass
class MigrationCase:
    """One symbolic migration program and everything assumed about it."""

    geo: Geometry
    sizes: Sizes
    mem: SymbolicMemory
    trace: MigrationTrace
    batch: Sym
    group: Sym
    has_idx_mapping: bool
    intermediates: list = field(default_factory=list)
    assumptions: list[Fact] = field(default_factory=list)

    def show(self) -> dict[str, Any]:
        t = self.trace
        return {"batch": self.batch, "group": self.group, "req": t.req, "src_slot": t.src_slot,
                "dst_slot": t.dst_slot, "valid_src": t.valid_src, "changed": t.changed}


def migration_case(
    has_idx_mapping: bool, geo: Geometry, *, program: str = "p",
    sizes: Sizes | None = None, arrays: dict | None = None,
) -> MigrationCase:
    """A migration program for symbolic row ``batch_<program>``."""
    sz = sizes or symbolic_sizes()
    mem = SymbolicMemory(buffer_shapes(geo, sz, False), arrays if arrays is not None else {}, program)
    batch, group = named_int(f"batch_{program}"), named_int(f"group_{program}")
    with recording() as intermediates:
        trace = migrate_program(mem, geo.pad_slot, has_idx_mapping, batch, group)
    a: list[Fact] = [
        (env.GEOMETRY_SUPPORTED.name, env.GEOMETRY_SUPPORTED(geo)),
        (env.BATCH_IN_LAUNCH.name, env.BATCH_IN_LAUNCH(batch, group, sz.num_reqs, sz.groups, geo.max_num_reqs)),
    ]
    a += memory_facts(mem, geo, sz)
    return MigrationCase(geo, sz, mem, trace, batch, group, has_idx_mapping, intermediates, a)


C = TypeVar("C", "PostprocessCase", "MigrationCase")


def program_pair(build: Callable[..., C]) -> tuple[C, C]:
    """Two programs ``p`` and ``q`` of one launch: ``build(program=..., arrays=...,
    sizes=...)`` twice over the same initial memory and launch sizes."""
    arrays: dict = {}
    p = build(program="p", arrays=arrays)
    return p, build(program="q", arrays=arrays, sizes=p.sizes)


def pair_show(p: PostprocessCase | MigrationCase, q: PostprocessCase | MigrationCase) -> dict[str, Any]:
    """Both programs' shown values, prefixed ``p.`` and ``q.``."""
    return {**{f"p.{k}": v for k, v in p.show().items()}, **{f"q.{k}": v for k, v in q.show().items()}}
