"""The kernel obligations: per kernel and constexpr variant, (a) memory safety,
(b) equivalence with the spec program, (c) no integer overflow, (d) no
conflict between programs of one launch, the frame, and on a grid of
``max_num_reqs`` rows the padding programs' memory safety and frame, each
with (e) a non-vacuity witness.

Each obligation's cases are :class:`KernelClaim` objects: a ``Claim`` for
``verify.obligation.prove`` plus what a counterexample report needs (the
programs, and per goal part the access or value it is about). What each
kernel is, how its programs are built and how they replay comes from its
role's record (:mod:`.roles`; the reference API's and ours in
:mod:`.registry`). Ours (``replayssm.impl.kernels``) are registered on
import; :func:`register` adds the obligations of any module for the roles
it is given (a version's from its generation's adapter,
:mod:`.generation_roles`), each recorded as a :class:`KernelObligation`
that its readers look up by the obligation's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from replayssm.spec import assumptions as env
from replayssm.spec.vocab import conj, implies, negate

from ..obligation import REGISTRY, Claim, LazyClaim, obligation
from ..scenarios import INVARIANT_TRACKER_RANGE
from ..terms import Sym, Symbolic, lift, named_int
from . import blocked
from .cases import KernelCase
from .frame import frame_parts
from .registry import ROLES
from .roles import KernelRole, Registry, by_name
from .source import Unsupported

if TYPE_CHECKING:
    from ..memory import Access

PROPERTIES = {
    "memory_safety": "every load and store whose mask is on lies inside its buffer as the launch gives it, "
                     "per dimension (a block-table column past its row is out of bounds)",
    "equivalence": "the program leaves the same memory as the spec program, every cell of every spec buffer either "
                   "writes (untouched cells included), under the caller contract without the behavioural "
                   "assumptions (which a failure names: those it would hold under)",
    "int32": "no integer intermediate leaves its type (int32, or int64 for address arithmetic), and no store "
             "narrows a value that does not fit",
    "conflicts": "no cell is written by two programs of one launch with different values or read by one and "
                 "written by another, and no two lanes of one block store write one cell with different values",
    "frame": "every store lands in the program's frame: trackers of the slots its own block-table row names, its own "
             "row of the plan and of its group's layers in the slot tables, the work list only where the role "
             "gives it one",
    "padding": "a padding program (its row past num_reqs on a grid of max_num_reqs rows) accesses only cells inside "
               "its buffers and stores only inside its frame, which holds no tracker: its own plan row and "
               "slot-table entries, the work list only where the role gives it one",
}

OPTIONAL = (*env.behavioural(), INVARIANT_TRACKER_RANGE)
"""The behavioural caller assumptions the equivalence obligation does not
assume (their records say so, ``spec/assumptions.py`` ``behavioural``) and
the tracker-range invariant: a kernel equal to the spec only under some of
them is reported with exactly those."""

OURS = "replayssm.impl.kernels"

PREPROCESSED = ("memory_safety", "int32", "conflicts", "frame", "padding")
"""Obligations whose cases are checked as one query after Z3's equation
solving (``Claim.strategy`` ``"preprocess"``): 2 to 4 times faster than part by part on
ours; equivalence is the opposite (about 9 times slower in one query)."""


@dataclass
class Part:
    """One goal part and what a report shows about it (terms evaluated in the model)."""

    name: str
    term: Symbolic
    where: tuple = ("", 0)
    program: str = ""
    terms: dict = field(default_factory=dict)
    observable: Symbolic = True
    """When the part's failure shows in the whole launch (a replay sees it):
    the counterexample search prefers such a model."""


@dataclass
class KernelClaim:
    """A claim with the kernel programs and the parts it is made of."""

    role: KernelRole
    prop: str
    claim: Claim
    parts: list[Part]
    cases: list[KernelCase]
    optional: list = field(default_factory=list)
    unsupported: Unsupported | None = None
    show: dict = field(default_factory=dict)
    """The inputs a report shows (the claim itself shows none: the solver's
    first model is not the small launch the report re-solves for)."""


def variants(role: str | KernelRole) -> list[tuple[str, tuple]]:
    """Every constexpr variant a role (a record, or a name of :data:`.registry.ROLES`) is proved for."""
    return (role if isinstance(role, KernelRole) else by_name(ROLES)[role]).variants()


_CASES: dict[tuple, KernelCase] = {}
"""Each case built, by module, role record, variant and kind of program."""


def kernel_case(module: ModuleType, role: KernelRole, label: str, params: tuple,
                padding: bool = False) -> KernelCase:
    """The (cached) single-program case of ``role`` for one variant (``padding``: its padding program's)."""
    key = (module.__name__, role, label, padding)  # the record: two contracts of one role are two cases
    if key not in _CASES:
        found = role.jit(module)
        if found is None:
            raise ValueError(f"{module.__name__} has no kernel of role {role.name} ({', '.join(role.jits)})")
        build = role.padding if padding else role.case
        if build is None:
            raise ValueError(f"role {role.name} has no padding programs")
        _CASES[key] = build(found[1], label, params)
    return _CASES[key]


def _at(case: KernelCase, i: int) -> tuple[str, int]:
    file, line = case.run.where.get(i, ("", 0))
    return Path(file).name, line


def memory_safety_parts(case: KernelCase) -> list[Part]:
    parts = []
    lanes = blocked.lane_of(case.run)
    for i, a in enumerate(case.mem.accesses):
        if not blocked.claimed(case, lanes.get(i)):
            continue
        where = _at(case, i)
        shape = case.mem.shapes[a.buffer]
        parts.append(Part(f"{a.kind} of {a.buffer} at {where[0]}:{where[1]} in bounds", case.mem.in_bounds(a),
                          where, case.mem.program,
                          {"index": tuple(a.index), "extent": tuple(shape), "guard": a.guard}))
    return parts + loop_bound_parts(case)


def loop_bound_parts(case: KernelCase) -> list[Part]:
    """Each unrolled loop runs no more iterations than it was unrolled to."""
    parts = []
    for trips, bound, guard, line, file in case.run.loop_bounds:
        where = (Path(file).name, line)
        parts.append(Part(f"loop at {where[0]}:{where[1]} runs at most {bound} iterations (unrolled)",
                          implies(Sym(lift(guard)), Sym(trips) <= bound), where, case.mem.program, {"trips": trips}))
    return parts


def int32_parts(case: KernelCase) -> list[Part]:
    parts = []
    for x in case.run.intermediates:
        if not blocked.claimed(case, x.lane):
            continue
        lo, hi = x.bounds()
        fits = implies(Sym(lift(x.guard)), conj(Sym(x.term) >= lo, Sym(x.term) <= hi))
        where = (Path(x.file).name, x.line)
        name = (f"{x.dtype} result at {where[0]}:{where[1]} fits" if x.what == "result" else
                f"{x.what} of the {x.dtype} shift at {where[0]}:{where[1]} lies in {lo}..{hi}")
        parts.append(Part(name, fits, where, case.mem.program, {"value": x.term}))
    return parts


def equivalence_parts(case: KernelCase) -> list[Part]:
    """Every cell of every spec buffer either program writes (a buffer the
    spec has not, such as A5's ``num_active``, is left to the frame)."""
    written = dict.fromkeys([w.buffer for w in case.spec_mem.writes] + [w.buffer for w in case.mem.writes
                                                                        if w.buffer in case.spec_mem.shapes])
    parts = []
    for b in written:
        shape = case.spec_mem.shapes.get(b) or case.mem.shapes[b]
        cell = tuple(named_int(f"cell_{b}_{d}") for d in range(len(shape)))
        inside = conj(*[conj(i >= 0, i < n) for i, n in zip(cell, shape)])
        kernel, spec = case.mem.final(b, cell), case.spec_mem.final(b, cell)
        parts.append(Part(f"{b} after the program equals the spec's", implies(inside, kernel == spec), ("", 0),
                          case.mem.program, {"cell": cell, "kernel": kernel, "spec": spec}))
    return parts


def _same_cell(a: Access, b: Access) -> Symbolic:
    return conj(a.guard, b.guard, *[x == y for x, y in zip(a.index, b.index)])


def lane_parts(case: KernelCase) -> list[Part]:
    parts = []
    for lanes in case.run.block_stores:
        accesses = [case.mem.accesses[i] for i in lanes]
        where = _at(case, lanes[0])
        for j, a in enumerate(accesses):
            for k in range(j + 1, len(accesses)):
                if not blocked.claimed(case, j, k):
                    continue
                b = accesses[k]
                parts.append(Part(f"lanes {j} and {k} of the store at {where[0]}:{where[1]} write distinct cells "
                                  "or one value", implies(_same_cell(a, b), a.value == b.value), where,
                                  case.mem.program, {"index": tuple(a.index), "values": (a.value, b.value)}))
    return parts


def conflict_parts(p: KernelCase, q: KernelCase) -> list[Part]:
    written = {w.buffer for c in (p, q) for w in c.mem.writes}
    parts = []
    lanes = {id(c): blocked.lane_of(c.run) for c in (p, q)}

    def stated(c: KernelCase, i: int) -> bool:
        return blocked.claimed(c, lanes[id(c)].get(i))

    pw = [(i, a) for i, a in enumerate(p.mem.accesses) if a.kind == "write" and stated(p, i)]
    qw = [(i, a) for i, a in enumerate(q.mem.accesses) if a.kind == "write" and stated(q, i)]
    for i, wp in pw:
        for j, wq in qw:
            if wp.buffer == wq.buffer:
                a, b = _at(p, i), _at(q, j)
                parts.append(Part(f"{wp.buffer} written by both programs (p at {a[0]}:{a[1]}, q at {b[1]}) "
                                  "with one value", implies(_same_cell(wp, wq), wp.value == wq.value), a, "p,q",
                                  {"index": tuple(wp.index), "p value": wp.value, "q value": wq.value}))
    for me, other, mine in ((p, q, "p"), (q, p, "q")):
        for i, r in enumerate(me.mem.accesses):
            if r.kind != "read" or r.buffer not in written or not stated(me, i):
                continue
            for j, w in enumerate(other.mem.accesses):
                if w.kind == "write" and w.buffer == r.buffer and stated(other, j):
                    a, b = _at(me, i), _at(other, j)
                    parts.append(Part(f"{r.buffer} read by {mine} at {a[0]}:{a[1]} is not written by the other "
                                      f"program (at {b[1]})", negate(_same_cell(r, w)), a, mine,
                                      {"index": tuple(r.index)}))
    return parts + lane_parts(p) + lane_parts(q)


def kernel_claim(module: ModuleType, role: str | KernelRole, prop: str, label: str) -> KernelClaim:
    """The case of obligation ``prop`` of kernel ``role`` (a record, or a name
    of :data:`.registry.ROLES`) for variant ``label`` alone."""
    record = role if isinstance(role, KernelRole) else by_name(ROLES)[role]
    params = dict(record.variants())[label]
    return _one(module, record, prop, label, params)


def _one(module: ModuleType, role: KernelRole, prop: str, label: str, params: tuple) -> KernelClaim:
    """One case; a construct outside the subset makes it a failing claim naming it."""
    try:
        return _claim(module, role, prop, label, params)
    except Unsupported as e:
        bad = Claim([(f"supported construct: {e}", lift(False))], [], True, label)
        return KernelClaim(role, prop, bad, [Part(str(e), lift(False), (Path(e.file).name, e.line))], [], [], e)


def frame_obligation_parts(case: KernelCase, role: KernelRole) -> list[Part]:
    """The frame obligation's parts (a role without a frame has no such obligation: asking is an error)."""
    if role.frame is None:
        raise ValueError(f"kernel role {role.name} has no frame obligation")
    return frame_parts(case, role.frame, Part, _at)


def padding_parts(case: KernelCase, role: KernelRole) -> list[Part]:
    """A padding program's memory safety and frame (:attr:`.cases.KernelCase.padding`: no tracker in it)."""
    parts = memory_safety_parts(case) + (frame_parts(case, role.frame, Part, _at) if role.frame is not None else [])
    return [replace(x, name=f"padding program: {x.name}") for x in parts]


def _claim(module: ModuleType, role: KernelRole, prop: str, label: str, params: tuple) -> KernelClaim:
    case = kernel_case(module, role, label, params, padding=prop == "padding")
    if prop == "conflicts" and role.pair is not None:
        p, q, assumptions, cover = role.pair(role.jit(module)[1], label, params, case)
        parts = conflict_parts(p, q)
        if p.block is not None:
            parts += [Part(n, t, _at(p, i), "p", terms) for n, t, terms, i in blocked.lane_conflicts(p)]
        show = {**{f"p.{k}": v for k, v in p.show.items()}, **{f"q.{k}": v for k, v in q.show.items()}}
        claim = Claim([(x.name, x.term) for x in parts], assumptions, cover, label, strategy="preprocess")
        return KernelClaim(role, prop, claim, parts, [p, q], show=show)
    parts = {"memory_safety": memory_safety_parts, "int32": int32_parts, "equivalence": equivalence_parts,
             "conflicts": lane_parts, "frame": lambda c: frame_obligation_parts(c, role),
             "padding": lambda c: padding_parts(c, role)}[prop](case)
    if prop == "memory_safety" and case.block is not None:
        parts += [Part(n, t, _at(case, i), case.mem.program) for n, t, i in blocked.idle_lanes(case)]
    if prop == "equivalence" and case.block is not None:
        parts = [Part(n, t, ("", 0), case.mem.program, terms, alone)
                 for n, t, terms, alone in blocked.lane_equivalence(case)]
    assumptions, optional = case.assumptions, []
    if prop == "equivalence":
        optional_here = [n for n in OPTIONAL if n not in case.required]
        assumptions = [a for a in case.assumptions if a[0] not in optional_here]
        optional = [a for a in case.assumptions if a[0] in optional_here]
    strategy = "preprocess" if prop in PREPROCESSED else "preprocess_parts" if case.block is not None else "parts"
    claim = Claim([(x.name, x.term) for x in parts], assumptions, case.cover, label, strategy=strategy)
    return KernelClaim(role, prop, claim, parts, [case], optional, show=case.show)


def properties(role: KernelRole) -> list[str]:
    """The obligations stated for ``role``: its own list, else every one,
    equivalence only beside a spec program, frame only with a frame, padding
    only where its grid has padding programs."""
    if role.properties:
        return list(role.properties)
    return [p for p in PROPERTIES if (p != "equivalence" or role.spec) and (p != "frame" or role.frame)
            and (p != "padding" or role.padding is not None)]


def obligation_name(role: str, prop: str, target: str = "") -> str:
    return f"kernel.{role}.{prop}" + (f"@{target}" if target else "")


@dataclass(frozen=True)
class KernelObligation:
    """What a registered kernel obligation is about: ``prop`` of ``role``'s kernel in ``module``."""

    module: ModuleType
    role: KernelRole
    prop: str
    target: str
    """The target's label ("" for ours)."""


KERNEL_OBLIGATIONS: dict[str, KernelObligation] = {}
"""Every registered kernel obligation's record, by its name."""


def kernel_sources(module: ModuleType, roles: Registry = ROLES) -> tuple[str, ...]:
    """The files the kernels of ``module`` are read from (their module's and
    every module a kernel's globals reach a jit helper in), for the proof cache."""
    import inspect

    from .source import is_jit, python_function

    files = set()
    for role in roles:
        found = role.jit(module)
        if found is None:
            continue
        fn = python_function(found[1])
        files.add(inspect.getsourcefile(fn) or fn.__code__.co_filename)
        for value in fn.__globals__.values():
            if is_jit(value):
                helper = python_function(value)
                files.add(inspect.getsourcefile(helper) or helper.__code__.co_filename)
    return tuple(sorted(files))


def register(module: ModuleType, target: str = "", roles: Registry = ROLES) -> list[str]:
    """Register every kernel obligation of ``roles`` that ``module`` has a
    kernel for (label ``target``); returns their names. Registering a label
    again replaces its obligations: they prove the module registered last."""
    names = []
    for role in roles:
        found = role.jit(module)
        if found is None:
            continue
        for prop in properties(role):
            name = obligation_name(role.name, prop, target)
            KERNEL_OBLIGATIONS[name] = KernelObligation(module, role, prop, target)
            REGISTRY.pop(name, None)  # a label registered again (another file of that name) proves this module
            obligation(name, f"kernel {found[0]}", PROPERTIES[prop], shardable=True, every_case=True,
                       sources=kernel_sources(module, roles),
                       timeout_ms=role.timeout_ms, isolated=role.isolated)(_builder(module, role, prop))
            names.append(name)
    return names


def _builder(module: ModuleType, role: KernelRole, prop: str) -> Callable[[], Iterator[Claim]]:
    def build() -> Iterator[Claim]:
        for label, params in role.variants():
            yield LazyClaim(label, lambda label=label, params=params: _one(module, role, prop, label, params).claim)

    return build


def _ours() -> tuple[ModuleType, ...]:
    """The kernel modules we ship: the reference API's kernels and the row-blocked postprocess."""
    from replayssm.impl import kernels, kernels_blocked

    return kernels, kernels_blocked


# Plain ``prove`` (and ``prove --kernels``) proves every kernel we ship: the
# reference API's three and the row-blocked one at the 128 and 2 rows per
# program we launch (its 80 variants: about 100 s of CPU, ``docs/cli.md``),
# each case solved in a Z3 context of its own under
# ``registry.BLOCKED_TIMEOUT_MS`` (``registry.BLOCKED``): the cases a worker
# built before cannot make one ``unknown``, and a load average of 5 did not.
for _module in _ours():
    register(_module)
