"""The kernel roles of the reference API and of our row-blocked kernel, one record each.

``postprocess``, ``migration`` and ``compaction`` are the reference API's
three kernels (``vllm.v1.worker.replayssm_utils``, ours in
``replayssm.impl.kernels``), each beside its spec program; ``blocked`` is our
row-blocked postprocess (``replayssm.impl.kernels_blocked``), beside the
reference launch's spec. A generation's roles (``spec/generations/``) become
the same :class:`.roles.KernelRole` records in :mod:`.generation_roles`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import z3

from replayssm.spec import assumptions as env
from replayssm.spec.geometry import Conventions
from replayssm.spec.vocab import conj, disj, implies

from ..goals import TRACKERS
from ..scenarios import GEOMETRIES, migration_case, postprocess_case
from ..terms import Fact, Symbolic, lift
from replayssm.impl.kernels_blocked import DEFAULT_ROWS_PER_PROGRAM

from . import blocked, playback
from .cases import KernelCase, compaction_kernel_case, migration_kernel_case, postprocess_kernel_case
from .roles import WORK_LIST_FRAME, KernelRole, Replay

if TYPE_CHECKING:
    from .source import Jit

REFERENCE_CONTRACT = tuple(a.name for a in env.ALL if a not in (
    env.LIVE_MOVE_COPIES_STATE, env.BLOCK_COPY_MOVES_TRACKERS, env.FRESH_SLOT_IS_FREE))
"""The caller assumptions the reference API's postprocess and migration
contracts state (``verify.scenarios``); the others concern the scheduler's
copies between steps, not one launch."""


def postprocess_variants() -> list[tuple[str, tuple]]:
    """Each of the 32 boolean constexpr combinations once, the numeric
    constexprs taken from the spec's geometries: the geometry of a combination
    is given by two parities of its flags, so every geometry meets 8
    combinations and both values of every flag."""
    geometries = list(GEOMETRIES.items())
    out = []
    for conv in Conventions.all():
        b = (conv.cumulative, conv.post_step, conv.has_idx_mapping, conv.materialize_prefixes, conv.live_col_is_zero)
        gname, geo = geometries[(b[0] ^ b[2] ^ b[4]) + 2 * (b[1] ^ b[3])]
        out.append((f"{gname} {conv.label()}", (conv, geo)))
    return out


def migration_variants() -> list[tuple[str, tuple]]:
    """Both ``HAS_IDX_MAPPING`` values under every geometry."""
    return [(f"{g} {'map' if m else 'nomap'}", (m, geo)) for g, geo in GEOMETRIES.items() for m in (False, True)]


def compaction_variants() -> list[tuple[str, tuple]]:
    """``MAX_NUM_REQS`` 1 to 9 (``BLOCK_SIZE`` its next power of two)."""
    return [(f"MAX_NUM_REQS={cap}", (cap,)) for cap in range(1, 10)]


def blocked_variants() -> list[tuple[str, tuple]]:
    """Every launch of the row-blocked kernel we make: a row block's program
    under every postprocess variant, for the kernel-level launch
    (``blocked.ROWS`` rows per program, no work list: a full block and the
    last block holding one row, every lane proved) and for the context's
    (``DEFAULT_ROWS_PER_PROGRAM``, 128, with the work list in align mode:
    any block, at ``blocked.SAMPLE`` sampled lanes); and the context
    launch's work-list program under the 16 align-mode combinations, in the
    two geometries of at most 3 rows (its spec runs every row below
    ``MAX_NUM_REQS``)."""
    wide = DEFAULT_ROWS_PER_PROGRAM
    rows = [(f"block{width} {label}", ("rows", *params, width, compact and params[0].materialize_prefixes))
            for width, compact in ((blocked.ROWS, False), (wide, True)) for label, params in postprocess_variants()]
    small = [(n, g) for n, g in GEOMETRIES.items() if g.max_num_reqs <= 3]
    work = []
    for conv in Conventions.all():
        if conv.materialize_prefixes:
            gname, geo = small[(conv.cumulative + conv.post_step + conv.has_idx_mapping + conv.live_col_is_zero) % 2]
            work.append((f"work list {gname} {conv.label()}", ("work list", conv, geo, wide)))
    return rows + work


def exclusive_live_slots(p: KernelCase, q: KernelCase, decode: Callable[[KernelCase], Symbolic] | None = None
                         ) -> list[Fact]:
    """``exclusive_decode_live_slot`` instantiated at the kernel's own tracker
    stores: what the spec allows two programs to share, stated on the cells
    the kernel writes (the spec states it on the cells the spec writes);
    ``decode(case)``: the rows that commit their live slot (default the spec's decode rows)."""
    out = []
    for me, other in ((p, q), (q, p)):
        t = me.spec.trace
        commits = decode(me) if decode is not None else t.decode
        for w in other.mem.writes:
            if w.buffer in TRACKERS:
                same_group = conj(w.guard, w.index[0] == me.run.launch.program_ids[1])
                held = implies(same_group, env.EXCLUSIVE_DECODE_LIVE_SLOT(
                    t.live_slot, commits, w.index[1], me.constexprs["geometry"].pad_slot))
                # a loop's store is every iteration's: the assumption holds at each
                out.append((env.EXCLUSIVE_DECODE_LIVE_SLOT.name, z3.ForAll([lift(v) for v in w.loop_vars], lift(held))
                            if w.loop_vars else held))
    return out


def postprocess_pair(jit: Jit, label: str, params: tuple, p: KernelCase) -> tuple:
    """A second program ``q`` over ``p``'s initial arrays and launch sizes
    (the spec's ``program_pair``), with the spec's race assumptions."""
    from ..postprocess_proofs import _race_claim

    conv, geo = params
    sq = postprocess_case(conv, geo, program="q", arrays=p.spec.mem.arrays, sizes=p.spec.sizes)
    spec_claim = _race_claim(label, p.spec, sq)
    q = postprocess_kernel_case(jit, conv, geo, label, program="q", spec=sq)
    facts = p.assumptions[len(p.spec.assumptions):] + q.assumptions[len(q.spec.assumptions):]
    return p, q, spec_claim.assumptions + facts + exclusive_live_slots(p, q), spec_claim.cover


def migration_pair(jit: Jit, label: str, params: tuple, p: KernelCase) -> tuple:
    from ..migration_proofs import race_claim

    has_map, geo = params
    sq = migration_case(has_map, geo, program="q", arrays=p.spec.mem.arrays, sizes=p.spec.sizes)
    q = migration_kernel_case(jit, has_map, geo, label, program="q", spec=sq)
    spec_claim = race_claim(label, p.spec, sq)
    facts = p.assumptions[len(p.spec.assumptions):] + q.assumptions[len(q.spec.assumptions):]
    return p, q, spec_claim.assumptions + facts, spec_claim.cover


def blocked_case(jit: Jit, label: str, params: tuple) -> KernelCase:
    if params[0] == "rows":
        kind, conv, geo, width, compact = params
        return blocked.rows_case(jit, conv, geo, label, width=width, compact=compact)
    kind, conv, geo, width = params
    return blocked.compaction_case(jit, conv, geo, label, width)


def blocked_pair(jit: Jit, label: str, params: tuple, p: KernelCase) -> tuple:
    """``p`` (a row block, or the work-list program) and a row block ``q``,
    with the spec's race assumptions between their rows, stated at each
    program's kernel stores."""
    kind, conv, geo = params[:3]
    width, compact = params[3], kind != "rows" or params[4]
    q = blocked.rows_case(jit, conv, geo, label, program="q", arrays=p.spec.mem.arrays, sizes=p.spec.sizes,
                          width=width, compact=compact)
    facts = p.assumptions + q.assumptions
    if kind == "rows":
        facts += blocked.kernel_exclusive(p.block, q.run, True) + blocked.kernel_exclusive(q.block, p.run, True)
        gp, gq = p.block.group, q.block.group
        base = [[p.spec.mem.initial(b, (g,)) for b in ("packed_base", "num_layers")] for g in (gp, gq)]
        facts.append((env.PACKED_GROUPS_DISJOINT.name, env.PACKED_GROUPS_DISJOINT(
            base[0][0], base[0][1], base[1][0], base[1][1], geo.max_num_reqs, gp == gq)))
        facts.append(("distinct_programs", disj(p.block.block != q.block.block, gp != gq)))
    return p, q, facts, p.cover


def _blocked_meta(case: KernelCase) -> dict:
    meta = {"rows_per_program": case.constexprs["ROWS_PER_PROGRAM"], "compact": case.constexprs["COMPACT"]}
    if case.block is None:
        # the work-list program's case says nothing of the row blocks' inputs
        meta["compared"] = ["active_request_indices"]
    return meta


POSTPROCESS_INPUTS = ("idx_mapping", "query_metadata", "num_computed_tokens", "num_accepted_tokens", "is_prefilling",
                      "live_cols")

POSTPROCESS = KernelRole(
    "postprocess", ("_postprocess_replayssm_kernel",), postprocess_variants,
    lambda jit, label, params: postprocess_kernel_case(jit, *params, label),
    Replay("postprocess", POSTPROCESS_INPUTS, playback.prepare_postprocess, playback.spec_postprocess, packed=True),
    pair=postprocess_pair, spec="spec.postprocess (one row's commit and plan)", assumes=REFERENCE_CONTRACT,
    generation="reference")

MIGRATION = KernelRole(
    "migration", ("_reset_new_replayssm_slots_kernel",), migration_variants,
    lambda jit, label, params: migration_kernel_case(jit, *params, label),
    Replay("migrate", ("idx_mapping", "src_cols", "dst_cols"), playback.prepare_migration, playback.spec_migration),
    pair=migration_pair, spec="spec.migration (one row's fresh-slot reset)", assumes=REFERENCE_CONTRACT,
    generation="reference")

COMPACTION = KernelRole(
    "compaction", ("_compact_replayssm_requests_kernel",), compaction_variants,
    lambda jit, label, params: compaction_kernel_case(jit, *params, label),
    Replay("compact", (), playback.prepare_compaction, playback.spec_compaction, by_capacity=True),
    spec="spec.compaction (the work list of a plan)", assumes=(), generation="reference", frame=WORK_LIST_FRAME)

BLOCKED_TIMEOUT_MS = 120_000
"""The solver's limit per query of the row-blocked kernel's obligations:
each of its cases takes at most about 4.5 s of CPU alone (2026-12-03,
solved in a context of its own), but with the default 20 s
(``verify.obligation.TIMEOUT_MS``, wall clock) two of its 128-row cases were
``unknown`` under a load average of 5 on 2 cores; 2 minutes leaves a proof a
proof under such a load, while a query that never ends still ends the run."""

BLOCKED = KernelRole(
    "blocked", (blocked.KERNEL,), blocked_variants, blocked_case,
    Replay("postprocess", POSTPROCESS_INPUTS, playback.prepare_blocked, playback.spec_postprocess, packed=True,
           meta=_blocked_meta),
    pair=blocked_pair, spec="spec.postprocess per row, then spec.compaction", assumes=REFERENCE_CONTRACT,
    generation="ours (row-blocked)", frame=None, timeout_ms=BLOCKED_TIMEOUT_MS, isolated=True)
# the blocked program owns ROWS rows: its frame (a row set) is not stated yet; each case is solved in a
# context of its own: in a worker that had built other cases first, a 128-row equivalence case that proves in
# under 2 s alone ran past 5 minutes (2026-12-03)

REFERENCE = (POSTPROCESS, MIGRATION, COMPACTION)
"""The reference API's roles (ours, the reference page, any target of that API)."""

ROLES = (*REFERENCE, BLOCKED)
"""Every role verify knows without a review adapter."""
