"""Proofs of the tracker kernels of a generation whose trackers the forward pass changes (P), from their Triton source.

Each tracker kernel role of generation P's adapter (``spec/generations/gen_p.py``:
its jit, parameters, constexprs, geometry and the caller's clauses its proof
takes) is read from the version's ``ssu_dispatch.py``, from its source
without running it (``verify/kernels/source_module.py``), and one program of
its launch is evaluated on symbolic memory (``verify/kernels/evaluator.py``),
its block of 128 lanes represented by two sampled lanes at any two distinct
positions (``contracts.LaneSample``). Beside it, the spec's program (``spec/release_trackers.py``) runs for the two rows
those lanes are. For every input inside the caller's contract (the role's
clauses, records of ``spec/release_caller.py``: distinct rows name distinct
slots; for the commit, the row buffers cover the launch) two claims are proved:

- **equivalence**: every tracker entry after the kernel's program equals the
  spec's after the two rows' programs;
- **memory safety**: every load and store of the kernel is inside its tensor.

A failure's counterexample says which entry differs or which access is out of
bounds, with the inputs that show it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from replayssm.spec.generations import TRACKER_GENERATIONS, gen_p
from replayssm.spec.generations.tracker_api import BUFFER, STRIDE, Param, TrackerRole
from replayssm.spec.release_trackers import TRACKERS
from replayssm.spec.vocab import conj
from replayssm.verify.goals import in_bounds
from replayssm.verify.kernels.contracts import BufferArg, LaneSample, ProgramLaunch, ScalarArg, StrideArg
from replayssm.verify.kernels.evaluator import run_program
from replayssm.verify.kernels.kmemory import KernelMemory
from replayssm.verify.kernels.obligations import obligation_name
from replayssm.verify.kernels.source import Unsupported
from replayssm.verify.memory import SymbolicMemory
from replayssm.verify.obligation import REGISTRY, Claim, Obligation, PartName, Result, obligation, prove
from replayssm.verify.terms import Fact, Sym, Symbolic, named_int

ROLES: tuple[TrackerRole, ...] = gen_p.API.roles
"""The tracker kernel roles proved, generation P's adapter's (``spec/generations/gen_p.py``)."""


@dataclass(frozen=True)
class KernelProof:
    """One kernel's obligation and its result."""

    transition: str
    kernel: str
    property: str
    result: Result


def _shapes(role: TrackerRole) -> dict[str, tuple]:
    return {p.name: (named_int(p.length_name),) for p in role.buffers()}


def _argument(p: Param) -> BufferArg | StrideArg | ScalarArg:
    """The kernel argument of parameter ``p``: its tensor, a unit stride of its tensor, or a symbolic int."""
    if p.kind == BUFFER:
        return BufferArg(p.name)
    if p.kind == STRIDE and p.of is not None:  # a stride always names its buffer (Param refuses one without)
        return StrideArg(p.of, p.dim, 1)
    return ScalarArg(named_int(p.name))


def _launch(role: TrackerRole, pid: Sym, lanes: tuple) -> ProgramLaunch:
    return ProgramLaunch([_argument(p) for p in role.params], role.launch_constexprs(), (pid,),
                  lanes=LaneSample(role.block, lanes))


def _two_lanes(role: TrackerRole, arrays: dict, kernels: list[tuple[ModuleType, SymbolicMemory]]
               ) -> tuple[SymbolicMemory, list[Fact], dict[str, Symbolic], Symbolic]:
    """One program of each kernel on its memory (over ``arrays``), the spec's
    programs of the two sampled lanes' rows; the spec memory, the hypotheses
    (the launch and the caller's clauses the role takes), what a counterexample shows, the cover."""
    shapes, geo, block = _shapes(role), role.geometry, role.block
    spec = SymbolicMemory(shapes, arrays, "spec")
    pid, lanes = named_int("pid"), (named_int("lane0"), named_int("lane1"))
    n, states = named_int("n_slots"), named_int("num_states")
    for module, mem in kernels:
        run_program(getattr(module, role.jit), _launch(role, pid, lanes), mem)
    traces = [role.program(spec, geo, pid * block + lane, n, states) for lane in lanes]
    hyps: list[Fact] = [
        ("launch_facts", conj(pid >= 0, lanes[0] >= 0, lanes[0] < lanes[1], lanes[1] < block)),
        ("release_launch", conj(n >= 1, states >= 1, *[shapes[b][0] >= states for b in TRACKERS])),
    ]
    values = {"slot0": traces[0].slot, "slot1": traces[1].slot, "pad": geo.pad, "n_slots": n,
              **{p.length_name: shapes[p.name][0] for p in role.buffers()}}
    hyps += [(use.clause.name, use.clause(*(values[v] for v in use.applied_to))) for use in role.clauses]
    show = {"pid": pid, "lane0": lanes[0], "lane1": lanes[1], "slot0": traces[0].slot, "slot1": traces[1].slot}
    return spec, hyps, show, conj(traces[0].valid, traces[1].valid)


