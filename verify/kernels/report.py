"""A failed kernel obligation, explained and made replayable.

:func:`explain` re-solves the failing case for a small launch (few groups,
columns, slots, rows; the failing program at row 0 where it can be), names
the kernel, source line, program ids, buffer, index and extent of the first
violated part, lists the inputs, says for an equivalence failure under which
of the behavioural assumptions it would hold, and turns the model into a
trace in the fuzz format (``params``, a ``set_state`` action, the launch
action) that ``replayssm-verify replay`` runs on the real kernel under
Triton's interpreter (:mod:`.playback`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import z3

from replayssm.base.traces import TRACE_ID
from replayssm.spec.launch import allocate
from replayssm.spec.vocab import conj, disj, implies

from ..counterexamples import _value
from ..obligation import TIMEOUT_MS, Facts, fact_vector, new_solver
from ..memory import SymbolicMemory
from ..terms import Symbolic, lift
from .cases import KernelCase
from .obligations import KERNEL_OBLIGATIONS, KernelClaim, kernel_claim

if TYPE_CHECKING:
    from replayssm.spec.geometry import Geometry

STATE = ("ring_start", "num_committed", "plan_ring_start", "plan_flush_count", "src_slots", "dst_slots",
         "active_request_indices")


@dataclass
class KernelCaseReport:
    """What a report says about one failed case."""

    text: str
    trace: dict | None = None
    verdict: str = ""
    details: dict = field(default_factory=dict)


SEARCH_RLIMIT = 200_000_000
"""Z3's resource limit on each query of a report (about 12 s of one core of this project's 2-core
machine, quiet): a count of the solver's steps, not a time, so that a report finds the same
counterexample, or the same none, on a loaded machine as on a quiet one (a wall-clock limit made two
reviews of one version with one seed explain a kernel finding differently under load)."""

SEARCH_WATCHDOG_MS = 120_000
"""The wall-clock limit on each query of a report: a watchdog only, far past :data:`SEARCH_RLIMIT`'s time."""


class Search(NamedTuple):
    """One bounded query's answer: a model, or none with whether Z3 showed none exists."""

    model: z3.ModelRef | None
    none_exists: bool


def _search(facts: Facts, extra: list, goal: Symbolic) -> Search:
    """A model of ``facts``, ``extra`` and not ``goal`` within :data:`SEARCH_RLIMIT`; without one,
    whether Z3 proved there is none (unsat) rather than ran out of its steps (unknown)."""
    s = new_solver(facts, *extra, z3.Not(lift(goal)), timeout_ms=SEARCH_WATCHDOG_MS)
    s.set("rlimit", SEARCH_RLIMIT)
    answer = s.check()
    return Search(s.model() if answer == z3.sat else None, answer == z3.unsat)


def _solve(facts: Facts, extra: list, goal: Symbolic) -> z3.ModelRef | None:
    """A model of ``facts``, ``extra`` and not ``goal``, or None (none within :data:`SEARCH_RLIMIT`)."""
    return _search(facts, extra, goal).model


def _small(kc: KernelClaim, groups: int, rows_limit: int | None, cols_limit: int) -> list:
    """Constraints that make a counterexample launch small enough to replay."""
    case = kc.cases[0]
    if kc.role.replay.by_capacity:
        return []
    sz = case.spec.sizes
    mem = _initial_memory(case)
    rows = case.constexprs["geometry"].max_num_reqs
    layers = [mem.initial("num_layers", (g,)) for g in range(groups)]
    out = [sz.groups == groups, sz.num_cols >= 1, sz.num_cols <= cols_limit, sz.num_slots >= 1, sz.num_slots <= SMALL_SLOTS,
           sz.num_reqs >= 1, sz.num_reqs <= min(rows, rows_limit or rows),
           # positions of a few blocks per column allowed: a replayed loop over blocks stays short
           sz.max_model_len <= cols_limit * case.constexprs["geometry"].block_size]
    if kc.role.replay.packed:
        base = 0
        for g, n in enumerate(layers):
            out += [n >= 1, n <= 2, mem.initial("packed_base", (g,)) == base]
            base = base + n * rows
        out.append(sz.total_layers * rows == base)
    if rows_limit == 1 and len(kc.cases) == 1:
        out.append(case.run.launch.program_ids[0] == 0)
    return out + _sampled_rows_only(kc, groups, min(rows, rows_limit or rows)) + \
        _every_cell(case, groups, min(rows, rows_limit or rows), cols_limit)


