"""The row-blocked postprocess kernel (``impl/kernels_blocked.py``) beside the spec.

One program ``(block, group)`` of ``postprocess_replayssm_blocked_kernel``
handles rows ``block * W .. block * W + W - 1`` (``W`` rows per program) as
vector lanes; with ``COMPACT`` the program after the last row block writes
the work list. Its spec is the reference launch's: the spec program of each
of those rows (``spec/postprocess.py``), and for the work-list program the
compaction (``spec/compaction.py``) of the plan those rows leave.

**Rows of a block** (:func:`rows_case`), at sampled lanes: the kernel runs
with ``tl.arange(0, W)`` evaluated at :data:`SAMPLE` lanes (every lane, in
any order, when ``W`` is smaller) at symbolic distinct positions of the
block (:class:`.contracts.LaneSample`), each beside the spec row of its
position over one set of initial arrays, each on its own memory (as two
programs of a launch are in the race obligations), launched where its row
is below ``num_reqs``. The lanes are symmetric, so the claims are stated for
lane 0 and the pair (0, 1) (:func:`claimed`): for every lane, and every pair,
some sample holds it and the lane attaining the block's one reduction (the
reset loop's ``tl.max``), which is then exact; what a sample cannot stand for
(a scan, a second reduction, a read after a store through the block) is
refused by the interpreter. So ``W = 128`` is proved at three lanes.

- *equivalence*, per lane: lane 0's writes (:class:`LaneMemory`) leave
  the memory its row's spec program leaves when launched, and the initial
  memory past ``num_reqs``, where it makes no access at all (memory safety:
  :func:`idle_lanes`). A loop store's "some iteration hits the cell" is
  re-indexed from the lane's iteration to the column (:func:`realigned_hit`),
  so the quantified terms line up with the spec's loop over columns;
- *conflicts*, between lanes of one program (:func:`lane_conflicts`, any two
  statements, not only two lanes of one store) and between two programs, as
  between two programs of the reference launch, under the same caller
  assumption (``exclusive_decode_live_slot``, instantiated at the kernel's
  stores of the other lane or program).

Per-lane equivalence and conflict freedom between lanes give the program's
equivalence with its rows run one after another, in any order, as per-program
equivalence and conflict freedom give the reference launch's.

**The work-list program** (:func:`compaction_case`): its spec runs the
postprocess spec of every row ``0 .. MAX_NUM_REQS - 1`` below ``num_reqs``
in group 0 and compacts the plan they leave; group 0 only writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import z3

from replayssm.spec import assumptions as env
from replayssm.spec.compaction import compact_program
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.launch import next_power_of_2
from replayssm.spec.vocab import conj, disj, implies, negate

from ..goals import TRACKERS
from ..memory import Access, SymbolicMemory
from ..scenarios import INVARIANT_TRACKER_RANGE, PostprocessCase, Sizes, memory_facts, postprocess_case
from ..terms import Fact, Sym, Symbolic, lift, named_int
from .cases import KernelCase, postprocess_launch, run_kernel
from .contracts import BufferArg, LaneSample, ProgramLaunch, ScalarArg
from .evaluator import KernelRun, _subterms, occurs

if TYPE_CHECKING:
    from .source import Jit

ROWS = 2
"""Rows per program of the kernel-level launch (``replayssm_utils_blocked``):
every lane of its blocks is proved."""

SAMPLE = 3
"""Lanes a row block is proved at (:class:`.contracts.LaneSample`): the lanes
the claims are about (one lane, or a pair for conflicts) and the witness of
the block's one reduction (``builtins.sampled_extremum``); a block of fewer
lanes is sampled whole. (Claims about one lane with a sample of two cost
about the same to solve, and one sample serves every obligation.)"""

KERNEL = "postprocess_replayssm_blocked_kernel"


def hit(w: Access, cell: tuple) -> z3.BoolRef:
    """Whether write ``w`` lands on ``cell``: the very term ``SymbolicMemory.final`` builds."""
    target = [lift(i) for i in cell]
    h = z3.And(lift(w.guard), *[lift(i) == t for i, t in zip(w.index, target)])
    return z3.Exists([lift(v) for v in w.loop_vars], h) if w.loop_vars else h


@dataclass
class GuardedMemory(SymbolicMemory):
    """A memory whose every store also needs ``when`` (a program that writes only in group 0)."""

    when: Symbolic = True

    def store(self, buffer: str, index: tuple, value: Symbolic, guard: Symbolic = True) -> None:
        super().store(buffer, index, value, conj(guard, self.when))


@dataclass
class BlockSpec:
    """The spec rows of one row block's sampled lanes, and whether each is launched."""

    rows: list[PostprocessCase]
    launched: list
    block: Sym
    group: Sym
    sample: LaneSample
    """The block's width and each spec row's lane position in it."""
    assumptions: list = field(default_factory=list)


