"""How a caller drives each launch API generation of vLLM's ReplaySSM kernels.

An :class:`Api` is data (one per generation, in ``gen_*.py``): which kernels a generation launches in each phase of a
model-runner step, with which grid and over which buffers (one launch per cache
group, or one for the whole model), and which plan FlashInfer materializes
afterwards. Kernel arguments are bound by parameter name from the launch
namespace (``review/arguments.py``: the caller's per-step vectors,
the constexprs, the buffers); ``inputs`` overrides say where a generation's
caller computes an argument differently (C's preprocess gets the pre-step
computed count whatever the convention). A parameter nobody provides is an
error naming the kernel and the parameter.

The phases of one step: ``migrate`` (before the forward pass: live-column moves
and prefill resets that a generation does up front) and ``postprocess`` (after
it: commit, plan, compaction). An :class:`Api` also carries the generation's
kernel roles (:mod:`.roles`). Generation detection (:func:`.detect`) reads
the kernels' signatures; ``--api NAME`` picks one instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .contract import LaunchContract
from .roles import Role


@dataclass(frozen=True)
class Launch:
    """One kernel launch: ``grid`` entries are namespace names or ints;
    ``scope`` is ``group`` (once per cache group, on its buffers) or ``model``;
    ``plan`` the plan buffers it writes; ``if_defined`` launches it only when
    the module defines that kernel; ``grid_if_defined`` (kernel, grid) swaps
    the grid when that kernel is defined; ``when`` a namespace flag."""

    kernel: str
    grid: tuple[str | int, ...]
    scope: str = "group"
    plan: str = "plan"
    if_defined: str | None = None
    grid_if_defined: tuple[str, tuple[str | int, ...]] | None = None
    when: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    """Launches in order, then FlashInfer's materialize of ``materialize``
    (a plan name; ``None``: no call) when the namespace flag ``materialize_when`` holds."""

    launches: tuple[Launch, ...]
    materialize: str | None = None
    materialize_when: str = "MATERIALIZE_PREFIXES"


@dataclass(frozen=True)
class Api:
    """One launch API generation."""

    name: str
    summary: str
    scope: str
    """``group`` (plans per cache group), ``model`` (one plan, pointer tables) or
    ``packed`` (the reference: one plan, per-group pointers into packed tables)."""
    signature: Mapping[str, tuple[str, ...]]
    """Kernel -> parameters it must have (detection)."""
    phases: Mapping[str, Phase]
    work_list: bool
    """Whether plans carry ``active_request_indices`` (FlashInfer's work list)."""
    roles: tuple[Role, ...] = ()
    """Its kernel roles, each a typed record every judge reads."""
    contract: LaunchContract = LaunchContract()
    """How its own host launches the kernels (:mod:`.contract`): the kernel proofs, campaigns and probes
    judge it only inside it."""
    plans: tuple[str, ...] = ("plan",)

    def matches(self, module: Any) -> bool:
        """Whether ``module`` (a version's module, its kernels read from source, or
        its module in a process of its own) has every kernel and parameter of
        :attr:`signature`."""
        for kernel, params in self.signature.items():
            names = kernel_params(module, kernel)
            if names is None or not set(params) <= set(names):
                return False
        return True

    def kernels(self, module: Any) -> list[str]:
        """The kernels this API launches that ``module`` defines."""
        out = []
        for phase in self.phases.values():
            for launch in phase.launches:
                if launch.if_defined is None or kernel_params(module, launch.if_defined) is not None:
                    out.append(launch.kernel)
        return out


def kernel_params(module: Any, name: str) -> list[str] | None:
    """The parameter names of ``module``'s Triton kernel ``name`` (None if absent)."""
    fn = getattr(module, name, None)
    names = getattr(fn, "arg_names", None)
    return list(names) if names is not None else None