def _sampled_rows_only(kc: KernelClaim, groups: int, rows: int) -> list:
    """For row blocks proved at sampled lanes: every launched row is a sampled
    lane's, so every row of the replayed launch keeps the caller contract (a
    row no lane stands for has inputs the proof left free)."""
    if kc.cases[0].block is None:  # the work-list program's case has every row
        return []
    sampled = [r.trace for c in kc.cases if c.block is not None for r in c.block.rows]
    sz = kc.cases[0].spec.sizes
    return [implies(conj(b < sz.num_reqs, g < sz.groups), disj(*[conj(t.batch == b, t.group == g) for t in sampled]))
            for g in range(groups) for b in range(rows)] + _sampled_rows_exclusive(kc, sampled, sz.num_reqs)


def _sampled_rows_exclusive(kc: KernelClaim, sampled: list, num_reqs: Symbolic) -> list:
    """``exclusive_decode_live_slot`` between every two sampled rows of one group, in the spec's
    terms (each row's live slot, and its destination slot where it publishes). The proof states it
    at the cells the kernel under proof writes; a planted kernel that writes other cells leaves the
    rows' own slots free to alias, and a replay of such a launch (every row run) then breaks the
    correct kernel too: a trace outside the caller contract, which tells nothing."""
    from replayssm.spec import assumptions as env

    pad = kc.cases[0].constexprs["geometry"].pad_slot
    out = []
    for i, a in enumerate(sampled):
        for b in sampled[i + 1:]:
            together = conj(a.batch < num_reqs, b.batch < num_reqs, a.group == b.group, a.batch != b.batch)
            for me, other in ((a, b), (b, a)):
                out.append(implies(together, env.EXCLUSIVE_DECODE_LIVE_SLOT(me.live_slot, me.decode, other.live_slot, pad)))
                out.append(implies(conj(together, other.materialize),
                                   env.EXCLUSIVE_DECODE_LIVE_SLOT(me.live_slot, me.decode, other.dst_slot, pad)))
    return out


def _initial_memory(case: KernelCase) -> SymbolicMemory:
    """The memory holding the launch's initial arrays: the spec scenario's
    (for the row-blocked work list, the rows' one, not the compaction's)."""
    return case.spec.mem if hasattr(case.spec, "mem") else case.spec_mem


def _every_cell(case: KernelCase, groups: int, rows: int, cols: int) -> list:
    """The memory's part of the caller contract at every cell of the small
    launch, not only at the cells the proof's terms read: a loop's read is one
    symbolic iteration, so the other columns it reads on replay must be valid
    slots too, and the trackers of every slot in range."""
    from replayssm.spec import assumptions as env
    from replayssm.spec.flashinfer import tracker_in_range

    sz, mem, geo = case.spec.sizes, _initial_memory(case), case.constexprs["geometry"]
    out = []
    for g in range(groups):
        for b in range(rows):
            for c in range(cols):
                inside = conj(b < sz.num_reqs, c < sz.num_cols)
                slot = mem.initial("block_table", (g, b, c))
                out.append(implies(inside, env.SLOT_IN_CAPACITY(slot, sz.num_slots, geo.pad_slot)))
        for s in range(SMALL_SLOTS):
            for buffer in ("ring_start", "num_committed"):
                out.append(implies(s < sz.num_slots, tracker_in_range(buffer, mem.initial(buffer, (g, s)), geo)))
    return out


SMALL_SLOTS = 12
"""The most slots (tracker entries per group) of a replayable launch."""

