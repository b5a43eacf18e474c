"""Proved differences between two versions of a kernel: equal on every input
inside the contract, or a distinguishing input, replayed and judged.

For each kernel role both versions define (a :class:`.roles.KernelRole` of
the registry, :data:`.registry.REFERENCE` by default), and each constexpr
variant its record lists, both
kernels run on symbolic memory over the *same* inputs: every input of a case
is a named Z3 term (``mem_<buffer>`` arrays, ``batch_p``, ``num_reqs``, ...),
so two cases built from one variant share them. The claim, per buffer either
version writes, at an arbitrary cell inside it::

    contract  =>  base's final value == head's final value

for the program of a row below ``num_reqs`` and, where both records' grids
span ``max_num_reqs`` rows (:attr:`.roles.KernelRole.padding`: B, C, D),
for a *padding* program too: a row ``num_reqs <= batch < max_num_reqs``
(the ``padding_programs_past_num_reqs`` choice), whose case assumes nothing
of the row's stale inputs (:func:`.named.padding_case`), so its
distinguishing input has a program id past ``num_reqs``. The contract is
the role's launch contract (:data:`LAUNCH_CONTRACT`: program ids inside the
grid, sizes and capacities) plus the **guaranteed**
caller contract: every hypothesis of the case whose record vLLM guarantees
(``spec.contract.classify``: ``guaranteed``), and the proofs' own structure
(``proof``: definitions, invariants); the ``not guaranteed`` and
``contradicted`` ones are left out. Unsat for every part and variant: the
versions are proved equal. Sat: a distinguishing input, which is

1. checked again under the **full** caller contract (every hypothesis of the
   case): a difference that needs an assumption vLLM does not guarantee
   broken changes nothing for callers that keep it;
2. minimised: the smallest geometry first (the variants are tried in order
   of ``MAX_NUM_REQS``, block size, window, ring; a variant's row program
   before its padding program), then the smallest launch of
   :data:`.report.SMALL_LAUNCHES` (one group, one row, ...), then the
   fewest requests, columns, slots and layers, one at a time (and for a
   padding program its row, the first past ``num_reqs`` where it can be);
3. replayed on both versions under Triton's interpreter
   (:mod:`.playback`), which must show the outputs differ concretely: each
   version in its own process when it comes with one (``remotes``, as
   ``review --base`` passes them: nothing of either version runs here), a
   version that ends, hangs, raises or changes its process in the launch
   breaking the launch (``process: ...``, judged as any other break);
4. judged by what the lifecycle asks of one launch: the spec program's
   result (the kernel contract the lifecycle proofs rest on), memory
   safety and int32 on the real kernel, and that no padding program stores
   outside its frame (which holds no tracker: no request's state). Base breaks it and head does not:
   a **fix**; the reverse: a **regression**; neither: a **change** that
   breaks nothing, naming the buffers that differ; both: a change where
   both break it.

Nothing here imports ``review``: the versions come in as modules.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
import z3

from replayssm.spec import assumptions as env

from ..obligation import TIMEOUT_MS, Claim, Facts, fact_vector, new_solver
from ..terms import lift, named_int
from .cases import KernelCase
from .frame import FrameViolation
from .obligations import KernelClaim, Part, kernel_case
from .registry import REFERENCE
from .roles import KernelRole, Registry
from .source import Unsupported

EQUAL, DIFFERS, UNDECIDED, UNSUPPORTED = "proved equal", "differs", "undecided", "unsupported"
"""A role's outcome: equal on every input inside the contract, a
distinguishing input, a solver timeout somewhere (no difference found), or a
construct the evaluator does not support."""

FIX, REGRESSION, CHANGE, BOTH_BREAK = "fix", "regression", "change that breaks nothing", "change, both break"
UNCONFIRMED = "not reproduced"
"""A difference of one program whose replayed launch shows no difference."""

CONTRACT = "the launch contract and the guaranteed caller contract"

LAUNCH_CONTRACT = (env.BATCH_IN_LAUNCH.name, "int32_sizes", "num_reqs_in_capacity")
"""Hypotheses about the launch itself, the role's launch contract (the
program's ids inside the grid, the sizes int32, ``num_reqs`` within the
capacity), whatever their provenance as caller facts."""


def guaranteed(name: str) -> bool:
    """Whether the diff decides under hypothesis ``name``: a launch-contract
    fact, a guaranteed caller fact, or the proofs' own structure."""
    from replayssm.spec.contract import PROOF, classify
    from replayssm.spec.provenance import GUARANTEED

    return name in LAUNCH_CONTRACT or classify(name) in (GUARANTEED, PROOF)


