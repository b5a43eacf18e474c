"""A distinguishing input of the kernel diff: minimised, replayed on both kernels, judged.

The smallest launch first (:func:`small_models`), replayed on both versions
under Triton's interpreter, each in its own process where it comes with one
(:func:`replay`), and judged by what the lifecycle asks of one launch
(:func:`judge`: a fix, a regression, a change that breaks nothing, or both break).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import z3

from ..obligation import TIMEOUT_MS, Claim, Facts, fact_vector, new_solver
from ..terms import Symbolic, lift
from .diff_pairs import PairCase
from .diff_results import BOTH_BREAK, CHANGE, FIX, REGRESSION, UNCONFIRMED, Distinction
from .frame import FrameViolation
from .obligations import KernelClaim, Part

def _claim(pc: PairCase, facts: list, parts: list[Part], side: str = "head") -> KernelClaim:
    """The pair as a ``KernelClaim`` over one side's case and record, for
    :mod:`.report`'s small-launch constraints and trace."""
    claim = Claim([(p.name, p.term) for p in parts], facts, True, pc.label)
    case, role = (pc.head, pc.role) if side == "head" else (pc.base, pc.base_role)
    # a padding program's trace replays as its padding obligation's (stray accesses on the launch)
    return KernelClaim(role, "padding" if pc.padding else "equivalence", claim, parts, [case], show=case.show)


MINIMISE_MS = 5_000
"""The solver's time for one query of the minimisation (an unknown keeps the larger launch)."""


def _model(facts: list | Facts, extra: list, goal: Symbolic, timeout_ms: int = TIMEOUT_MS) -> z3.ModelRef | None:
    s = new_solver(facts if isinstance(facts, Facts) else fact_vector(f for _, f in facts), *extra,
                   z3.Not(lift(goal)), timeout_ms=timeout_ms)
    return s.model() if s.check() == z3.sat else None


def small_models(pc: PairCase, facts: list, parts: list[Part]) -> Iterator[z3.ModelRef]:
    """Models violating ``parts``' conjunction, smallest first: one per
    launch tier of :data:`.report.SMALL_LAUNCHES` that has one (one group and
    one row first; one group only where the replayed launch is one group's),
    each with the fewest requests, columns, slots and layers (each pinned, by
    bisection, to its smallest value that still admits a model). A padding
    program is never row 0: a tier bounds its ``num_reqs``, not its row."""
    from .report import SMALL_LAUNCHES, _small

    kc = _claim(pc, facts, parts)
    goal = z3.And(*[lift(p.term) for p in parts])
    vector = fact_vector(f for _, f in facts)
    for groups, rows, cols in SMALL_LAUNCHES:
        if groups > 1 and pc.role.replay.one_group:
            continue
        bound = [lift(pc.head.spec.sizes.num_reqs) <= rows] if pc.padding and rows else []
        small = [fact_vector(_small(kc, groups, None if pc.padding else rows, cols) + bound + _replayable(pc))]
        m = _model(vector, small, goal)
        if m is None:
            continue
        for size in _sizes(pc):
            value = m.eval(lift(size), model_completion=True)
            if not z3.is_int_value(value):
                continue
            lo, hi = 0, value.as_long()  # bisect for the smallest value that still admits a model
            while lo < hi:
                mid = (lo + hi) // 2
                tighter = _model(vector, small + [lift(size) <= mid], goal, MINIMISE_MS)
                if tighter is not None:
                    hi, m = min(mid, tighter.eval(lift(size), model_completion=True).as_long()), tighter
                else:
                    lo = mid + 1
            small = small + [lift(size) == hi]
        yield m


REPLAYABLE = 4096
"""The largest magnitude of a shown input (positions, lengths, counts) of a
replayed launch: the interpreter runs a kernel's loops one iteration at a time."""


def _replayable(pc: PairCase) -> list:
    """Every integer input the case shows within :data:`REPLAYABLE` (outside
    the guaranteed contract positions are unbounded, and a prefill reset
    would loop over them all)."""
    terms = [lift(t) for t in pc.head.show.values() if not isinstance(t, (bool, int))]
    return [z3.And(t >= -REPLAYABLE, t <= REPLAYABLE) for t in terms if z3.is_int(t)]