SMALL_LAUNCHES = ((1, 1, 6), (2, 1, 6), (1, 3, 6), (2, 3, 6), (1, None, 6), (2, None, 6), (1, 1, 1024))
"""``(groups, most rows, most block-table columns)`` of the launches tried
for a counterexample, in order (one row: the failing program is row 0; None:
as many rows as the geometry's MAX_NUM_REQS allows; 1024 columns: positions
large enough for an overflow)."""


def counterexample_model(kc: KernelClaim, extra: list | None = None,
                         first: str | None = None) -> tuple[z3.ModelRef, int, bool] | None:
    """A model of the first violated part, as small as possible, under the
    claim's assumptions and ``extra`` (the behavioural ones its verdict names);
    with the part's index and whether the model is small (replayable).
    ``first``: the name of the first part the proof found violated (the parts
    before the first so named hold, so they are not tried again)."""
    facts = fact_vector([f for _, f in kc.claim.assumptions] + list(extra or []))
    tiers: dict[tuple, Facts] = {}  # each launch tier's constraints, built when first tried
    start = next((i for i, p in enumerate(kc.parts) if p.name == first), 0)
    for i, part in enumerate(kc.parts[start:], start):
        m = _solve(facts, [], part.term)
        if m is None:
            continue
        for seen in ([part.observable], []):
            for tier in SMALL_LAUNCHES:
                if tier[0] > 1 and kc.role.replay.one_group:
                    continue
                if tier not in tiers:
                    tiers[tier] = fact_vector(_small(kc, *tier))
                small = _solve(facts, [*seen, tiers[tier]], part.term)
                if small is not None:
                    return small, i, True
        return m, i, False
    return None


def verdict(kc: KernelClaim) -> tuple[str, list]:
    """For an equivalence failure: the smallest set of the behavioural
    assumptions under which the program equals the spec, tried one at a
    time, then all of them; with the behavioural assumptions an example of
    the difference can keep (all of them, or all but the one named). "Equals
    the spec under" is said only where Z3 proved it; a query that ran out of
    its steps says so and names no assumption."""
    facts = fact_vector(f for _, f in kc.claim.assumptions)
    goal = z3.And(*[lift(p.term) for p in kc.parts])
    names = list(dict.fromkeys(n for n, _ in kc.optional))
    for name in names:
        extra = [f for n, f in kc.optional if n == name]
        if _search(facts, extra, goal).none_exists:
            others = [f for n, f in kc.optional if n != name]
            keep = others if _solve(facts, others, goal) is not None else []
            return f"equals the spec under {{{name}}}; differs without it", keep
    every = [f for _, f in kc.optional]
    together = _search(facts, every, goal)
    if together.none_exists:
        return f"equals the spec under {{{', '.join(names)}}} together; differs without them", []
    if together.model is not None:
        return "differs from the spec even under every caller assumption", every
    return (f"differs from the spec; the report's search ({SEARCH_RLIMIT:,} solver steps) did not decide "
            f"whether {{{', '.join(names)}}} would make it equal"), []


def _eval(m: z3.ModelRef, t: Symbolic) -> int | bool | str:
    """``t``'s value in ``m``; a term the model leaves quantified (a loop
    store's "some iteration hits") is decided by a one-variable solve."""
    v = m.eval(lift(t), model_completion=True)
    if z3.is_int_value(v) or z3.is_true(v) or z3.is_false(v):
        return _value(m, v)
    y = z3.Int("value") if z3.is_int(v) else z3.Bool("value")
    s = z3.Then("qe", "smt").solver()
    s.set("timeout", TIMEOUT_MS)
    s.add(y == v)
    return _value(s.model(), y) if s.check() == z3.sat else str(v)


def _size(m: z3.ModelRef, t: Symbolic) -> int:
    """``t``'s value in ``m``, a size of the launch (an integer)."""
    v = _eval(m, t)
    if not isinstance(v, int):
        raise ValueError(f"a launch size that the model leaves symbolic: {v}")
    return v


