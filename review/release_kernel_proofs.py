"""Proofs of a released vLLM's tracker kernels from their Triton source (generation P).

Each ``@triton.jit`` kernel of the version's ``ssu_dispatch.py`` is read from
its source without running it (``verify/kernels/source_module.py``) and one
program of its launch is evaluated on symbolic memory
(``verify/kernels/evaluator.py``), its block of 128 lanes represented by two
sampled lanes at any two distinct positions (``contracts.LaneSample``). Beside
it, the spec's program (``spec/release_trackers.py``) runs for the two rows
those lanes are. For every input inside the caller's contract
(``spec/release_caller.py``: the row buffers cover the launch, distinct rows
name distinct slots) two claims are proved:

- **equivalence**: every tracker entry after the kernel's program equals the
  spec's after the two rows' programs;
- **memory safety**: every load and store of the kernel is inside its tensor.

A failure's counterexample says which entry differs or which access is out of
bounds, with the inputs that show it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replayssm.spec import release_caller as caller
from replayssm.spec.release_trackers import PROGRAMS, TRACKERS, ReleaseGeometry
from replayssm.spec.vocab import conj
from replayssm.verify.goals import in_bounds
from replayssm.verify.kernels.contracts import BufferArg, LaneSample, Launch, ScalarArg, StrideArg
from replayssm.verify.kernels.evaluator import run_program
from replayssm.verify.kernels.kmemory import KernelMemory
from replayssm.verify.kernels.source import Unsupported
from replayssm.verify.memory import SymbolicMemory
from replayssm.verify.obligation import Claim, Obligation, PartName, Result, prove
from replayssm.verify.terms import named_int

BLOCK = 128
"""The lanes of one program, as the host wrappers launch the kernels."""

KERNELS = {
    "commit": ("_commit_replayssm_ring_trackers_kernel", {}),
    "reset": ("_update_replayssm_ring_trackers_kernel", {"RESET": True}),
    "advance": ("_update_replayssm_ring_trackers_kernel", {"RESET": False}),
}
"""Each transition's kernel and the constexprs that select it."""

GEOMETRIES = {"commit": ReleaseGeometry(16, 4, 20), "reset": ReleaseGeometry(16, 4, 20),
              "advance": ReleaseGeometry(16, 1, 17)}
"""The configuration each kernel is proved for (vLLM's ring of 20 rows; 17 for one-token decode)."""


@dataclass(frozen=True)
class KernelProof:
    """One kernel's obligation and its result."""

    transition: str
    kernel: str
    property: str
    result: Result


def _shapes() -> dict[str, tuple]:
    return {"state_batch_indices": (named_int("n_slots"),), "num_accepted_tokens": (named_int("accepted_len"),),
            "query_start_loc": (named_int("query_start_loc_len"),),
            **{b: (named_int(f"{b}_len"),) for b in TRACKERS}}


def _launch(transition: str, geo: ReleaseGeometry, pid: Any, lanes: tuple) -> Launch:
    n, states = ScalarArg(named_int("n_slots")), ScalarArg(named_int("num_states"))
    trackers = [BufferArg(b) for b in TRACKERS]
    stride = StrideArg("state_batch_indices", 0, 1)
    if transition == "commit":
        args = [*trackers, BufferArg("state_batch_indices"), BufferArg("num_accepted_tokens"),
                BufferArg("query_start_loc"), stride, n, states]
    else:
        args = [*trackers, BufferArg("state_batch_indices"), stride, n, states]
    window, ring = (0, 1) if transition == "reset" else (geo.window, geo.ring_len)
    constexprs = {"logical_window": window, "ring_buffer_len": ring, "pad_slot_id": geo.pad, "BLOCK": BLOCK,
                  **KERNELS[transition][1]}
    return Launch(args, constexprs, (pid,), lanes=LaneSample(BLOCK, lanes))