@dataclass
class Distinction:
    """A distinguishing input of one variant and what became of it."""

    variant: str
    has_spec: bool
    """Whether the role has a spec program the replay compares with."""
    padding: bool
    """Whether the distinguishing program is a padding program (its row past ``num_reqs``)."""
    buffers: list[str]
    """The buffers whose final contents the solver shows differ."""
    inside_full_contract: bool
    """Whether the input also keeps the caller assumptions vLLM does not guarantee."""
    inputs: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)
    cells: list[str] = field(default_factory=list)
    """The cells that differ on the real kernels (replay): ``buffer[index]: base X, head Y``."""
    broken: dict = field(default_factory=dict)
    """Per version (``base``, ``head``): what it breaks on the input."""
    faults: dict = field(default_factory=dict)
    """Per version that did not survive the replayed launch: the fault's report (its output, its traceback)."""
    judgement: str = ""
    trace: dict | None = None
    outside: list[str] = field(default_factory=list)
    """The not-guaranteed caller assumptions the input breaks (none inside the full contract)."""

    @property
    def replayed(self) -> bool:
        """The replay on the real kernels shows the difference: cells that
        differ, or one version alone breaking memory safety, int32 or
        conflict freedom (an out-of-bounds lane is masked off on replay, so
        what it would read or write does not show in the outputs)."""
        return bool(self.cells) or bool(self.broken.get("base")) != bool(self.broken.get("head"))

    def as_json(self) -> dict:
        return {"variant": self.variant, "padding_program": self.padding, "buffers": self.buffers, "inside_full_contract": self.inside_full_contract,
                "inputs": self.inputs, "launch": self.launch, "cells": self.cells, "broken": self.broken,
                "judgement": self.judgement, "replayed": self.replayed,
                "breaks_assumptions": self.outside, "faults": self.faults}


@dataclass
class RoleDiff:
    """One role of a pair of versions."""

    role: str
    kernel: str
    outcome: str
    variants: int
    differing: list[str] = field(default_factory=list)
    """The variants that differ, each once (by its row program or its padding program)."""
    undecided: list[str] = field(default_factory=list)
    padding_differing: list[str] = field(default_factory=list)
    """The variants whose padding programs differ (rows past ``num_reqs``)."""
    padding_compared: bool = False
    """Whether the padding programs were compared (both records' grids span ``max_num_reqs`` rows)."""
    only_outside_contract: bool = False
    """Every difference needs a caller assumption vLLM does not guarantee broken."""
    distinction: Distinction | None = None
    """The smallest distinguishing input: of the row programs where they differ, else of the padding programs."""
    padding_distinction: Distinction | None = None
    """The padding programs' own, where the row programs differ too (judged apart: it may break what the other does not)."""
    why: str = ""
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: proved equal, or the distinguishing input and its class."""
        if self.outcome == EQUAL:
            also = ", padding programs too" if self.padding_compared else ""
            return f"{self.role}: proved equal under {CONTRACT} ({self.variants} variants{also})"
        if self.outcome != DIFFERS:
            return f"{self.role}: {self.outcome} ({self.why})"
        d = self.distinction
        assert d is not None, "a difference comes with its distinguishing input"
        where = ("only outside the full caller contract" if self.only_outside_contract else
                 "inside the full caller contract")
        at = f" padding program {d.inputs.get('batch')} (num_reqs {d.inputs.get('num_reqs')})" if d.padding else ""
        if self.padding_compared:
            where += "; padding programs: " + (f"differ in {len(self.padding_differing)}" if self.padding_differing
                                               else "equal")
        line = (f"{self.role}: differs in {len(self.differing)} of {self.variants} variants ({where}); "
                f"smallest: {d.variant}{at}, buffers {', '.join(d.buffers)}; {d.judgement}")
        line += _replayed(d)
        pd = self.padding_distinction
        if pd is not None:
            line += (f"; and the padding programs' smallest: {pd.variant} padding program {pd.inputs.get('batch')} "
                     f"(num_reqs {pd.inputs.get('num_reqs')}), buffers {', '.join(pd.buffers)}; {pd.judgement}"
                     + _replayed(pd))
        return line

    def as_json(self) -> dict:
        return {"role": self.role, "kernel": self.kernel, "outcome": self.outcome, "evidence": "proved",
                "contract": CONTRACT, "variants": self.variants, "differing": self.differing,
                "undecided": self.undecided, "padding_compared": self.padding_compared,
                "padding_differing": self.padding_differing, "only_outside_contract": self.only_outside_contract,
                "distinction": None if self.distinction is None else self.distinction.as_json(),
                "padding_distinction": None if self.padding_distinction is None else
                self.padding_distinction.as_json(),
                "why": self.why, "seconds": round(self.seconds, 2), "summary": self.summary()}


def _replayed(d: Distinction) -> str:
    """What the replay of ``d`` showed, for a summary."""
    if d.cells:
        return f"; replayed, the outputs differ: {'; '.join(d.cells[:3])}"
    return "; replayed: same outputs, one version alone breaks it" if d.replayed else "; NOT reproduced on the kernels"


def _size(params: tuple) -> tuple:
    """A variant's order for minimisation: rows, block, window, ring."""
    geo = next((p for p in params if hasattr(p, "ring_len")), None)
    if geo is None:
        return (params[0],)
    return (geo.max_num_reqs, geo.block_size, geo.window, geo.ring_len)


