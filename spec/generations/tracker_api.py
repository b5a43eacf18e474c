"""A generation whose trackers the forward pass changes itself: its kernel roles and launch contract as records.

vLLM 0.33.0's per-slot ring trackers (generation P) have no plans, no block
tables and no FlashInfer materialize, so an :class:`.api.Api` (phases of
launches around a plan) does not describe them. A :class:`TrackerApi` is the
same kind of adapter for such a lifecycle: its name, how it is recognised
(``signature``, as :meth:`.api.Api.matches` reads it), its kernel roles
(:class:`TrackerRole`: the jit, the spec program each program of it is one row
of, its parameters in order, the constexprs its host passes, the grid, the
geometry it is proved for, the contract clauses its proof takes and what they
are applied to) and its host's contract (:class:`TrackerContract`: the caller's
clauses and the validator's rules, records of ``spec/release_caller.py``).

The kernel proofs and the kernel diff of ``review --vllm`` read these records;
every difference between two roles is a field here, never a test of a role's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..assumptions import Assumption
from ..release_caller import ValidatorRule
from ..release_trackers import PROGRAMS, ReleaseGeometry, TrackerTrace
from .api import kernel_params

BUFFER, STRIDE, SCALAR = "buffer", "stride", "scalar"
"""The kinds of a kernel's runtime parameter: a tensor, a tensor's stride, an int."""


@dataclass(frozen=True)
class Param:
    """One runtime parameter of a role's kernel, in the kernel's order.

    ``kind`` is :data:`BUFFER` (``length``: the name of its length, by default
    ``<name>_len``), :data:`STRIDE` (``of``: the buffer, ``dim`` its dimension)
    or :data:`SCALAR` (a launch size: its value is any int the contract allows)."""

    name: str
    kind: str
    of: str | None = None
    dim: int = 0
    length: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in (BUFFER, STRIDE, SCALAR):
            raise ValueError(f"parameter {self.name}: kind must be one of {BUFFER}, {STRIDE}, {SCALAR}, "
                             f"got {self.kind!r}")
        if self.kind == STRIDE and self.of is None:
            raise ValueError(f"parameter {self.name}: a stride names the buffer it is the stride of")

    @property
    def length_name(self) -> str:
        """The name of a buffer's length (what a :class:`ClauseUse` applies a clause to)."""
        return self.length or f"{self.name}_len"


@dataclass(frozen=True)
class ClauseUse:
    """A caller clause the role's proof takes as a hypothesis, and the values
    it is applied to, by name (``slot0``/``slot1``: the two sampled lanes'
    slots; ``pad``: the pad slot; a scalar parameter's name; a buffer's :attr:`Param.length_name`)."""

    clause: Assumption
    applied_to: tuple[str, ...]


@dataclass(frozen=True)
class TrackerRole:
    """One tracker kernel role: a program of the kernel is ``block`` batch rows,
    each one row of the spec's program ``transition`` (``spec/release_trackers.py``)."""

    name: str
    transition: str
    """The spec program each lane is one row of (a key of ``release_trackers.PROGRAMS``)."""
    jit: str
    """The ``@triton.jit`` name in the version."""
    params: tuple[Param, ...]
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    """What the host passes beside the geometry's (``logical_window``,
    ``ring_buffer_len``, ``pad_slot_id``, ``BLOCK``), overriding them: the selecting flags."""
    geometry: ReleaseGeometry = ReleaseGeometry(16, 4, 20)
    """The configuration its source proof runs on."""
    block: int = 128
    """The lanes of one program, as the host wrappers launch the kernel (grid ``cdiv(n_slots, block)``)."""
    grid: tuple[str, ...] = ("cdiv(n_slots, BLOCK)",)
    clauses: tuple[ClauseUse, ...] = ()

    @property
    def program(self) -> Callable[..., TrackerTrace]:
        """The spec's program of one row (looked up when called, so a planted spec program is the one read)."""
        return PROGRAMS[self.transition]

    def buffers(self) -> tuple[Param, ...]:
        """The kernel's tensor parameters, in order."""
        return tuple(p for p in self.params if p.kind == BUFFER)

    def launch_constexprs(self) -> dict[str, Any]:
        """Every constexpr of the launch: the geometry's, then :attr:`constexprs` over them."""
        geo = self.geometry
        return {"logical_window": geo.window, "ring_buffer_len": geo.ring_len, "pad_slot_id": geo.pad,
                "BLOCK": self.block, **self.constexprs}


@dataclass(frozen=True)
class Configuration:
    """A configuration the version's validator accepts, named, that its review's campaigns run."""

    name: str
    geometry: ReleaseGeometry


@dataclass(frozen=True)
class ProbeUse:
    """A caller clause the corpus does not guarantee, probed by driving the kernels
    with the host order ``host_order`` that breaks it, on configuration ``configuration``."""

    clause: Assumption
    host_order: str
    configuration: str


@dataclass(frozen=True)
class TrackerContract:
    """What the version's host guarantees or not (``clauses``), which configurations it runs
    (``validator``), those its review's campaigns run (``configurations``) and the clauses it probes
    (``probes``: each one of ``clauses`` that is not guaranteed, on one of ``configurations``)."""

    clauses: tuple[Assumption, ...] = ()
    validator: tuple[ValidatorRule, ...] = ()
    configurations: tuple[Configuration, ...] = ()
    probes: tuple[ProbeUse, ...] = ()

    def __post_init__(self) -> None:
        names = {c.name for c in self.configurations}
        for p in self.probes:
            if p.clause not in self.clauses or p.clause.provenance.is_guaranteed:
                raise ValueError(f"probe of {p.clause.name}: only a clause of the contract that vLLM does not "
                                 "guarantee is probed")
            if p.configuration not in names:
                raise ValueError(f"probe of {p.clause.name}: configuration {p.configuration!r} is not one of "
                                 f"{sorted(names)}")

    def unguaranteed(self) -> tuple[Assumption, ...]:
        """The clauses vLLM does not guarantee (a verdict that needs one is latent)."""
        return tuple(c for c in self.clauses if not c.provenance.is_guaranteed)


@dataclass(frozen=True)
class TrackerApi:
    """One generation whose trackers the forward pass changes (see the module docstring)."""

    name: str
    summary: str
    signature: Mapping[str, tuple[str, ...]]
    """Kernel -> parameters it must have (detection)."""
    roles: tuple[TrackerRole, ...]
    contract: TrackerContract = TrackerContract()

    def matches(self, module: Any) -> bool:
        """Whether ``module`` has every kernel and parameter of :attr:`signature`."""
        for kernel, params in self.signature.items():
            names = kernel_params(module, kernel)
            if names is None or not set(params) <= set(names):
                return False
        return True

    def marker(self) -> str:
        """A line only this generation's kernel file has: the first signature kernel's definition."""
        return f"def {next(iter(self.signature))}("
