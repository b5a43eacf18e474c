"""How a caller drives each launch API generation of vLLM's ReplaySSM kernels.

An :class:`Api` is data: which kernels a generation launches in each phase of a
model-runner step, with which grid and over which buffers (one launch per cache
group, or one for the whole model), and which plan FlashInfer materializes
afterwards. Kernel arguments are bound by parameter name from the launch
namespace (:mod:`replayssm.review.arguments`: the caller's per-step vectors,
the constexprs, the buffers); ``inputs`` overrides say where a generation's
caller computes an argument differently (C's preprocess gets the pre-step
computed count whatever the convention). A parameter nobody provides is an
error naming the kernel and the parameter.

The phases of one step: ``migrate`` (before the forward pass: live-column moves
and prefill resets that a generation does up front) and ``postprocess`` (after
it: commit, plan, compaction). Generation detection (:func:`detect`) reads the
kernels' signatures; ``--api NAME`` picks one instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from ..target import ReviewInputError

if TYPE_CHECKING:
    from replayssm.base.isolation import RemoteModule


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
    plans: tuple[str, ...] = ("plan",)

    def matches(self, module: ModuleType | RemoteModule) -> bool:
        for kernel, params in self.signature.items():
            names = kernel_params(module, kernel)
            if names is None or not set(params) <= set(names):
                return False
        return True

    def kernels(self, module: ModuleType | RemoteModule) -> list[str]:
        """The kernels this API launches that ``module`` defines."""
        out = []
        for phase in self.phases.values():
            for launch in phase.launches:
                if launch.if_defined is None or kernel_params(module, launch.if_defined) is not None:
                    out.append(launch.kernel)
        return out


def kernel_params(module: ModuleType | RemoteModule, name: str) -> list[str] | None:
    """The parameter names of ``module``'s Triton kernel ``name`` (None if absent)."""
    fn = getattr(module, name, None)
    names = getattr(fn, "arg_names", None)
    return list(names) if names is not None else None


def registry() -> dict[str, Api]:
    """Every known API by name, in detection order."""
    from . import gen_a, gen_b, gen_c, gen_d, reference

    return {a.name: a for a in (reference.API, gen_d.API, gen_c.API, gen_b.API, gen_a.API)}


def kernel_roles(api: Api) -> tuple:
    """The kernel roles of ``api`` (declared in its adapter module beside ``API``)."""
    from . import gen_a, gen_b, gen_c, gen_d, reference

    return {m.API.name: m.ROLES for m in (reference, gen_a, gen_b, gen_c, gen_d)}[api.name]


def detect(module: ModuleType | RemoteModule, name: str | None = None) -> Api:
    """The API of ``module`` (or the one named by ``--api``), checked against its kernels."""
    apis = registry()
    if name is not None:
        if name not in apis:
            raise ReviewInputError(f"--api must be one of {sorted(apis)}, got {name!r}")
        api = apis[name]
        missing = [k for k in api.kernels(module) if kernel_params(module, k) is None]
        if missing or not api.matches(module):
            raise ReviewInputError(f"--api {name}: the target lacks the kernels or parameters it launches "
                                   f"({', '.join(missing) or 'signature ' + str(dict(api.signature))})")
        return api
    for api in apis.values():
        if api.matches(module):
            return api
    found = {k: v.arg_names for k, v in vars(module).items() if hasattr(v, "arg_names") and not k.startswith("__")}
    if not found:
        raise ReviewInputError("the target defines no Triton kernels (missing kernels): nothing to review")
    shown = "; ".join(f"{k}({', '.join(v)})" for k, v in sorted(found.items()))
    raise ReviewInputError(f"unknown kernel signatures, no launch API matches (use --api NAME, one of "
                           f"{sorted(apis)}): {shown}")