def smallest_first(role: KernelRole) -> list[tuple[str, tuple]]:
    """The role's variants, smallest geometry first."""
    return sorted(role.variants(), key=lambda v: _size(v[1]))


@dataclass
class PairCase:
    """One variant of one role, both versions over the same symbolic inputs."""

    role: KernelRole
    """Head's record (base's too, within one generation)."""
    label: str
    base: KernelCase
    head: KernelCase
    guaranteed: list
    optional: list
    parts: list[Part]
    base_role: KernelRole

    @property
    def padding(self) -> bool:
        """Whether the pair is of padding programs (row ``num_reqs <= batch < max_num_reqs``)."""
        return self.head.padding


def _facts(cases: list[KernelCase]) -> list[tuple[str, Any]]:
    out, seen = [], set()
    for c in cases:
        for name, term in c.assumptions:
            key = (name, lift(term).get_id())
            if key not in seen:
                seen.add(key)
                out.append((name, term))
    return out


def equality_parts(base: KernelCase, head: KernelCase) -> list[Part]:
    """Per buffer either version writes: at an arbitrary cell inside it, the
    two final values agree."""
    written = dict.fromkeys([w.buffer for w in base.mem.writes] + [w.buffer for w in head.mem.writes])
    parts = []
    for b in written:
        shape = head.mem.shapes[b]
        cell = tuple(named_int(f"cell_{b}_{d}") for d in range(len(shape)))
        inside = z3.And(*[z3.And(lift(i) >= 0, lift(i) < lift(n)) for i, n in zip(cell, shape)])
        x, y = base.mem.final(b, cell), head.mem.final(b, cell)
        parts.append(Part(b, z3.Implies(inside, lift(x) == lift(y)), ("", 0), head.mem.program,
                          {"cell": cell, "base": x, "head": y}))
    return parts


