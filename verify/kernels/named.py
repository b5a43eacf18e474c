"""Launch contracts bound by parameter name: a generation's kernels over the reference caller.

Every launch-API generation of vLLM's kernels takes the caller's per-step
vectors and the cache groups' tables under the same parameter names (the ones
``review/arguments.py`` and ``review/harness.py`` bind). A generation's kernel
runs here on the spec scenario of one batch row (``verify.scenarios``: the
symbolic inputs and every caller assumption on them), each parameter bound by
its name (:data:`ARGUMENTS`), with the vectors only some generations take
(``materialize_*``, ``num_computed_before``, ``tracker_capacities``,
``group_layer_offsets``) stated as the caller computes them from that row.

A role's launch contract is its adapter's record
(``spec/generations/roles.py`` :class:`RoleLaunch`): the caller's step its
program is one row of (each step's scenario here, :data:`SCENARIOS`), its
scope (per group: one launch per cache group on that group's tensors,
program id ``(batch,)``; else one launch, ``(batch, group)`` over pointer
tables) and parameter overrides. Its programs of rows below
``num_reqs`` run on the scenario's row; where the launch's grid spans
``max_num_reqs`` rows (``padded``: B, C, D), a *padding* program (a row
``num_reqs <= batch < max_num_reqs``, ``padding_programs_past_num_reqs``)
runs on the same memory with nothing assumed of its row's per-request
inputs (:func:`padding_case`), for the ``padding`` obligation: memory safety
and a frame that holds no tracker. A counterexample replays on the grid the
version launches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from replayssm.spec import assumptions as env
from replayssm.spec import model_choices as choices
from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.generations.contract import LaunchClause, LaunchContract, RowView
from replayssm.spec.generations.roles import MIGRATION_ROW, POSTPROCESS_ROW, GenerationRole, RoleLaunch, Step
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.launch import next_power_of_2
from replayssm.spec.vocab import conj, disj, implies, ite

from ..memory import SymbolicMemory
from ..obligation import Claim
from ..scenarios import GEOMETRIES, MigrationCase, PostprocessCase, Sizes, memory_facts, migration_case, postprocess_case
from ..terms import Fact, Sym, Symbolic, lift
from .cases import KernelCase, per_group_tables
from .contracts import ABSENT, ArgumentRole, BufferArg, PointerTable, ProgramLaunch, ScalarArg, StrideArg
from .evaluator import run_program
from .kmemory import KernelMemory
from .registry import REFERENCE_CONTRACT, exclusive_live_slots
from .roles import Frame, KernelRole, Replay
from .source import is_constexpr, source_of

if TYPE_CHECKING:
    from .playback import ReplayView
    from .source import Jit

PER_ROW = ("idx_mapping", "query_metadata", "num_computed_tokens", "num_accepted_tokens", "live_cols", "src_cols",
           "dst_cols", "materialize_src_cols", "materialize_dst_cols", "materialize_token_counts",
           "num_computed_before", "plan_ring_start", "plan_flush_count", "active_request_indices",
           "tracker_capacities", "group_layer_offsets")
"""Parameters that point at entry 0 of the buffer of their name."""

EXTRA_SHAPES = {"materialize_src_cols": "rows", "materialize_dst_cols": "rows", "materialize_token_counts": "rows",
                "num_computed_before": "rows", "tracker_capacities": "groups", "group_layer_offsets": "groups+1",
                "num_active": 1, "rand_seeds": 1}
"""Buffers beside the reference scenario's, by extent."""

TABLES = {"block_table_ptrs": ("block_table", 3), "tracker_ring_start_ptrs": ("ring_start", 2),
          "tracker_num_committed_ptrs": ("num_committed", 2)}
"""Int64 tables of each group's row address (model scope), by the buffer they address."""


def _conventions(contract: RoleLaunch) -> list[Conventions]:
    return [c for c in Conventions.all() if (contract.live_col_is_zero or not c.live_col_is_zero)
            and (contract.post_step or not c.post_step)]