def blocked_launch(spec_mem: SymbolicMemory, conv: Conventions, geo: Geometry, program_ids: tuple, num_reqs: Sym,
                   compact: bool, facts: tuple, rows: int = ROWS, sample: LaneSample | None = None) -> ProgramLaunch:
    """The blocked kernel's arguments: the reference postprocess kernel's, the
    work list after the plan, ``num_reqs`` last; its constexprs, ``rows`` per
    program, the work list as the launch of ``compact`` has it."""
    base = postprocess_launch(spec_mem, conv, geo, "p")
    args = base.args[:13] + [BufferArg("active_request_indices")] + base.args[13:] + [ScalarArg(num_reqs)]
    constexprs = {**base.constexprs, "ROWS_PER_PROGRAM": rows, "COMPACT": compact,
                  "COMPACT_BLOCK": next_power_of_2(geo.max_num_reqs) if compact else 1}
    return ProgramLaunch(args, constexprs, program_ids, facts=facts, lanes=sample)


def block_spec(conv: Conventions, geo: Geometry, program: str, arrays: dict, sizes: Sizes | None = None,
               width: int = ROWS) -> BlockSpec:
    """The spec rows of the sampled lanes of block ``block_<program>`` (of
    ``width`` rows) in group ``group_<program>``: ``min(width, SAMPLE)``
    lanes at distinct positions ``lane_<program><k>`` of the block (every
    lane, in any order, when the block has at most :data:`SAMPLE`), lane
    ``k``'s row ``block * width + lane_<program><k>``, launched where it is
    below ``num_reqs``. A row's assumptions hold where it is launched; those
    of the launch and of the group alone (which name no row) always."""
    block, group = named_int(f"block_{program}"), named_int(f"group_{program}")
    positions = tuple(named_int(f"lane_{program}{k}") for k in range(min(width, SAMPLE)))
    sample = LaneSample(width, positions)
    rows: list[PostprocessCase] = []
    for i in range(len(positions)):
        rows.append(postprocess_case(conv, geo, program=f"{program}{i}", arrays=arrays,
                                     sizes=sizes if sizes is not None else (rows[0].sizes if rows else None)))
    sz = rows[0].sizes
    launched = [r.trace.batch < sz.num_reqs for r in rows]
    placed = conj(block >= 0, *[conj(r.trace.batch == block * width + p, r.trace.group == group)
                                for p, r in zip(positions, rows)])
    a = [("rows_of_the_block", placed), ("sampled_lanes", lane_positions(sample))]
    for r, on in zip(rows, launched):
        a += [(n, implies(on, t) if occurs(t, r.trace.batch) else t) for n, t in r.assumptions]
    a.append((env.BATCH_IN_LAUNCH.name, env.BATCH_IN_LAUNCH(block * width, group, sz.num_reqs, sz.groups,
                                                             geo.max_num_reqs)))
    return BlockSpec(rows, launched, block, group, sample, a)


def lane_positions(sample: LaneSample) -> Symbolic:
    """The sampled lanes are distinct lanes of the block."""
    ps = sample.positions
    return conj(*[conj(p >= 0, p < sample.width) for p in ps],
                *[ps[i] != ps[j] for i in range(len(ps)) for j in range(i + 1, len(ps))])


def equivalence_cell(buffer: str, dims: int) -> tuple:
    """The arbitrary cell the equivalence obligation compares (``equivalence_parts``)."""
    return tuple(named_int(f"cell_{buffer}_{d}") for d in range(dims))