def pair_case(base: ModuleType, head: ModuleType, role: KernelRole, label: str, params: tuple,
              head_role: KernelRole | None = None, head_params: tuple | None = None,
              padding: bool = False) -> PairCase:
    """Both versions' programs of one variant (an ``Unsupported`` construct
    propagates); ``head_role``: head's record of the role when head is of
    another generation (its case of the same variant label); ``padding``:
    their padding programs (both records must have them), each beside its
    version's row program (:func:`padding_beside`)."""
    theirs = params if head_params is None else head_params
    b = kernel_case(base, role, label, params)
    h = kernel_case(head, head_role or role, label, theirs)
    rows = [b, h]
    if padding:
        b, h = padding_beside(base, role, label, params, b), padding_beside(head, head_role or role, label, theirs, h)
    facts = _facts(rows + [b, h] if padding else rows)
    if padding:  # the row program p is one of the padding program's launch
        facts.append((env.BATCH_IN_LAUNCH.name, lift(rows[1].row[1] == h.row[1])))
    kept = [f for f in facts if guaranteed(f[0])]
    optional = [f for f in facts if not guaranteed(f[0])]
    return PairCase(head_role or role, label, b, h, kept, optional, equality_parts(b, h), role)


def padding_beside(module: ModuleType, role: KernelRole, label: str, params: tuple, row: KernelCase) -> KernelCase:
    """A padding program (``q``) of ``module``'s kernel of ``role`` beside its
    row program ``row`` (``p``), over ``row``'s arrays and sizes: the pair's
    facts keep ``p``'s too, so a distinguishing launch's real row is one of the
    caller contract (a padding program's own assume nothing of the rows), and
    its replay judges what the padding program changes."""
    found = role.jit(module)
    assert found is not None and role.padding is not None, f"{role.name}: no padding programs in {module.__name__}"
    return role.padding(found[1], label, params, row)


def _solver(facts: list | Facts) -> z3.Solver:
    """A fresh solver asserting the named ``facts`` (or their :class:`.obligation.Facts`)."""
    return new_solver(facts if isinstance(facts, Facts) else fact_vector(f for _, f in facts))


def _violated(facts: list, parts: list[Part], first_only: bool) -> tuple[list[Part], list[Part]]:
    """The parts the solver can violate under ``facts``, and those it could not decide."""
    s = _solver(facts)
    violated, unknown = [], []
    for p in parts:
        s.push()
        s.add(z3.Not(lift(p.term)))
        answer = s.check()
        s.pop()
        if answer == z3.sat:
            violated.append(p)
            if first_only:
                break
        elif answer == z3.unknown:
            unknown.append(p)
    return violated, unknown


def padded(role: KernelRole, head_role: KernelRole | None = None) -> bool:
    """Whether both records' grids span ``max_num_reqs`` rows, so their padding programs are compared."""
    return role.padding is not None and (head_role or role).padding is not None


def diff_role(base: ModuleType, head: ModuleType, role: KernelRole, *, head_role: KernelRole | None = None,
              base_label: str = "base", head_label: str = "head", remotes: tuple = (None, None)) -> RoleDiff:
    """Decide whether ``base`` and ``head`` leave the same memory for role
    ``role`` on every input inside the contract, every variant, the programs
    of rows below ``num_reqs`` and (:func:`padded`) the padding programs past
    it; a difference comes with its smallest distinguishing input, replayed
    and judged. ``head_role``: head's own record of the role (another
    generation's adapter); the variants compared are those both records list,
    by label. ``remotes``: base and head each in its own process
    (:class:`~replayssm.base.isolation.RemoteModule`), where the replay
    launches them; None: in this process (our own kernels, tests)."""
    start = time.perf_counter()
    theirs = dict((head_role or role).variants())
    chosen = [(label, params) for label, params in smallest_first(head_role or role) if label in theirs]
    mine = dict(role.variants())
    chosen = [(label, mine[label]) for label, _ in chosen if label in mine]
    name = role.name if head_role is None or head_role.name == role.name else f"{role.name} ~ {head_role.name}"
    out = RoleDiff(name, (head_role or role).kernel_name(head), EQUAL, len(chosen),
                   padding_compared=padded(role, head_role))
    first: dict[bool, tuple[PairCase, list[Part]]] = {}
    """Per kind of program (a padding program or not): the smallest variant's differing pair and parts."""
    inside_any = {False: False, True: False}
    try:
        for label, params in chosen:
            for padding in (False, True) if out.padding_compared else (False,):
                pc = pair_case(base, head, role, label, params, head_role, theirs[label], padding)
                violated, unknown = _violated(pc.guaranteed, pc.parts, first_only=padding in first)
                if unknown and not violated and label not in out.undecided:
                    out.undecided.append(label)
                if not violated:
                    continue
                if padding:
                    out.padding_differing.append(label)
                if label not in out.differing:
                    out.differing.append(label)
                inside, _ = _violated(pc.guaranteed + pc.optional, violated, first_only=True)
                if padding not in first or (inside and not inside_any[padding]):
                    first[padding] = (pc, violated if not inside else _violated(pc.guaranteed + pc.optional, pc.parts,
                                                                                 first_only=False)[0])
                inside_any[padding] = inside_any[padding] or bool(inside)
    except Unsupported as e:
        out.outcome, out.why = UNSUPPORTED, str(e)
        out.seconds = time.perf_counter() - start
        return out
    if first:
        out.outcome = DIFFERS
        out.only_outside_contract = not any(inside_any.values())
        for padding, (pc, violated) in sorted(first.items(), key=lambda kv: kv[0]):  # the row programs' first
            d = distinguish(pc, violated, inside_any[padding], base, head, base_label, head_label, remotes)
            if out.distinction is None:
                out.distinction = d
            else:
                out.padding_distinction = d
    elif out.undecided:
        out.outcome, out.why = UNDECIDED, f"the solver timed out on {', '.join(out.undecided)}"
    out.seconds = time.perf_counter() - start
    return out