def _sizes(pc: PairCase) -> list:
    """The launch sizes to minimise, in order (a padding program's row after ``num_reqs``)."""
    case = pc.head
    if pc.role.replay.by_capacity:
        return [case.show["num_reqs"]]
    sz = case.spec.sizes
    return [sz.num_reqs] + ([case.row[0]] if pc.padding else []) + [sz.num_cols, sz.num_slots, sz.total_layers]


REPLAYS = 3
"""How many small launches (tiers) a distinction tries until one shows the
difference on the real kernels: a difference of one program may not show in
the whole launch (another program writes the cell alike)."""


def distinguish(pc: PairCase, violated: list[Part], inside_full: bool, base: ModuleType, head: ModuleType,
                base_label: str, head_label: str, remotes: tuple = (None, None)) -> Distinction:
    """The smallest distinguishing input of ``pc`` (under the full contract
    when one exists there), replayed on both kernels and judged; the next
    tier's input when the replay does not show it (at most :data:`REPLAYS`)."""
    from .report import _eval, make_trace

    facts = pc.guaranteed + pc.optional if inside_full else pc.guaranteed
    first: Distinction | None = None
    for n, m in enumerate(small_models(pc, facts, violated)):
        d = Distinction(pc.label, pc.role.replay.spec is not None, pc.padding, [p.name for p in violated],
                        inside_full)
        d.inputs = {k: _eval(m, t) for k, t in pc.head.show.items()}
        if not inside_full:
            d.outside = list(dict.fromkeys(name for name, f in pc.optional
                                           if z3.is_false(m.eval(lift(f), model_completion=True))))
        traces = {side: make_trace(_claim(pc, facts, violated, side), m, f"diff.{pc.role.name}", None)
                  for side in ("base", "head")}
        for t in traces.values():
            t["#meta"].update(diff=[base_label, head_label])
        d.trace = traces["head"]
        p = d.trace["params"]
        d.launch = {"geometry": p["geometry"], "groups": len(p["layers_per_group"]), "layers": p["layers_per_group"],
                    "num_cols": p["num_cols"], "num_slots": p["num_slots"],
                    "num_reqs": d.trace["actions"][1]["picks"]["num_reqs"]}
        replay(d, pc, traces, base, head, remotes)
        first = first or d
        if d.replayed or n + 1 >= REPLAYS:
            return d if d.replayed else first
    if first is not None:
        return first
    d = Distinction(pc.label, pc.role.replay.spec is not None, pc.padding, [p.name for p in violated], inside_full)
    d.judgement = "not judged: no small launch shows it (no replay)"
    return d


def replay(d: Distinction, pc: PairCase, traces: dict, base: ModuleType, head: ModuleType,
           remotes: tuple = (None, None)) -> None:
    """Run the distinction's launch on both real kernels (Triton's
    interpreter; each version through its own record and its own trace of
    the one model, in its own process where ``remotes`` has it) and the
    spec; fill in the cells that differ, what each version breaks (a fault
    of its process in the launch: ``process: ...``, with ``faults``), and
    the judgement."""
    from replayssm.base.isolation import TargetFault, TargetGone

    from .playback import fault_of, kernel_outputs

    outs = {}
    for side, module, role, case, remote in (("base", base, pc.base_role, pc.base, remotes[0]),
                                             ("head", head, pc.role, pc.head, remotes[1])):
        try:
            final, result = kernel_outputs(traces[side], module, role, remote)
        except (TargetFault, TargetGone) as e:
            fault = fault_of(e)
            remote.close()  # its process may be changed: the next use starts a fresh one
            d.broken[side] = [f"process: a {fault.kind} of the target: {fault.reason}"]
            d.faults[side] = fault.report()
            continue
        outs[side] = final
        broken = []
        if result.out_of_bounds:
            broken.append(f"memory: {result.out_of_bounds[0]}")
        if result.overflows:
            broken.append(f"int32: {result.overflows[0]}")
        if result.conflicts:
            broken.append(f"conflicts: {result.conflicts[0]}")
        if result.discrepancies:
            broken.append(f"the spec program's result: {len(result.discrepancies)} cell(s), e.g. "
                          f"{result.discrepancies[0]}")
        broken += launch_breaks(final, {w.buffer for w in case.mem.writes}, traces[side]["params"],
                                traces[side]["actions"][1]["picks"]["num_reqs"])
        broken += padding_stores(result.outside_frame, traces[side]["actions"][1]["picks"]["num_reqs"])
        d.broken[side] = broken
    for b in outs.get("base", {}):
        if b not in outs.get("head", {}) or np.shape(outs["base"][b]) != np.shape(outs["head"][b]):
            continue
        x, y = outs["base"][b], outs["head"][b]
        for cell in zip(*np.nonzero(x != y)):
            d.cells.append(f"{b}{[int(i) for i in cell]}: base {int(x[cell])}, head {int(y[cell])}")
    d.judgement = judge(d)
    if d.outside:
        d.judgement = (f"{CHANGE} for callers keeping the contract (the input breaks {', '.join(d.outside)}); "
                       f"on that input: {d.judgement}")