@dataclass
class LaneMemory:
    """The kernel memory seen by one lane: the writes of that lane's lanes of
    block stores and every write that is not a block store's."""

    mem: SymbolicMemory
    lanes: dict
    lane: int

    @property
    def shapes(self) -> Mapping[str, tuple]:
        return self.mem.shapes

    @property
    def writes(self) -> list:
        return [a for i, a in enumerate(self.mem.accesses)
                if a.kind == "write" and self.lanes.get(i, self.lane) == self.lane]

    def final(self, buffer: str, index: tuple) -> z3.ExprRef:
        value = lift(self.mem.initial(buffer, index))
        for w in self.writes:
            if w.buffer == buffer:
                value = z3.If(realigned_hit(w, index), lift(w.value), value)
        return value


def realigned_hit(w: Access, cell: tuple) -> z3.BoolRef:
    """:func:`hit`, its loop variable ``k`` renamed to ``v - offset`` where the
    write reads a table at an innermost index ``offset + k`` (the lane's
    first column plus the iteration): the same set of iterations (a shift is
    a bijection of the integers), now indexed by the column as the spec's
    loop is, which Z3 matches without searching for the shift."""
    if len(w.loop_vars) != 1:
        return hit(w, cell)
    k = lift(w.loop_vars[0])
    body = z3.And(lift(w.guard), *[lift(i) == lift(t) for i, t in zip(w.index, cell)])
    offset = _offset(body, k)
    if offset is None:
        return hit(w, cell)
    return z3.Exists([k], z3.simplify(z3.substitute(body, (k, k - offset))))


def _offset(term: z3.ExprRef, k: z3.ArithRef) -> z3.ArithRef | None:
    """``e`` when ``term`` reads an array at an innermost index ``e + k`` (``e`` free of ``k``)."""
    for t in _subterms(term):
        if z3.is_select(t):
            last = t.children()[-1]
            if occurs(last, k):
                rest = z3.simplify(last - k)
                if not occurs(rest, k):
                    return rest
    return None


def lane_equivalence(case: KernelCase) -> list[tuple[str, Symbolic, dict, Symbolic]]:
    """Per lane ``i``: the kernel's writes of lane ``i`` leave the memory row
    ``i``'s spec program leaves (the initial memory when the row is past
    ``num_reqs``), at an arbitrary cell of every buffer either writes. With
    each part, when its failure shows in the whole launch: no other lane and
    no other row's spec program writes the cell."""
    spec, lanes = case.block, lane_of(case.run)
    kernels = [LaneMemory(case.mem, lanes, i) for i in range(len(spec.rows))]
    out = []
    for i, (row, on) in enumerate(zip(spec.rows, spec.launched)):
        if not claimed(case, i):
            continue
        kernel = kernels[i]
        written = dict.fromkeys([w.buffer for w in row.mem.writes] + [w.buffer for w in kernel.writes])
        for b in written:
            shape = case.mem.shapes[b]
            cell = equivalence_cell(b, len(shape))
            inside = conj(*[conj(x >= 0, x < n) for x, n in zip(cell, shape)])
            k = kernel.final(b, cell)
            alone = _alone(case, kernels, i, b, cell)
            s = lift(row.mem.final(b, cell))
            out.append((f"{b} after lane {i}, launched, equals row {i}'s spec",
                        implies(conj(on, inside), k == s), {"cell": cell, "kernel": k, "spec": s}, alone))
            s = lift(row.mem.initial(b, cell))
            out.append((f"{b} after lane {i}, past num_reqs, is untouched",
                        implies(conj(negate(on), inside), k == s), {"cell": cell, "kernel": k, "spec": s}, alone))
    return out


def idle_lanes(case: KernelCase) -> list[tuple[str, Symbolic, int]]:
    """A lane past ``num_reqs`` makes no access: every access tagged with it is masked off."""
    lanes, out = lane_of(case.run), []
    for i, a in enumerate(case.mem.accesses):
        lane = lanes.get(i)
        if lane is None or not claimed(case, lane):
            continue
        idle = implies(negate(case.block.launched[lane]), negate(a.guard))
        out.append((f"{a.kind} of {a.buffer} by lane {lane} is masked off past num_reqs", idle, i))
    return out