def _array_table(m: z3.ModelRef, arr: z3.ArrayRef) -> tuple[dict, z3.ExprRef] | None:
    """The model's value of an array as ``({index: value}, else value)``, or
    None when it is not a table of constants."""
    v = m.eval(arr, model_completion=True)
    if z3.is_as_array(v):
        entries = m[z3.get_as_array_func(v)].as_list()
        return {tuple(e.as_long() for e in row[:-1]): row[-1] for row in entries[:-1]}, entries[-1]
    table: dict = {}
    while z3.is_store(v):
        *index, value = v.children()[1:]
        if all(z3.is_int_value(i) for i in index):
            table.setdefault(tuple(i.as_long() for i in index), value)
        else:
            return None
        v = v.children()[0]
    if z3.is_const_array(v):
        return table, v.children()[0]
    return None


def _cells(m: z3.ModelRef, mem: SymbolicMemory, buffer: str, shape: tuple, default: np.ndarray | None) -> list:
    """Every entry of ``buffer`` in the model (int32 values; anything else 0)."""
    arr = mem.arrays.get(buffer)
    if arr is None:
        return default.tolist() if default is not None else np.zeros(shape, dtype=np.int64).tolist()

    def number(v: z3.ExprRef) -> int:
        value = v.as_long() if z3.is_int_value(v) else 0
        return value if -(2**31) <= value < 2**31 else 0

    table = _array_table(m, arr)
    if table is None:
        out = np.zeros(shape, dtype=np.int64)
        for idx in np.ndindex(*shape):
            out[idx] = number(m.eval(z3.Select(arr, *[z3.IntVal(i) for i in idx]), model_completion=True))
        return out.tolist()
    entries, otherwise = table
    out = np.full(shape, number(otherwise), dtype=np.int64)
    for idx, v in entries.items():
        if len(idx) == len(shape) and all(0 <= i < n for i, n in zip(idx, shape)):
            out[idx] = number(v)
    return out.tolist()


def make_trace(kc: KernelClaim, m: z3.ModelRef, name: str, impl: str | None) -> dict:
    """The model as a fuzz trace: ``set_state`` of the state buffers, then the launch."""
    case = kc.cases[0]
    mem = _initial_memory(case)
    replay = kc.role.replay
    if replay.by_capacity:
        cap = case.constexprs["MAX_NUM_REQS"]
        params = {"geometry": {"max_num_reqs": cap, "block_size": 1, "window": 1, "ring_len": 2, "pad_slot": 0},
                  "conventions": {"cumulative": False, "post_step": False, "has_idx_mapping": False,
                                  "materialize_prefixes": True, "live_col_is_zero": False},
                  "layers_per_group": [1], "num_cols": 1, "num_slots": 1}
        num_reqs = _eval(m, kc.show["num_reqs"])
        shapes = {b: (cap,) for b in ("plan_flush_count", "active_request_indices")}
        init = allocate(_geometry(params), 1, 1, [1])
        state = {b: _cells(m, mem, b, shapes.get(b, init[b].shape), init[b]) for b in STATE}
        picks: dict = {"num_reqs": num_reqs}
    else:
        sz = case.spec.sizes
        geo = case.constexprs["geometry"]
        groups, num_cols, num_slots = (_size(m, x) for x in (sz.groups, sz.num_cols, sz.num_slots))
        layers = [max(1, _size(m, mem.initial("num_layers", (g,)))) for g in range(groups)] \
            if replay.packed else [1] * groups
        conv = {k: bool(case.constexprs.get(c, False)) for k, c in (
            ("cumulative", "QUERY_METADATA_IS_CUMULATIVE"), ("post_step", "NUM_COMPUTED_IS_POST_STEP"),
            ("has_idx_mapping", "HAS_IDX_MAPPING"), ("materialize_prefixes", "MATERIALIZE_PREFIXES"),
            ("live_col_is_zero", "LIVE_COL_IS_ZERO"))}
        params = {"geometry": {"max_num_reqs": geo.max_num_reqs, "block_size": geo.block_size,
                               "window": geo.window, "ring_len": geo.ring_len, "pad_slot": geo.pad_slot},
                  "conventions": conv, "layers_per_group": layers, "num_cols": num_cols, "num_slots": num_slots}
        init = allocate(geo, num_cols, num_slots, layers)
        state = {b: _cells(m, mem, b, init[b].shape, init[b]) for b in STATE}
        num_reqs = _eval(m, sz.num_reqs)
        picks = {"num_reqs": num_reqs, "block_table": _cells(m, mem, "block_table", init["block_table"].shape, None)}
        for b in replay.inputs:
            if b == "idx_mapping" and not conv["has_idx_mapping"]:
                continue
            shape = tuple(_eval(m, n) if not isinstance(n, int) else n for n in case.mem.shapes[b])
            values = _cells(m, mem, b, shape, None)
            picks[b] = [bool(v) for v in values] if b == "is_prefilling" else values
    action = {"name": replay.action, "caller": ["kernel proof counterexample"], "picks": picks}
    set_state = {"name": "set_state", "caller": ["the memory before the launch"], "picks": state}
    meta = {"format": TRACE_ID, "source": "kernel-proof", "obligation": name, "case": kc.claim.case,
            "kernel": kc.role.jits[0], "role": kc.role.name, "property": kc.prop, "impl": impl}
    if replay.meta is not None:
        meta.update(replay.meta(case))
    return {"params": params, "actions": [set_state, action], "#meta": meta}


