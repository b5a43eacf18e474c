"""A generation's kernel roles as typed records: what every judge of the kernels reads.

A :class:`GenerationRole` names one kind of kernel of a launch-API generation
(its ``@triton.jit`` names), how the version's host launches it
(:class:`RoleLaunch`: the caller's step the program is one row of, the launch
scope, the arguments the caller computes under another name, the flags the
kernel takes, whether its grid spans ``max_num_reqs`` rows) and which cells a
program may write beside its own row (:class:`RoleFrame`). A
:class:`SharedRole` is a kernel the generation shares with the reference API
(``verify/kernels/registry.py`` proves it beside its spec program).

The kernel prover (``verify/kernels/named.py``), the kernel diff, ``prove
--kernels [--impl]`` and ``review`` all read these records; every difference
between two roles is a field here, never a test of a role's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Step:
    """The caller's step whose one batch row a program of the role is.

    ``name``: ``postprocess`` (after the forward pass: the row's commit and
    plan, from the step metadata) or ``migration`` (a live-column move, from
    the request's old and new column)."""

    name: str
    summary: str


POSTPROCESS_ROW = Step("postprocess", "one row of a step after the forward pass: its commit and prefix plan")
MIGRATION_ROW = Step("migration", "one request's live-column move (old column to new column)")


@dataclass(frozen=True)
class Scope:
    """How one launch covers the cache groups."""

    name: str
    per_group: bool
    """True: one launch per cache group on that group's tensors (program id
    ``(batch,)``, two programs of one launch share their group); False: one
    launch for the model, programs ``(batch, group)`` over int64 pointer tables."""


GROUP = Scope("group", per_group=True)
MODEL = Scope("model", per_group=False)


@dataclass(frozen=True)
class RoleLaunch:
    """How the version's host launches a role's kernel."""

    step: Step
    scope: Scope
    inputs: Mapping[str, str] = field(default_factory=dict)
    """Parameter -> buffer where the caller passes another vector under that name."""
    live_col_is_zero: bool = False
    """Whether the kernel takes ``LIVE_COL_IS_ZERO`` (else the caller always passes live columns)."""
    post_step: bool = True
    """Whether the kernel takes the computed-count convention (else the count is pre-step)."""
    moves: bool = False
    """Whether a postprocess-step kernel also moves live columns (``src_cols`` to
    ``dst_cols``): its conflict obligation assumes ``fresh_distinct_destinations`` too."""
    padded: bool = False
    """Whether the launch's grid spans ``max_num_reqs`` rows (the programs past
    ``num_reqs`` are padding) rather than ``num_reqs``."""


@dataclass(frozen=True)
class DeclaredOutput:
    """A buffer a version's launch writes beside the lifecycle state: only the
    program of batch row ``program`` may write it, anywhere inside its extent."""

    buffer: str
    program: int = 0


@dataclass(frozen=True)
class RoleFrame:
    """What a program may write beside its own row's cells (trackers of its
    row's slots, its plan row, its slot-table entries)."""

    work_list_program: int | None = None
    """The batch row whose program writes the work list
    (``active_request_indices``, ``num_active``); None: no program does."""
    outputs: tuple[DeclaredOutput, ...] = ()


@dataclass(frozen=True)
class GenerationRole:
    """One kernel role of a generation, bound by parameter name over the reference caller's row."""

    name: str
    duty: str
    """What the kernel does, alike across generations (``postprocess``, ``migration``): the kernel diff
    compares two generations' roles of one duty."""
    jits: tuple[str, ...]
    """The jit names it matches in a version (the first one present is used)."""
    launch: RoleLaunch
    frame: RoleFrame | None = RoleFrame()
    """None: no frame obligation."""
    assumes: tuple[str, ...] = ()
    """The caller assumptions its contract states (empty: the reference API's contract)."""


@dataclass(frozen=True)
class SharedRole:
    """The reference API's kernel role ``name`` (``postprocess``, ``migration``,
    ``compaction``), which the generation launches unchanged."""

    name: str


Role = GenerationRole | SharedRole
"""A generation's kernel role."""