def _small() -> list[tuple[str, Geometry]]:
    """The small geometries (a serial loop over rows unrolls ``MAX_NUM_REQS`` times)."""
    return [(n, g) for n, g in GEOMETRIES.items() if g.max_num_reqs <= 8]


def migration_variants(contract: RoleLaunch, launched: Callable[[Conventions], bool]) -> list[tuple[str, tuple]]:
    """Three small geometries, with and without ``idx_mapping``, one layer (a migration launch
    takes none of the flags a host's cache mode sets: ``launched`` is not consulted)."""
    return [(f"{n} {'map' if m else 'nomap'}", (Conventions(False, False, m, True, False), g, 1))
            for (n, g), m in zip(_small(), (False, True, True))]


def postprocess_variants(contract: RoleLaunch, launched: Callable[[Conventions], bool]) -> list[tuple[str, tuple]]:
    """A sample of the constexpr space the host launches (``launched``): four convention combinations
    (both values of every flag the kernel takes) over the small geometries, one and two layers."""
    small = _small()
    convs = [c for c in _conventions(contract) if launched(c)]
    picks = [convs[0], convs[-1], convs[len(convs) // 3], convs[(2 * len(convs)) // 3]]
    return [(f"{small[i % len(small)][0]} {c.label()} L{1 + i % 2}", (c, small[i % len(small)][1], 1 + i % 2))
            for i, c in enumerate(dict.fromkeys(picks))]


def _shapes(spec_mem: SymbolicMemory, geo: Geometry) -> dict:
    sz_groups = spec_mem.shapes["block_table"][0]
    shapes = dict(spec_mem.shapes)
    extent = {"rows": geo.max_num_reqs, "groups": sz_groups, "groups+1": sz_groups + 1}
    shapes.update({b: (extent.get(n, n),) for b, n in EXTRA_SHAPES.items()})
    shapes.update({t: (sz_groups,) for t in (*TABLES, "block_table_strides")})
    return shapes


def _argument(name: str, contract: RoleLaunch, spec_mem: SymbolicMemory, geo: Geometry, sizes: Sizes,
              group: Sym) -> ArgumentRole:
    """What parameter ``name`` holds in this launch (a contract role)."""
    name = contract.inputs.get(name, name)
    group_scope = contract.scope.per_group
    if name in PER_ROW:
        return BufferArg(name)
    if name == "is_prefilling":
        return BufferArg(name, "i1")
    if name == "num_active_ptr":
        return BufferArg("num_active")
    if name == "rand_seeds":
        return BufferArg(name, "i64")
    if name == "block_table" and group_scope:
        return BufferArg("block_table", start=(group, 0, 0), fixed=1)
    if name in ("tracker_start", "tracker_committed") and group_scope:
        return BufferArg("ring_start" if name == "tracker_start" else "num_committed", start=(group, 0), fixed=1)
    if name in ("src_slots", "dst_slots"):
        return BufferArg(name, start=(spec_mem.initial("packed_base", (group,)),)) if group_scope else BufferArg(name)
    if name == "block_table_stride_req":
        return StrideArg("block_table", 1, sizes.num_cols)
    if name == "slot_table_stride_layer":
        return ScalarArg(geo.max_num_reqs, "i64")
    if name == "tracker_capacity":
        return ScalarArg(sizes.num_slots)
    if name == "num_reqs":
        return ScalarArg(sizes.num_reqs)
    if name in TABLES:
        buffer, dims = TABLES[name]
        return PointerTable(name, buffer, lambda e, dims=dims: (e,) + (0,) * (dims - 1), 1)
    if name in ("src_slots_ptrs", "dst_slots_ptrs", "block_table_strides", "tracker_start_ptrs",
                "tracker_committed_ptrs"):
        return per_group_tables(spec_mem)[name]
    raise ValueError(f"no caller provides parameter {name!r}")


def constexprs(conv: Conventions, geo: Geometry, layers: int) -> dict[str, int]:
    """Every constexpr any generation takes, by name (``review/harness.py``'s namespace)."""
    return {**conv.as_constexprs(), "QUERY_IS_CUMULATIVE": conv.cumulative, "NUM_COMPUTED_IS_AFTER": conv.post_step,
            "MAMBA_BLOCK_SIZE": geo.block_size, "LOGICAL_WINDOW": geo.window, "RING_BUFFER_LEN": geo.ring_len,
            "PAD_SLOT_ID": geo.pad_slot, "MAX_NUM_REQS": geo.max_num_reqs,
            "BLOCK_SIZE": next_power_of_2(geo.max_num_reqs), "EXECUTED_QUERY_WIDTH": 0, "GDN_STP": False,
            "NUM_RAND_SEEDS": 1, "NUM_LAYERS": layers, "MAX_LAYERS_PER_GROUP": layers}


def caller_vectors(c: PostprocessCase, mem: SymbolicMemory, geo: Geometry, align: bool) -> list[Fact]:
    """The generation-only vectors at the program's row as the caller computes
    them (``review/arguments.py``): the prefix snapshot's live column,
    destination column and token count in align mode when the step crosses a
    block boundary, else ``-1, -1, 0``; the pre-step computed count."""
    t, g = c.trace, c.ghost
    after = t.row.computed_after
    b = mamba_state_copy_boundary(t.row.running_pos, after, geo.block_size)
    work = conj(align, b.needs_copy, b.dst_col >= 0)
    batch = t.batch
    return [(choices.MATERIALIZE_COLUMNS_FROM_BOUNDARY.name, conj(
        mem.initial("materialize_src_cols", (batch,)) == ite(work, g.live_col, -1),
        mem.initial("materialize_dst_cols", (batch,)) == ite(work, b.dst_col, -1),
        mem.initial("materialize_token_counts", (batch,)) == ite(work, ite(t.row.prefilling, 0, b.bias + 1), 0))),
        (choices.CALLER_PASSES_PRE_STEP_COUNT.name, mem.initial("num_computed_before", (g.req,)) == g.computed_before)]


def group_facts(mem: SymbolicMemory, geo: Geometry, sizes: Sizes, group: Sym, layers: int,
                per_group: bool) -> list[Fact]:
    """The group's layer count and tables as the caller lays them out (``per_group``: one launch per group)."""
    n, base = mem.initial("num_layers", (group,)), mem.initial("packed_base", (group,))
    # the group's rows of the [layer, batch] tables: the spec states it where it reads the base, the
    # generations' kernels write those rows without reading it
    packed = (env.PACKED_TABLES_MATCH_LAYERS.name,
              env.PACKED_TABLES_MATCH_LAYERS(base, n, sizes.total_layers, geo.max_num_reqs))
    if per_group:
        return [(choices.GROUP_LAYERS_ARE_NUM_LAYERS.name, n == layers), packed]
    off, nxt = mem.initial("group_layer_offsets", (group,)), mem.initial("group_layer_offsets", (group + 1,))
    return [packed, (choices.GROUP_LAYERS_WITHIN_MAX_LAYERS_PER_GROUP.name, conj(n >= 1, n <= layers)),
            (choices.GROUP_LAYER_OFFSETS_MATCH_PACKED_TABLES.name, conj(off * geo.max_num_reqs == base, nxt == off + n)),
            (choices.TRACKER_CAPACITIES_ARE_TRACKER_LENGTHS.name, mem.initial("tracker_capacities", (group,)) == sizes.num_slots)]


def read_facts(mem: SymbolicMemory, sizes: Sizes) -> list[Fact]:
    """Caller assumptions at the generation-only vectors the kernel read."""
    out = []
    for r in mem.reads:
        if r.buffer in ("materialize_src_cols", "materialize_dst_cols"):
            out.append((env.COLUMNS_IN_TABLE.name, env.COLUMNS_IN_TABLE(r.value, sizes.num_cols)))
        elif r.buffer == "tracker_capacities":
            out.append((choices.TRACKER_CAPACITIES_ARE_TRACKER_LENGTHS.name, r.value == sizes.num_slots))
    return out


ROW_INPUT_FACTS = (env.COLUMNS_IN_TABLE.name, env.IDX_MAPPING_IN_RANGE.name)
"""Memory facts about a row's per-request vectors (its columns, its request
index): a padding row's entries are stale, so a padding program assumes none."""


def padding_case(contract: RoleLaunch, role: str, jit: Jit, label: str, params: tuple,
                 beside: KernelCase | None = None, clauses: tuple[LaunchClause, ...] = ()) -> KernelCase:
    """A padding program of ``jit``: row ``num_reqs <= batch < max_num_reqs`` of a
    group, over the same symbolic memory as :func:`named_case`, with the launch's
    and the memory's facts (block-table entries in capacity, trackers in range,
    the group's layout) but none about the row's per-request inputs.
    ``beside``: a row program's case (program ``p``) whose arrays and sizes the
    padding program (then program ``q``) shares, as two programs of one launch."""
    if beside is None:
        case = named_case(contract, role, jit, label, params, clauses=clauses)
    else:
        case = named_case(contract, role, jit, label, params, program="q", spec=second_program(contract, params, beside),
                          clauses=clauses)
    batch, group = case.row
    sz, geo = case.spec.sizes, params[1]
    padding = lift(conj(sz.num_reqs >= 1, batch >= sz.num_reqs, batch < geo.max_num_reqs, group >= 0,
                        group < sz.groups))
    kept = {env.GEOMETRY_SUPPORTED.name, "int32_sizes", env.POOL_HAS_NULL_BLOCK.name}
    facts = [(n, f) for n, f in case.assumptions[len(case.spec.assumptions):] if n not in ROW_INPUT_FACTS
             and n not in (choices.MATERIALIZE_COLUMNS_FROM_BOUNDARY.name, choices.CALLER_PASSES_PRE_STEP_COUNT.name)]
    facts = [(n, f) for n, f in case.spec.assumptions if n in kept] + facts
    return replace(case, assumptions=[(choices.PADDING_PROGRAMS_PAST_NUM_REQS.name, padding)] + facts,
                   cover=padding, padding=True, show={"batch": batch, "group": group, "num_reqs": sz.num_reqs})


def named_case(contract: RoleLaunch, role: str, jit: Jit, label: str, params: tuple, program: str = "p",
               spec: ScenarioCase | None = None, clauses: tuple[LaunchClause, ...] = ()) -> KernelCase:
    """One program of ``jit`` for row ``batch_<program>`` of group ``group_<program>``, under the
    generation's launch-contract row ``clauses`` too (``spec/generations/contract.py``)."""
    conv, geo, layers = params
    scenario = SCENARIOS[contract.step]
    c = spec if spec is not None else scenario.case(conv, geo, program, None, None)
    batch, group = scenario.row(c)
    src = source_of(jit)
    args = [_argument(p.arg, contract, c.mem, geo, c.sizes, group) for p in src.node.args.args if not is_constexpr(p)]
    if "idx_mapping" in [p.arg for p in src.node.args.args] and not conv.has_idx_mapping:
        args = [ABSENT if a == BufferArg("idx_mapping") else a for a in args]
    launch = ProgramLaunch(args, constexprs(conv, geo, layers), (batch, group), max_trips=geo.max_num_reqs + 1)
    mem = KernelMemory(_shapes(c.mem, geo), c.mem.arrays, program)
    run = run_program(jit, launch, mem)
    facts = memory_facts(run.mem, geo, c.sizes) + read_facts(run.mem, c.sizes)
    facts += group_facts(run.mem, geo, c.sizes, group, layers, contract.scope.per_group)
    facts += scenario.caller_facts(c, run.mem, geo, conv)
    view = RowView(run.mem.initial, batch, group, scenario.req(c), conj(batch < c.sizes.num_reqs, scenario.req(c) >= 0),
                   batch < c.sizes.num_reqs, c.sizes.num_cols, geo.pad_slot, conv.cumulative)
    facts += [(x.name, x.row(view)) for x in clauses if x.row is not None]
    return KernelCase(role, label, c.mem, run, c.assumptions + facts, scenario.cover(c, conv), c.show(), c,
                      {**conv.as_constexprs(), "geometry": geo, "layers": layers}, row=(batch, group))


def commits_live_slot(case: KernelCase) -> Sym:
    """The rows whose live slot the caller keeps exclusive: decode rows, and a
    one-token prefill continuation, which vLLM's Mamba forward runs as a decode
    from the prior state (and the generations' kernels commit as one)."""
    t, g = case.spec.trace, case.spec.ghost
    return disj(t.decode, conj(t.prefill, g.query_len == 1, g.computed_before > 0))


def fresh_destinations(p: KernelCase, q: KernelCase, pad: int) -> list[Fact]:
    """``fresh_distinct_destinations`` between two rows of one group that move
    their live column (``src_cols`` to ``dst_cols``, both columns of the row's
    block-table entries), as the migration's race claim states it."""
    def moved(c: KernelCase) -> tuple:
        batch, group = c.row
        req = c.spec.ghost.req
        sc, dc = (c.mem.initial(b, (req,)) for b in ("src_cols", "dst_cols"))
        slots = [c.mem.initial("block_table", (group, batch, col)) for col in (sc, dc)]
        return conj(req >= 0, sc >= 0, sc != dc), slots

    (mp, (sp, dp)), (mq, (sq, dq)) = moved(p), moved(q)
    same = p.row[1] == q.row[1]
    out = []
    for m_me, d_me, m_other, others in ((mp, dp, mq, (sq, dq)), (mq, dq, mp, (sp, dp))):
        for slot in others:
            out.append((env.FRESH_DISTINCT_DESTINATIONS.name, implies(
                conj(same, m_me, m_other), env.FRESH_DISTINCT_DESTINATIONS(d_me, slot, pad))))
    return out


def second_program(contract: RoleLaunch, params: tuple, p: KernelCase) -> ScenarioCase:
    """The spec scenario of a program ``q`` over ``p``'s arrays and sizes (another program of its launch)."""
    conv, geo, _ = params
    return SCENARIOS[contract.step].case(conv, geo, "q", p.spec.mem.arrays, p.spec.sizes)


def named_pair(contract: RoleLaunch, role: str, jit: Jit, label: str, params: tuple, p: KernelCase,
               clauses: tuple[LaunchClause, ...] = ()) -> tuple:
    """A second program ``q`` of the same launch over ``p``'s arrays and sizes, with the spec's race assumptions."""
    geo = params[1]
    scenario = SCENARIOS[contract.step]
    sq = second_program(contract, params, p)
    spec_claim = scenario.race()(label, p.spec, sq)
    q = named_case(contract, role, jit, label, params, program="q", spec=sq, clauses=clauses)
    facts = p.assumptions[len(p.spec.assumptions):] + q.assumptions[len(q.spec.assumptions):]
    facts += scenario.pair_facts(p, q)
    if contract.moves:
        facts += fresh_destinations(p, q, geo.pad_slot)
    if contract.scope.per_group:
        facts.append((choices.ONE_LAUNCH_PER_GROUP.name, lift(p.row[1] == q.row[1])))
    return p, q, spec_claim.assumptions + facts, spec_claim.cover


def prepare_named(contract: RoleLaunch, jit: Jit, v: ReplayView) -> tuple:
    """The replayed launch of group 0 (group scope) or of the model, every parameter bound by name."""
    import torch

    src = source_of(jit)
    n, rows, groups = v.num_reqs, v.geo.max_num_reqs, v.groups
    layers = list(v.layers)
    base0 = int(v.buffers["packed_base"][0])
    offsets = [0]
    for x in layers:
        offsets.append(offsets[-1] + x)
    values = {"tracker_capacities": [v.num_slots] * groups, "group_layer_offsets": offsets}
    args, kwargs = [], {}
    consts = constexprs(v.conv, v.geo, layers[0] if contract.scope.per_group else max(layers))
    for p in src.node.args.args:
        name = contract.inputs.get(p.arg, p.arg)
        if is_constexpr(p):
            kwargs[p.arg] = consts[p.arg]
            continue
        if name == "idx_mapping" and not v.conv.has_idx_mapping:
            args.append(None)
        elif name in values:
            v.buffers[name] = np.asarray(values[name], dtype=np.int32)
            args.append(v.flat(name))
        elif name in PER_ROW or name == "is_prefilling":
            args.append(v.per_request(name, torch.bool if name == "is_prefilling" else None)
                        if name not in ("plan_ring_start", "plan_flush_count", "active_request_indices")
                        else v.flat(name))
        elif name == "num_active_ptr":
            v.buffers.setdefault("num_active", np.zeros(1, dtype=np.int32))
            args.append(v.flat("num_active"))
        elif name == "rand_seeds":
            v.buffers.setdefault("rand_seeds", np.zeros(1, dtype=np.int64))
            args.append(v.flat("rand_seeds", torch.int64))
        elif name == "block_table":
            args.append(v.block_tables()[0])
        elif name in ("tracker_start", "tracker_committed"):
            args.append(v.trackers("ring_start" if name == "tracker_start" else "num_committed")[0])
        elif name in ("src_slots", "dst_slots"):
            flat = v.flat(name)
            args.append(flat[base0:] if contract.scope.per_group else flat)
        elif name == "block_table_stride_req":
            args.append(v.block_tables()[0].stride(0))
        elif name == "slot_table_stride_layer":
            args.append(rows)
        elif name == "tracker_capacity":
            args.append(v.num_slots)
        elif name == "num_reqs":
            args.append(n)
        elif name in TABLES:
            args.append(v.pointers(TABLES[name][0]))
        else:
            raise ValueError(f"no replay binding for parameter {p.arg!r}")
    launched = rows if contract.padded else n
    grid = (launched,) if contract.scope.per_group else (launched, groups)
    outputs = {b: v.flat(b) for b in ("src_slots", "dst_slots", "plan_ring_start", "plan_flush_count",
                                      "active_request_indices") if b in v._flat}
    return grid, args, kwargs, outputs


def frame_of(role: GenerationRole) -> Frame | None:
    """The frame obligation's record of ``role``'s adapter frame (None: no frame obligation)."""
    if role.frame is None:
        return None
    program = role.frame.work_list_program
    return Frame(work_list=None if program is None else (lambda batch: batch == program), outputs=role.frame.outputs)


def named_role(role: GenerationRole, generation: str, launches: LaunchContract = LaunchContract(),
               publishing: tuple[str, ...] | None = None, dropped: frozenset[str] = frozenset()) -> KernelRole:
    """The record the kernel obligations read for ``role`` of ``generation``, under its launch contract:
    the role's own (:class:`RoleLaunch`) and the generation's (``launches``): only the constexpr variants
    its host launches given the modes it publishes prefixes in (``publishing``, None: not known), each
    program under the contract's row clauses but ``dropped``."""
    contract, name = role.launch, role.name
    clauses = tuple(c for c in launches.rows if c.name not in dropped)
    inputs = ("idx_mapping", "query_metadata", "num_computed_tokens", "num_accepted_tokens", "is_prefilling",
              "live_cols", "src_cols", "dst_cols", "materialize_src_cols", "materialize_dst_cols",
              "materialize_token_counts", "num_computed_before")
    replay = Replay("launch", inputs, lambda jit, v: prepare_named(contract, jit, v), None, packed=True,
                    one_group=contract.scope.per_group)

    def variants() -> list[tuple[str, tuple]]:
        return SCENARIOS[contract.step].variants(contract, lambda conv: launches.launches(conv, publishing))

    return KernelRole(
        name, role.jits, variants,
        lambda jit, label, params: named_case(contract, name, jit, label, params, clauses=clauses), replay,
        pair=lambda jit, label, params, p: named_pair(contract, name, jit, label, params, p, clauses),
        spec="", assumes=role.assumes or REFERENCE_CONTRACT + tuple(c.name for c in clauses), generation=generation,
        frame=frame_of(role), duty=role.duty,
        padding=(lambda jit, label, params, beside=None: padding_case(contract, name, jit, label, params, beside,
                                                                      clauses)) if contract.padded else None)


def _postprocess_race() -> Callable[[str, PostprocessCase, PostprocessCase], Claim]:
    from ..postprocess_proofs import _race_claim

    return _race_claim


def _migration_race() -> Callable[[str, MigrationCase, MigrationCase], Claim]:
    from ..migration_proofs import race_claim

    return race_claim


ScenarioCase = PostprocessCase | MigrationCase
"""The spec scenario of one program of a caller step (``verify.scenarios``)."""

C = TypeVar("C", PostprocessCase, MigrationCase)


@dataclass(frozen=True)
class Scenario(Generic[C]):
    """What the programs of a role are built on, for the caller's step they are one row of
    (``C``: the step's spec scenario)."""

    case: Callable[[Conventions, Geometry, str, dict | None, Sizes | None], C]
    """``case(conv, geo, program, arrays, sizes)``: the spec scenario of one program (arrays and sizes
    None: fresh ones)."""
    row: Callable[[C], tuple[Sym, Sym]]
    """``(batch, group)`` of a spec scenario."""
    variants: Callable[[RoleLaunch, Callable[[Conventions], bool]], list[tuple[str, tuple]]]
    """``variants(launch, launched)``: the constexpr variants proved, of those the host launches."""
    req: Callable[[C], Sym]
    """The request index of a spec scenario's row (negative: a padded row)."""
    caller_facts: Callable[[C, SymbolicMemory, Geometry, Conventions], list[Fact]]
    """The caller's generation-only vectors at the program's row (``caller_facts(c, mem, geo, conv)``)."""
    cover: Callable[[C, Conventions], Symbolic]
    """The non-vacuity witness's condition."""
    race: Callable[[], Callable[[str, C, C], Claim]]
    """The spec's race claim between two programs (imported when used: the proofs' modules import this one)."""
    pair_facts: Callable[[KernelCase, KernelCase], list[Fact]]
    """What the caller keeps apart between two rows beyond the spec's race assumptions."""


SCENARIOS: dict[Step, Scenario[Any]] = {
    POSTPROCESS_ROW: Scenario[PostprocessCase](
        case=lambda conv, geo, program, arrays, sizes: postprocess_case(conv, geo, program=program)
        if arrays is None else postprocess_case(conv, geo, program=program, arrays=arrays, sizes=sizes),
        row=lambda c: (c.trace.batch, c.trace.group), variants=postprocess_variants, req=lambda c: c.ghost.req,
        caller_facts=lambda c, mem, geo, conv: caller_vectors(c, mem, geo, conv.materialize_prefixes),
        cover=lambda c, conv: c.trace.wants_materialize if conv.materialize_prefixes else c.trace.decode,
        race=_postprocess_race, pair_facts=lambda p, q: exclusive_live_slots(p, q, commits_live_slot)),
    MIGRATION_ROW: Scenario[MigrationCase](
        case=lambda conv, geo, program, arrays, sizes: migration_case(conv.has_idx_mapping, geo, program=program)
        if arrays is None else migration_case(conv.has_idx_mapping, geo, program=program, arrays=arrays, sizes=sizes),
        row=lambda c: (c.batch, c.group), variants=migration_variants, req=lambda c: c.trace.req,
        caller_facts=lambda c, mem, geo, conv: [],
        cover=lambda c, conv: c.trace.changed, race=_migration_race, pair_facts=lambda p, q: []),
}
"""Each caller step's scenario, by the step record a role's launch names (``Any``: which scenario, so
which case type, a role's step picks is known at run time only)."""