def launch_breaks(final: dict, written: set, params: dict, num_reqs: int) -> list[str]:
    """What one launch's outputs break of the lifecycle's contract with
    FlashInfer (``review/lifecycle.py``'s ``materialize`` and the tracker
    range of ``refinement``), checked on the buffers the version writes:
    trackers in range and, in align mode (where FlashInfer materializes the
    plan), every plan row of the launch (below ``num_reqs``) with a flush
    ring start in ``[0, R)`` and flush count in ``[0, W]``, and a work list
    whose rows before its first -1 are distinct (FlashInfer reads no further:
    ``spec/generations/contract.py`` ``work_list_read_to_first_end``)."""
    geo = params["geometry"]
    align = params["conventions"]["materialize_prefixes"]
    ring, window = geo["ring_len"], geo["window"]
    out = []
    for b, lo, hi in (("ring_start", 0, ring - 1), ("num_committed", 0, window)):
        if b in written and b in final:
            bad = np.argwhere((final[b] < lo) | (final[b] > hi))
            if len(bad):
                cell = [int(i) for i in bad[0]]
                out.append(f"tracker range: {b}{cell} = {int(final[b][tuple(cell)])} not in [{lo}, {hi}]")
    if align and "plan_flush_count" in written and "plan_flush_count" in final:
        flush, start = final["plan_flush_count"].reshape(-1), final["plan_ring_start"].reshape(-1)
        for row, (k, r) in enumerate(zip(flush[:num_reqs], start[:num_reqs])):
            if k >= 0 and not (0 <= r < ring and k <= window):
                out.append(f"materialize contract: plan row {row} ring_start {int(r)}, flush_count {int(k)} "
                           f"(want [0, {ring}) and [0, {window}])")
                break
    if align and "active_request_indices" in written and "active_request_indices" in final:
        # FlashInfer stops at the first -1 (work_list_read_to_first_end): a stale entry past it breaks nothing
        active = [int(x) for x in final["active_request_indices"].reshape(-1)]
        rows = [v for v in active[:next((i for i, v in enumerate(active) if v < 0), len(active))]]
        if len(set(rows)) != len(rows):
            out.append(f"materialize contract: work list {active} does not list distinct rows before its first -1")
    return out


def padding_stores(outside_frame: list[FrameViolation], num_reqs: int) -> list[str]:
    """The first store outside its frame of a padding program (its row ``>= num_reqs``)
    among a playback's: a padding program's frame holds no request's state, so
    such a store overwrites what a real row or FlashInfer reads."""
    return [f"padding program frame: {v}" for v in outside_frame if v.batch >= num_reqs][:1]


def judge(d: Distinction) -> str:
    """The class of a replayed difference, by what each version breaks."""
    base, head = bool(d.broken.get("base")), bool(d.broken.get("head"))
    differ = sorted({c.split("[")[0] for c in d.cells}) or d.buffers
    if base and not head:
        return f"{FIX}: base breaks {d.broken['base'][0]}; head does not"
    if head and not base:
        return f"{REGRESSION}: head breaks {d.broken['head'][0]}; base does not"
    if base and head:
        return f"{BOTH_BREAK}: {', '.join(differ)} differ; base breaks {d.broken['base'][0]}, head breaks " \
               f"{d.broken['head'][0]}"
    if not d.cells:
        return (f"{UNCONFIRMED}: one program of each leaves {', '.join(differ)} different, but the whole launch "
                "on this input does not (another program writes those cells alike)")
    kept = "the spec's result, memory safety, int32, conflict freedom and the plan contract" if d.has_spec else \
        ("memory safety, int32, conflict freedom and the plan and tracker contract (the role has no spec "
         "program: what the step makes of it is the lifecycle campaign's to judge)")
    if d.padding:
        kept += "; their padding programs store only inside their frames"
    return f"{CHANGE}: {', '.join(differ)} differ, both keep {kept}"