def _alone(case: KernelCase, kernels: list, i: int, buffer: str, cell: tuple) -> Symbolic:
    """Cell ``cell`` of ``buffer`` is written by no lane but ``i`` and by no other row's spec program."""
    before = lift(case.mem.initial(buffer, cell))
    others = [j for j in range(len(kernels)) if j != i]
    untouched = [lift(kernels[j].final(buffer, cell)) == before for j in others]
    rows, launched = case.block.rows, case.block.launched
    untouched += [lift(implies(launched[j], lift(rows[j].mem.final(buffer, cell)) == lift(rows[j].mem.initial(buffer, cell))))
                  for j in others]
    return z3.And(*untouched) if untouched else z3.BoolVal(True)


def lane_conflicts(case: KernelCase) -> list[tuple[str, Symbolic, dict, int]]:
    """Two lanes of one program never meet in memory, whatever the statements:
    no cell written by both with different values, none read by one and
    written by the other (so the program equals its rows in any order)."""
    lanes = lane_of(case.run)
    acc = [(i, a, lanes[i]) for i, a in enumerate(case.mem.accesses) if i in lanes]
    written = {a.buffer for _, a, _ in acc if a.kind == "write"}
    out = []
    for x, (i, a, la) in enumerate(acc):
        for j, b, lb in acc[x + 1:]:
            if la == lb or a.buffer != b.buffer or a.buffer not in written or not claimed(case, la, lb):
                continue
            same = conj(a.guard, b.guard, *[u == v for u, v in zip(a.index, b.index)])
            if a.kind == b.kind == "write":
                out.append((f"{a.buffer} written by lanes {la} and {lb} with one value",
                            implies(same, a.value == b.value), {"index": tuple(a.index)}, i))
            elif a.kind != b.kind:
                out.append((f"{a.buffer} read by lane {la if a.kind == 'read' else lb} is not written by lane "
                            f"{lb if a.kind == 'read' else la}", negate(same), {"index": tuple(a.index)}, i))
    return out


def claimed(case: KernelCase, *lanes: int | None) -> bool:
    """Whether the claims about ``lanes`` (an access's or intermediate's lane,
    None for every lane's; two lanes for a pair) are stated: always, but for
    a row block's sampled lanes only lane 0 and the pair (0, 1), since the
    lanes are symmetric (each at any position, distinct from the others):
    the claims about lane 1 or 2 are lane 0's at another position, those
    about the pair (0, 2) or (1, 2) the pair (0, 1)'s."""
    if case.block is None:
        return True
    named = {x for x in lanes if x is not None}
    if len(lanes) == 1:
        return named <= {0}
    sample = case.block.sample
    # a pair needs a third lane as the witness of a reduction, or the whole block
    return named <= {0, 1} and (len(sample.positions) >= 3 or len(sample.positions) == sample.width
                                or case.run.reductions == 0)


def lane_of(run: KernelRun) -> dict[int, int]:
    """The lane of every access a load or store through a block of pointers
    made (its position in the block); accesses through a scalar pointer are every lane's."""
    return {i: lane for lanes in run.block_stores + run.block_loads for lane, i in enumerate(lanes)}


def kernel_exclusive(spec: BlockSpec, run: KernelRun, other_program: bool) -> list[Fact]:
    """``exclusive_decode_live_slot`` of each row of ``spec`` against the
    kernel tracker writes of another lane (``other_program``: of every lane
    of another program), at the cell each write designates."""
    out = []
    lanes = lane_of(run)
    for i, w in enumerate(run.mem.accesses):
        if w.kind != "write" or w.buffer not in TRACKERS:
            continue
        for a, (me, on) in enumerate(zip(spec.rows, spec.launched)):
            if not other_program and lanes.get(i, a) == a:
                continue
            same_group = conj(on, w.guard, w.index[0] == spec.group)
            out.append((env.EXCLUSIVE_DECODE_LIVE_SLOT.name, implies(same_group, env.EXCLUSIVE_DECODE_LIVE_SLOT(
                me.trace.live_slot, me.trace.decode, w.index[1], me.geo.pad_slot))))
    return out


def _show(spec: BlockSpec) -> dict:
    out = {"block": spec.block}
    for i, r in enumerate(spec.rows):
        out.update({f"row{i}.{k}": v for k, v in r.show().items()})
    return out