def _geometry(params: dict) -> Geometry:
    from replayssm.spec.geometry import Geometry

    return Geometry(**params["geometry"])


def explain(name: str, case_label: str, impl: str | None = None, violated: str | None = None) -> KernelCaseReport:
    """Rebuild obligation ``name``'s case ``case_label`` and explain its failure
    (``violated``: the first part the proof found violated, where it says)."""
    ob = KERNEL_OBLIGATIONS[name]
    module, role, prop = ob.module, ob.role, ob.prop
    kc = kernel_claim(module, role, prop, case_label)
    if kc.unsupported is not None:
        return KernelCaseReport(f"  {kc.unsupported}")
    text_verdict, keep = verdict(kc) if prop == "equivalence" else ("", [])
    found = counterexample_model(kc, keep, violated)
    if found is None:
        return KernelCaseReport("  (the failure did not reappear when re-solved: no counterexample)")
    m, i, small = found
    part = kc.parts[i]
    lines = [f"  kernel {role.kernel_name(module)} ({case_label}), {part.name}"]
    progs = []
    for c in kc.cases:
        ids = [_eval(m, x) if not isinstance(x, int) else x for x in c.run.launch.program_ids]
        progs.append(f"{c.mem.program}: program_id {tuple(ids)}")
    lines.append("  programs: " + "; ".join(progs))
    details: dict = {"part": part.name, "line": list(part.where), "programs": progs}
    for k, t in part.terms.items():
        v = [_eval(m, x) for x in t] if isinstance(t, tuple) else _eval(m, t)
        details[k] = v
        if k != "guard":
            lines.append(f"  {k}: {v}")
    inputs = {k: _eval(m, t) for k, t in kc.show.items()}
    lines.append("  inputs: " + ", ".join(f"{k}={v}" for k, v in inputs.items()))
    if text_verdict:
        lines.append(f"  verdict: {text_verdict}, e.g. the inputs above")
    trace = make_trace(kc, m, name, impl) if small else None
    if trace is not None:
        trace["#meta"]["kernel"] = role.kernel_name(module)
    if not small:
        lines.append("  (no small launch shows it: the trace is not written)")
    return KernelCaseReport("\n".join(lines), trace, text_verdict, {**details, "inputs": inputs})


def save_trace(finding: KernelCaseReport, folder: Path, name: str) -> Path | None:
    """Write the finding's trace beside the counterexample; returns its path."""
    if finding.trace is None:
        return None
    from replayssm.base.reports import write_text

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.kernel-trace.json"
    write_text(str(path), json.dumps(finding.trace))  # whole or not at all (a full disk leaves no 0-byte file)
    return path
