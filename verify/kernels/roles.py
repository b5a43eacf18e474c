"""The record of a kernel role: everything the kernel obligations, their
reports and their playback know about one kind of kernel.

A :class:`KernelRole` says which ``@triton.jit`` names it matches, its
constexpr variants, how one program of a variant is built beside the caller
contract (its launch contract: grid, buffers and extents, scalar ranges; the
named caller assumptions it needs), how two programs of one launch are built
for the conflict obligation, the spec program it must equal where there is
one, and how a counterexample replays on the real kernel (:class:`Replay`).

The reference API's roles and our row-blocked one are assembled in
:mod:`.registry`; a launch-API generation's roles are typed records of its
adapter (``spec/generations/``), turned into these by
:mod:`.generation_roles`. Nothing here branches on a role's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from replayssm.spec.generations.roles import DeclaredOutput

from ..obligation import TIMEOUT_MS
from ..terms import Symbolic

if TYPE_CHECKING:
    from replayssm.base.remote import RemoteModule

    from .cases import KernelCase
    from .source import Jit


@dataclass(frozen=True)
class Replay:
    """How a counterexample of a role becomes a launch of the real kernel.

    ``prepare(jit, view)`` returns ``(grid, args, kwargs, outputs)`` for one
    launch on the guarded tensors of ``view`` (:class:`.playback.ReplayView`),
    ``outputs`` the tensors whose final values are compared; ``spec(buffers,
    trace)`` runs the spec program on the same inputs (None: the role has no
    spec program, nothing is compared with it)."""

    action: str
    """The trace's launch action (``postprocess``, ``migrate``, ``compact``)."""
    inputs: tuple[str, ...]
    """The per-request buffers a trace carries for the launch."""
    prepare: Callable[..., tuple]
    spec: Callable[[dict, dict], None] | None = None
    by_capacity: bool = False
    """One program over ``MAX_NUM_REQS`` plan entries (no rows, groups or block table)."""
    packed: bool = False
    """Per-group pointers into packed ``[layer, batch]`` slot tables (a small
    launch pins each group's base and layer count)."""
    meta: Callable[[KernelCase], dict] | None = None
    """Extra ``#meta`` entries of a trace, from its case."""
    one_group: bool = False
    """The replayed launch is one cache group's (a per-group launch API): small launches have one group."""


@dataclass(frozen=True)
class Frame:
    """The cells one program may write (the frame obligation, :mod:`.frame`).

    ``row``: the program owns batch row ``case.row = (batch, group)``: the
    trackers of its group at the slots its own block-table row names (not
    the null id), its own entry of the per-row plan buffers, and its own
    batch entry of each of its group's layers in the packed slot tables; a
    padding program (``case.padding``: its row is past ``num_reqs``) owns no
    tracker, its block-table row naming no request's slots.
    ``work_list(batch)``: whether the program of row ``batch`` may write the
    work list (``active_request_indices``, ``num_active``) anywhere in
    bounds, on a term or an int (the proof's and playback's reading); None:
    never. ``outputs``: the launch's declared extra outputs
    (``spec/generations/roles.py`` :class:`DeclaredOutput`: only the program
    of its batch row may write it, anywhere inside its extent). Any other buffer is outside the frame.
    ``null_block``: the null block's trackers (slot ``pad_slot`` of any group, which no request's state is
    read from) are in every program's frame too: the frame minus the null block's cells, which a review
    proves when a program stores there to tell that store from one to a held block."""

    row: bool = True
    work_list: Callable[[Symbolic], Symbolic] | None = None
    outputs: tuple[DeclaredOutput, ...] = ()
    null_block: bool = False

    def output(self, buffer: str) -> DeclaredOutput | None:
        """The declared extra output ``buffer`` (None: not one)."""
        return next((o for o in self.outputs if o.buffer == buffer), None)


ROW_FRAME = Frame()
WORK_LIST_FRAME = Frame(row=False, work_list=lambda batch: True)


@dataclass(frozen=True)
class KernelRole:
    """One kernel role and its launch contract."""

    name: str
    jits: tuple[str, ...]
    """The jit names it matches in a target module (the first one present is used)."""
    variants: Callable[[], list[tuple[str, tuple]]]
    """``(label, params)`` of every constexpr variant proved."""
    case: Callable[[Jit, str, tuple], KernelCase]
    """``case(jit, label, params)``: one program's :class:`.cases.KernelCase`
    under the caller contract."""
    replay: Replay
    pair: Callable[..., tuple] | None = None
    """``pair(jit, label, params, p)``: ``(p, q, assumptions, cover)``, two
    programs of one launch over one memory (``p`` the single-program case);
    None: the launch has one program (only its lanes can conflict)."""
    spec: str = ""
    """The spec program the role must equal (empty: none; no equivalence obligation)."""
    assumes: tuple[str, ...] = ()
    """The caller assumptions (``spec/assumptions.py`` names) its contract states."""
    generation: str = ""
    """The launch API the role belongs to (``reference`` for the spec's API)."""
    frame: Frame | None = ROW_FRAME
    """The cells a program may write (None: no frame obligation)."""
    properties: tuple[str, ...] = field(default=())
    """The obligations stated for it (empty: every one that applies)."""
    padding: Callable[..., KernelCase] | None = None
    """``padding(jit, label, params, beside=None)``: one *padding* program's
    case, a program past ``num_reqs`` of a launch whose grid spans
    ``max_num_reqs`` rows (its ``padding`` obligation: memory safety and its
    frame, which holds no tracker cell; ``beside``: a row program's case it
    shares a launch with, as the kernel diff compares it); None: the launch
    has no padding programs."""
    timeout_ms: int = TIMEOUT_MS
    """The solver's limit per query of its obligations (``Obligation.timeout_ms``)."""
    isolated: bool = False
    """Its obligations solve each case in a Z3 context of its own (``Obligation.isolated``)."""
    duty: str = ""
    """What the kernel does, alike across generations (empty: its name); the kernel diff matches by it."""

    def jit(self, module: ModuleType | RemoteModule) -> tuple[str, Any] | None:
        """``(name, jit)`` of this role's kernel in ``module``, or None."""
        for name in self.jits:
            fn = getattr(module, name, None)
            if fn is not None:
                return name, fn
        return None

    def kernel_name(self, module: ModuleType | None = None) -> str:
        """The jit name the role has in ``module`` (its first name without one)."""
        found = self.jit(module) if module is not None else None
        return found[0] if found else self.jits[0]


Registry = Sequence[KernelRole]
"""The roles a target is proved for, in order."""


def by_name(roles: Registry) -> dict[str, KernelRole]:
    return {r.name: r for r in roles}