def rows_case(jit: Jit, conv: Conventions, geo: Geometry, label: str, *, program: str = "p",
              arrays: dict | None = None, sizes: Sizes | None = None, width: int = ROWS, compact: bool = False) -> KernelCase:
    """A row block's program ``(block_<program>, group_<program>)`` (``block * width < num_reqs``) of a
    launch of ``width`` rows per program, with the work list (``compact``) or without, at sampled lanes."""
    spec = block_spec(conv, geo, program, arrays if arrays is not None else {}, sizes, width)
    row0 = spec.rows[0]
    sz = row0.sizes
    facts = (lift(spec.block >= 0), lift(spec.block * width < sz.num_reqs), lift(lane_positions(spec.sample)))
    launch = blocked_launch(row0.mem, conv, geo, (spec.block, spec.group), sz.num_reqs,
                            compact, facts, width, spec.sample)
    run = run_kernel(jit, launch, row0.mem, program)
    assumptions = spec.assumptions + [("launch_facts", z3.And(*facts))] + memory_facts(run.mem, geo, sz)
    assumptions += kernel_exclusive(spec, run, other_program=False)
    cover = disj(*[conj(on, r.trace.wants_materialize if conv.materialize_prefixes else r.trace.decode)
                   for r, on in zip(spec.rows, spec.launched)])
    case = KernelCase("blocked", label, row0.mem, run, assumptions,
                      cover, _show(spec), row0, {**conv.as_constexprs(), "geometry": geo, "ROWS_PER_PROGRAM": width,
                                                 "COMPACT": compact})
    case.block = spec
    return case


def compaction_case(jit: Jit, conv: Conventions, geo: Geometry, label: str, width: int = ROWS) -> KernelCase:
    """The work-list program ``(cdiv(num_reqs, width), group)`` of a ``COMPACT`` launch of ``width`` rows per program."""
    arrays: dict = {}
    cap = geo.max_num_reqs
    rows = [postprocess_case(conv, geo, program="r0", arrays=arrays)]
    sz = rows[0].sizes
    rows += [postprocess_case(conv, geo, program=f"r{i}", arrays=arrays, sizes=sz) for i in range(1, cap)]
    block, group = named_int("block_c"), named_int("group_c")
    launched = [r.trace.batch < sz.num_reqs for r in rows]
    a = [("work_list_program", conj(block * width >= sz.num_reqs, (block - 1) * width < sz.num_reqs, group >= 0,
                                    group < sz.groups, sz.num_reqs >= 0, sz.num_reqs <= cap)),
         ("rows_of_group_0", conj(*[conj(r.trace.batch == i, r.trace.group == 0) for i, r in enumerate(rows)]))]
    for r, on in zip(rows, launched):
        a += [(n, implies(on, t)) for n, t in r.assumptions]
    flush = z3.Const("plan_flush_count_after_rows", z3.ArraySort(z3.IntSort(), z3.IntSort()))
    for i, r in enumerate(rows):
        flush = z3.Store(flush, i, lift(r.mem.final("plan_flush_count", (i,))))
    shapes = {"plan_flush_count": (cap,), "active_request_indices": (cap,)}
    spec_mem = GuardedMemory(shapes, {"plan_flush_count": flush,
                                      "active_request_indices": rows[0].mem.array("active_request_indices")},
                             "spec", when=group == 0)
    trace = compact_program(spec_mem, cap, sz.num_reqs, next_power_of_2(cap))
    facts = (lift(block * width >= sz.num_reqs), lift(block >= 0))
    launch = blocked_launch(rows[0].mem, conv, geo, (block, group), sz.num_reqs, True, facts, width)
    run = run_kernel(jit, launch, rows[0].mem, "p")
    a += [("launch_facts", z3.And(*facts))] + memory_facts(run.mem, geo, sz)
    show = {"num_reqs": sz.num_reqs, "group": group}
    for i, r in enumerate(rows):
        show.update({f"row{i}.{k}": v for k, v in r.show().items() if k in ("prefilling", "computed_before",
                                                                            "query_len", "live_col", "plan_flush")})
    case = KernelCase("blocked", label, spec_mem, run, a, conj(group == 0, trace.num_active >= 1), show, rows[0],
                      {**conv.as_constexprs(), "geometry": geo, "ROWS_PER_PROGRAM": width, "COMPACT": True})
    # a row publishes whatever its trackers hold only when they are in range
    case.required = (INVARIANT_TRACKER_RANGE,)
    return case