def _two_lanes(transition: str, geo: ReleaseGeometry, arrays: dict, kernels: list[tuple[Any, SymbolicMemory]]
               ) -> tuple[SymbolicMemory, list[tuple[str, Any]], dict[str, Any], Any]:
    """One program of each kernel on its memory (over ``arrays``), the spec's
    programs of the two sampled lanes' rows; the spec memory, the hypotheses
    (the launch and the caller's contract), what a counterexample shows, the cover."""
    shapes = _shapes()
    spec = SymbolicMemory(shapes, arrays, "spec")
    pid, lanes = named_int("pid"), (named_int("lane0"), named_int("lane1"))
    n, states = named_int("n_slots"), named_int("num_states")
    for module, mem in kernels:
        run_program(getattr(module, KERNELS[transition][0]), _launch(transition, geo, pid, lanes), mem)
    traces = [PROGRAMS[transition](spec, geo, pid * BLOCK + lane, n, states) for lane in lanes]
    hyps: list[tuple[str, Any]] = [
        ("launch_facts", conj(pid >= 0, lanes[0] >= 0, lanes[0] < lanes[1], lanes[1] < BLOCK)),
        ("release_launch", conj(n >= 1, states >= 1, *[shapes[b][0] >= states for b in TRACKERS])),
        (caller.DISTINCT_SLOTS.name, caller.DISTINCT_SLOTS(traces[0].slot, traces[1].slot, geo.pad)),
    ]
    if transition == "commit":  # the only kernel that reads the row buffers
        hyps.append((caller.ROWS_COVERED.name, caller.ROWS_COVERED(n, shapes["num_accepted_tokens"][0],
                                                                   shapes["query_start_loc"][0])))
    show = {"pid": pid, "lane0": lanes[0], "lane1": lanes[1], "slot0": traces[0].slot, "slot1": traces[1].slot}
    return spec, hyps, show, conj(traces[0].valid, traces[1].valid)


def kernel_claims(module: Any, transition: str, geo: ReleaseGeometry) -> dict[str, Claim]:
    """The equivalence and memory-safety claims of ``transition``'s kernel in ``module`` (read from source)."""
    arrays: dict = {}
    kernel = KernelMemory(_shapes(), arrays, "kernel")
    spec, hyps, show, cover = _two_lanes(transition, geo, arrays, [(module, kernel)])
    entry = named_int("any_slot")
    equal: list[tuple[PartName, Any]] = [(f"{b}[any_slot] as the spec leaves it", kernel.final(b, (entry,)) ==
                                          spec.final(b, (entry,))) for b in TRACKERS]
    show = {**show, "any_slot": entry}
    return {"equivalence": Claim(equal, hyps, cover, transition, show, [kernel, spec]),
            "memory safety": Claim(in_bounds(kernel), hyps, cover, transition, show, [kernel], strategy="whole_goal")}


def _one(claim: Claim) -> Callable[[], list[Claim]]:
    return lambda: [claim]


def prove_kernels(module: Any) -> list[KernelProof]:
    """Every property of every tracker kernel of ``module`` (a version read from
    source); a kernel the evaluator cannot read is ``unknown`` for both
    properties, naming the construct (never a pass)."""
    out = []
    for transition, (kernel, _) in KERNELS.items():
        try:
            claims = kernel_claims(module, transition, GEOMETRIES[transition])
        except Unsupported as e:
            for prop in ("equivalence", "memory safety"):
                out.append(KernelProof(transition, kernel, prop, Result(f"P.{transition}", "unknown", 0.0, [],
                                                                        detail=f"not proved: {e}")))
            continue
        for prop, claim in claims.items():
            ob = Obligation(f"P.{transition}.{prop.replace(' ', '_')}", f"P.{transition}", f"{kernel}: {prop}",
                            _one(claim))
            out.append(KernelProof(transition, kernel, prop, prove(ob)))
    return out


def diff_claims(base: Any, head: Any, transition: str, geo: ReleaseGeometry) -> Claim:
    """``head``'s kernel of ``transition`` leaves every tracker entry as ``base``'s does, on any input inside the
    caller's contract (both read from source, run on one symbolic memory)."""
    arrays: dict = {}
    mems: list[SymbolicMemory] = [KernelMemory(_shapes(), arrays, name) for name in ("base", "head")]
    _, hyps, show, cover = _two_lanes(transition, geo, arrays, list(zip((base, head), mems)))
    entry = named_int("any_slot")
    same: list[tuple[PartName, Any]] = [(f"{b}[any_slot] as the base leaves it", mems[1].final(b, (entry,)) ==
                                         mems[0].final(b, (entry,))) for b in TRACKERS]
    return Claim(same, hyps, cover, transition, {**show, "any_slot": entry}, mems)


def diff_kernels(base: Any, head: Any) -> list[KernelProof]:
    """``review --vllm HEAD --base BASE``: each tracker kernel of ``head`` against ``base``'s, by proof
    (``proved``: the same on every input inside the contract; ``failed``: a distinguishing input)."""
    out = []
    for transition, (kernel, _) in KERNELS.items():
        try:
            claim = diff_claims(base, head, transition, GEOMETRIES[transition])
        except Unsupported as e:
            out.append(KernelProof(transition, kernel, "same as the base",
                                   Result(f"P.{transition}", "unknown", 0.0, [], detail=f"not compared: {e}")))
            continue
        ob = Obligation(f"P.{transition}.same_as_base", f"P.{transition}", f"{kernel}: same as the base", _one(claim))
        out.append(KernelProof(transition, kernel, "same as the base", prove(ob)))
    return out