def matched_roles(base: ModuleType, head: ModuleType, base_roles: Registry,
                  head_roles: Registry) -> list[tuple[KernelRole, KernelRole]]:
    """``(base's record, head's record)`` of every role both versions define
    a kernel of, matched by :func:`duty` (two generations' adapters name a
    kernel of the same duty alike: ``A.postprocess``, ``B.postprocess``)."""
    theirs = {duty(r): r for r in head_roles if r.jit(head) is not None}
    return [(r, theirs[duty(r)]) for r in base_roles if r.jit(base) is not None and duty(r) in theirs]


def duty(role: KernelRole) -> str:
    """A role's name without its generation's prefix (``A.postprocess`` -> ``postprocess``)."""
    return role.name.rsplit(".", 1)[-1]


def diff_versions(base: ModuleType, head: ModuleType, roles: Registry = REFERENCE, *,
                  head_roles: Registry | None = None, base_label: str = "base",
                  head_label: str = "head") -> list[RoleDiff]:
    """:func:`diff_role` for every role both versions define: of ``roles``
    (both of one generation), or of ``roles`` for base and ``head_roles``
    for head, matched by name (:func:`matched_roles`)."""
    pairs = matched_roles(base, head, roles, roles if head_roles is None else head_roles)
    return [diff_role(base, head, b, head_role=h if h is not b else None, base_label=base_label,
                      head_label=head_label) for b, h in pairs]


# -- a distinguishing input: minimised, replayed, judged -------------------------

def _claim(pc: PairCase, facts: list, parts: list[Part], side: str = "head") -> KernelClaim:
    """The pair as a ``KernelClaim`` over one side's case and record, for
    :mod:`.report`'s small-launch constraints and trace."""
    claim = Claim([(p.name, p.term) for p in parts], facts, True, pc.label)
    case, role = (pc.head, pc.role) if side == "head" else (pc.base, pc.base_role)
    # a padding program's trace replays as its padding obligation's (stray accesses on the launch)
    return KernelClaim(role, "padding" if pc.padding else "equivalence", claim, parts, [case], show=case.show)


MINIMISE_MS = 5_000
"""The solver's time for one query of the minimisation (an unknown keeps the larger launch)."""


def _model(facts: list | Facts, extra: list, goal: Any, timeout_ms: int = TIMEOUT_MS) -> z3.ModelRef | None:
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
    that is a prefix of distinct rows followed by -1 entries only."""
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
        active = [int(x) for x in final["active_request_indices"].reshape(-1)]
        rows = [v for v in active[:next((i for i, v in enumerate(active) if v < 0), len(active))]]
        tail = active[len(rows):]
        if any(x != -1 for x in tail) or len(set(rows)) != len(rows):
            out.append(f"materialize contract: work list {active} is not distinct rows followed by -1 entries")
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