def kernel_claims(module: ModuleType, role: TrackerRole) -> dict[str, Claim]:
    """The equivalence and memory-safety claims of ``role``'s kernel in ``module`` (read from source)."""
    arrays: dict = {}
    kernel = KernelMemory(_shapes(role), arrays, "kernel")
    spec, hyps, show, cover = _two_lanes(role, arrays, [(module, kernel)])
    entry = named_int("any_slot")
    equal: list[tuple[PartName, Symbolic]] = [(f"{b}[any_slot] as the spec leaves it", kernel.final(b, (entry,)) ==
                                          spec.final(b, (entry,))) for b in TRACKERS]
    show = {**show, "any_slot": entry}
    return {"equivalence": Claim(equal, hyps, cover, role.transition, show, [kernel, spec]),
            "memory safety": Claim(in_bounds(kernel), hyps, cover, role.transition, show, [kernel],
                                   strategy="whole_goal")}


def _one(claim: Claim) -> Callable[[], list[Claim]]:
    return lambda: [claim]


def prove_kernels(module: ModuleType) -> list[KernelProof]:
    """Every property of every tracker kernel role of ``module`` (a version read
    from source); a kernel the evaluator cannot read is ``unknown`` for both
    properties, naming the construct (never a pass)."""
    out = []
    for role in ROLES:
        try:
            claims = kernel_claims(module, role)
        except Unsupported as e:
            for prop in ("equivalence", "memory safety"):
                out.append(KernelProof(role.transition, role.jit, prop, Result(role.name, "unknown", 0.0, [],
                                                                               detail=f"not proved: {e}")))
            continue
        for prop, claim in claims.items():
            ob = Obligation(f"{role.name}.{prop.replace(' ', '_')}", role.name, f"{role.jit}: {prop}", _one(claim))
            out.append(KernelProof(role.transition, role.jit, prop, prove(ob)))
    return out


def diff_claims(base: ModuleType, head: ModuleType, role: TrackerRole) -> Claim:
    """``head``'s kernel of ``role`` leaves every tracker entry as ``base``'s does, on any input inside the
    caller's contract (both read from source, run on one symbolic memory)."""
    arrays: dict = {}
    mems: list[SymbolicMemory] = [KernelMemory(_shapes(role), arrays, name) for name in ("base", "head")]
    _, hyps, show, cover = _two_lanes(role, arrays, list(zip((base, head), mems)))
    entry = named_int("any_slot")
    same: list[tuple[PartName, Symbolic]] = [(f"{b}[any_slot] as the base leaves it", mems[1].final(b, (entry,)) ==
                                         mems[0].final(b, (entry,))) for b in TRACKERS]
    return Claim(same, hyps, cover, role.transition, {**show, "any_slot": entry}, mems)


def diff_kernels(base: ModuleType, head: ModuleType) -> list[KernelProof]:
    """``review --vllm HEAD --base BASE``: each tracker kernel role of ``head`` against ``base``'s, by proof
    (``proved``: the same on every input inside the contract; ``failed``: a distinguishing input)."""
    out = []
    for role in ROLES:
        try:
            claim = diff_claims(base, head, role)
        except Unsupported as e:
            out.append(KernelProof(role.transition, role.jit, "same as the base",
                                   Result(role.name, "unknown", 0.0, [], detail=f"not compared: {e}")))
            continue
        ob = Obligation(f"{role.name}.same_as_base", role.name, f"{role.jit}: same as the base", _one(claim))
        out.append(KernelProof(role.transition, role.jit, "same as the base", prove(ob)))
    return out


def _build(module: ModuleType, role: TrackerRole, prop: str) -> Callable[[], list[Claim]]:
    return lambda: [kernel_claims(module, role)[prop]]


def register(module: ModuleType, target: str) -> list[str]:
    """``prove --kernels --impl``: when ``module`` (read from source) is a generation whose trackers the forward
    pass changes (``spec.generations.TRACKER_GENERATIONS``), each property of each of its roles registered as the
    obligation ``kernel.<role>.<property>@<target>`` of transition ``kernel <jit>``, named as every kernel
    obligation is (``obligations.obligation_name``); their names (none for any other module)."""
    names = []
    for api in TRACKER_GENERATIONS:
        if not api.matches(module):
            continue
        for role in api.roles:
            for prop in ("equivalence", "memory safety"):
                name = obligation_name(role.name, prop.replace(" ", "_"), target)
                REGISTRY.pop(name, None)  # a file of the same name registered before is another module
                obligation(name, f"kernel {role.jit}", f"{role.jit}: {prop}")(_build(module, role, prop))
                names.append(name)
    return names
