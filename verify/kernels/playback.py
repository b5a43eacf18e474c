"""Concrete playback of a kernel-proof counterexample on the real kernel.

The trace's launch runs under Triton's interpreter (``TRITON_INTERPRET=1``)
on CPU tensors laid out so that every violation the proofs speak of is
observable:

* every buffer sits between guard zones, and each block-table row is
  followed by guard columns (the row stride is wider than the row), so a
  column past the row lands in a guard, not in the next row;
* the interpreter's masked load and store are wrapped: each lane whose mask
  is on must address an element of a buffer (of a row, for the block
  table), otherwise it is recorded as out of bounds and masked off (so
  playback never touches memory it does not own); every access is logged
  with its program id, for the conflict check;
* the spec's program runs on the same inputs, and every state buffer is
  compared after the launch.

``replay`` of a kernel-proof trace (:func:`replay_kernel_trace`) runs the
target in a process of its own (:mod:`replayssm.base.isolation`): the
launch and the interpreter's watch over it (:func:`watched_launch`, which
must mask a lane off as it runs) happen there, on copies of these tensors;
the log, the lanes out of bounds and the overflows come back with the
buffers, and the comparison, the conflicts and the frame are judged here. A
target that ends, hangs, raises or changes its process (Triton's interpreter
builder included) is that finding, never "no failure". ``review`` replays
its kernel proofs' counterexamples and its kernel diff's distinguishing
inputs the same way, on each version's own process (``remote``; a
:class:`~replayssm.base.isolation.TargetFault` or ``TargetGone`` reaches the
caller, :func:`fault_of` names it). Without ``remote`` the launch is in this
process: for our own kernels and the tests' modules only.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.launch import allocate, compact_launch, migrate_launch, next_power_of_2, postprocess_launch
from replayssm.spec.memory import MemoryFault, ValueOverflow

from .frame import FrameViolation, replay_violations
from .roles import KernelRole, Registry

if TYPE_CHECKING:
    import torch
    from triton.runtime.interpreter import TensorHandle

    from replayssm.base.host_faults import TargetFault, TargetGone
    from replayssm.base.remote import RemoteModule

    from .source import Jit

GUARD = 8
"""Guard elements around each buffer and after each block-table row."""

POISON = -1_000_003
"""What the guards hold: no valid slot, column or count."""

STATE = ("ring_start", "num_committed", "plan_ring_start", "plan_flush_count", "src_slots", "dst_slots",
         "active_request_indices")
EXPECTED = {"memory_safety": "out_of_bounds", "equivalence": "discrepancies", "conflicts": "conflicts",
            "int32": "overflows", "frame": "outside_frame", "padding": "stray_accesses"}
"""Which playback finding reproduces a failure of each obligation."""


@dataclass
class Playback:
    """What the real kernel did on the trace's launch."""

    out_of_bounds: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    discrepancies: list[str] = field(default_factory=list)
    overflows: list[str] = field(default_factory=list)
    outside_frame: list[FrameViolation] = field(default_factory=list)
    spec_fault: str = ""

    @property
    def stray_accesses(self) -> list[str]:
        """Accesses out of bounds or stores outside the frame (a padding program's failures)."""
        return self.out_of_bounds + [str(v) for v in self.outside_frame]

    def reproduces(self, prop: str) -> bool:
        """The finding a failure of obligation ``prop`` predicts was observed."""
        return bool(getattr(self, EXPECTED[prop]))

    def report(self) -> str:
        lines = [f"  out of bounds: {x}" for x in self.out_of_bounds[:12]]
        lines += [f"  conflict: {x}" for x in self.conflicts[:12]]
        lines += [f"  differs from the spec: {x}" for x in self.discrepancies[:12]]
        lines += [f"  overflow: {x}" for x in self.overflows[:12]]
        lines += [f"  outside the frame: {x}" for x in self.outside_frame[:12]]
        if self.spec_fault:
            lines.append(f"  the spec program itself faults on these inputs: {self.spec_fault}")
        return "\n".join(lines) or "  the kernel stays in bounds, in its frame, conflict-free and equal to the spec"


class PlaybackArena:
    """Guarded CPU tensors and the element ranges a launch may touch
    (``tensors``: every guarded allocation, for a launch in another process)."""

    def __init__(self) -> None:
        self.regions: list[tuple[int, int, int, str]] = []
        self.tensors: list[torch.Tensor] = []

    def _region(self, tensor: torch.Tensor, name: str) -> None:
        start = tensor.data_ptr()
        self.regions.append((start, start + tensor.numel() * tensor.element_size(), tensor.element_size(), name))

    def flat(self, name: str, values: npt.ArrayLike, dtype: torch.dtype) -> torch.Tensor:
        import torch

        entries = np.asarray(values).reshape(-1)
        fill = False if dtype == torch.bool else POISON
        big = torch.full((entries.size + 2 * GUARD,), fill, dtype=dtype)
        self.tensors.append(big)
        view = big[GUARD:GUARD + entries.size]
        view.copy_(torch.from_numpy(entries.astype(np.bool_ if dtype == torch.bool else np.int64)).to(dtype))
        self._region(view, name)
        return view

    def rows(self, name: str, values: npt.ArrayLike) -> torch.Tensor:
        """A 2-D int32 table whose rows are each followed by guard columns."""
        import torch

        table = np.asarray(values, dtype=np.int64)
        rows, cols = table.shape
        big = torch.full((rows + 1, cols + GUARD), POISON, dtype=torch.int32)
        self.tensors.append(big)
        view = big[1:, :cols]
        view.copy_(torch.from_numpy(table).to(torch.int32))
        for r in range(rows):
            self._region(view[r], f"{name}[{r}]")
        return view

    def find(self, address: int) -> tuple[str, int] | None:
        for start, end, size, name in self.regions:
            if start <= address < end:
                return name, (address - start) // size
        return None

    def nearest(self, address: int) -> str:
        start, end, size, name = min(self.regions, key=lambda r: min(abs(address - r[0]), abs(address - r[1])))
        return f"{name} element {(address - start) // size} (extent {(end - start) // size})"


ARITHMETIC = {"create_add": lambda a, b: a + b, "create_sub": lambda a, b: a - b, "create_mul": lambda a, b: a * b}
"""The interpreter's integer operations whose wrap-around playback detects."""


@contextmanager
def watched(arena: PlaybackArena, log: list, out_of_bounds: list, overflows: list,
            lane_conflicts: list) -> Iterator[None]:
    """Check and log every masked-on lane of the interpreter's loads and
    stores, and every integer add, subtract, multiply and narrowing cast whose
    exact result its type cannot hold (the interpreter wraps it silently)."""
    from triton.runtime import interpreter as interp

    builder = interp.interpreter_builder

    def exact(name: str, op: Callable[[np.ndarray, np.ndarray], np.ndarray]
              ) -> Callable[[TensorHandle, TensorHandle], TensorHandle]:
        original = getattr(builder, name)

        def run(lhs: TensorHandle, rhs: TensorHandle) -> TensorHandle:
            out = original(lhs, rhs)
            result = np.asarray(out.data)
            if result.dtype.kind == "i":
                want = op(np.asarray(lhs.data).astype(object), np.asarray(rhs.data).astype(object))
                if np.any(want != result.astype(object)):
                    program = tuple(int(i) for i in builder.grid_idx[:2])
                    overflows.append(f"{name[7:]} in program {program}: exact {want.reshape(-1)[0]}, "
                                     f"{result.dtype} gives {result.reshape(-1)[0]}")
            return out

        return run

    def narrowing(src: TensorHandle, dst_type: object, is_signed: bool) -> TensorHandle:
        out = original_cast(src, dst_type, is_signed)
        before, after = np.asarray(src.data), np.asarray(out.data)
        if before.dtype.kind == after.dtype.kind == "i" and np.any(before.astype(object) != after.astype(object)):
            program = tuple(int(i) for i in builder.grid_idx[:2])
            overflows.append(f"cast in program {program}: {before.reshape(-1)[0]} becomes {after.reshape(-1)[0]}")
        return out

    def check(kind: str, ptrs: TensorHandle, mask: TensorHandle, value: TensorHandle | None = None) -> TensorHandle:
        addresses = np.asarray(ptrs.data).reshape(-1)
        on = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.asarray(ptrs.data).shape).reshape(-1).copy()
        values = None if value is None else np.broadcast_to(np.asarray(value.data), np.asarray(ptrs.data).shape).reshape(-1)
        program = tuple(int(i) for i in builder.grid_idx[:2])
        written: dict = {}
        for lane in np.nonzero(on)[0]:
            a = int(addresses[lane])
            hit = arena.find(a)
            if hit is None:
                out_of_bounds.append(f"{kind} by program {program} at {arena.nearest(a)}")
                on[lane] = False
                continue
            log.append((program, kind, hit, None if values is None else int(values[lane])))
            if values is not None:
                written.setdefault(hit, set()).add(int(values[lane]))
        lane_conflicts.extend(f"{cell[0]} element {cell[1]} written by several lanes of one store in program "
                              f"{program} with values {sorted(vs)}" for cell, vs in written.items() if len(vs) > 1)
        return interp.TensorHandle(on.reshape(np.asarray(ptrs.data).shape), mask.dtype)

    def load(ptrs: TensorHandle, mask: TensorHandle, other: TensorHandle | None, *rest: object) -> TensorHandle:
        return original_load(ptrs, check("read", ptrs, mask), other, *rest)

    def store(ptrs: TensorHandle, value: TensorHandle, mask: TensorHandle, *rest: object) -> None:
        return original_store(ptrs, value, check("write", ptrs, mask, value), *rest)

    original_load, original_store = builder.create_masked_load, builder.create_masked_store
    original_cast = builder.create_int_cast
    patched = {"create_masked_load": load, "create_masked_store": store, "create_int_cast": narrowing,
               **{name: exact(name, op) for name, op in ARITHMETIC.items()}}
    for name, fn in patched.items():
        setattr(builder, name, fn)
    try:
        yield
    finally:
        for name in patched:
            delattr(builder, name)


@contextmanager
def watched_launch(regions: list, relocate: Callable[[int], int]) -> Iterator[dict]:
    """:func:`watched` in the target's process (an :class:`~replayssm.base.isolation.ImportRef`
    of :meth:`~replayssm.base.isolation.TargetHost.launch`): ``regions`` are
    the judging process's, ``relocate`` moves an address of its to this
    process's copy; yields the dict its results are put in (plain data)."""
    arena = PlaybackArena()
    for start, end, size, name in regions:
        moved = relocate(start)
        arena.regions.append((moved, moved + end - start, size, name))
    found: dict = {}
    log: list = []
    out_of_bounds: list = []
    overflows: list = []
    lane_conflicts: list = []
    try:
        with watched(arena, log, out_of_bounds, overflows, lane_conflicts):
            yield found
    finally:
        found.update(log=log, out_of_bounds=out_of_bounds, overflows=overflows, conflicts=lane_conflicts)


def conflicts(log: list) -> list[str]:
    """Cells two programs write with different values, or one reads and another writes."""
    writers: dict = defaultdict(dict)
    readers: dict = defaultdict(set)
    for program, kind, cell, value in log:
        if kind == "write":
            writers[cell].setdefault(program, set()).add(value)
        else:
            readers[cell].add(program)
    out = []
    for cell, by in writers.items():
        values = {v for vs in by.values() for v in vs}
        if len(by) > 1 and len(values) > 1:
            out.append(f"{cell[0]} element {cell[1]} written by programs {sorted(by)} with values {sorted(values)}")
        for r in readers.get(cell, ()):
            others = [p for p in by if p != r]
            if others:
                out.append(f"{cell[0]} element {cell[1]} read by program {r} and written by {others}")
    return out


def _setup(trace: dict) -> tuple[Geometry, Conventions, list[int], int, int]:
    p = trace["params"]
    return (Geometry(**p["geometry"]).validated(), Conventions(**p["conventions"]), list(p["layers_per_group"]),
            int(p["num_cols"]), int(p["num_slots"]))


def spec_buffers(trace: dict) -> dict[str, np.ndarray]:
    """The buffers before the launch: the allocation, the trace's state, the launch's inputs."""
    geo, _, layers, num_cols, num_slots = _setup(trace)
    buffers = allocate(geo, num_cols, num_slots, layers)
    state, launch = trace["actions"][0]["picks"], trace["actions"][1]["picks"]
    for b, values in state.items():
        buffers[b][...] = np.asarray(values, dtype=buffers[b].dtype).reshape(buffers[b].shape)
    for b, values in launch.items():
        if b == "num_reqs":
            continue
        if b == "block_table":
            buffers[b][...] = np.asarray(values, dtype=np.int32)
        else:
            buffers[b] = np.asarray(values, dtype=np.bool_ if b == "is_prefilling" else np.int32)
    return buffers


class ReplayView:
    """The guarded tensors of one replayed launch, made on first use: the
    trace's buffers (:meth:`flat`, :meth:`per_request`), each group's block
    table with guard columns and its tracker pair, and the int64 address and
    stride tables over them. A role's ``Replay.prepare`` binds its kernel's
    parameters from these."""

    def __init__(self, trace: dict, buffers: dict) -> None:
        self.trace, self.buffers, self.arena = trace, buffers, PlaybackArena()
        self.geo, self.conv, self.layers, self.num_cols, self.num_slots = _setup(trace)
        self.picks = trace["actions"][1]["picks"]
        self.num_reqs = self.picks["num_reqs"]
        self.groups = len(self.layers)
        self._flat: dict[str, torch.Tensor] = {}
        self._trackers: dict[str, list[torch.Tensor]] | None = None
        self._tables: list[torch.Tensor] | None = None

    def flat(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Buffer ``name`` as one guarded tensor (int32 unless ``dtype``)."""
        import torch

        if name not in self._flat:
            self._flat[name] = self.arena.flat(name, self.buffers[name], dtype or torch.int32)
        return self._flat[name]

    def per_request(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor | None:
        """The launch input ``name`` when the trace carries it, else None."""
        return self.flat(name, dtype) if name in self.picks else None

    def table(self, name: str, values: list[int]) -> torch.Tensor:
        import torch

        return self.arena.flat(name, np.asarray(values, dtype=np.int64), torch.int64)

    def block_tables(self) -> list[torch.Tensor]:
        if self._tables is None:
            self._tables = [self.arena.rows(f"block_table[{g}]", self.buffers["block_table"][g])
                            for g in range(self.groups)]
        return self._tables

    def trackers(self, buffer: str) -> list[torch.Tensor]:
        """Group ``g``'s ``ring_start`` or ``num_committed`` row, each its own guarded tensor."""
        import torch

        if self._trackers is None:
            self._trackers = {b: [self.arena.flat(f"{b}[{g}]", self.buffers[b][g], torch.int32)
                                  for g in range(self.groups)] for b in ("ring_start", "num_committed")}
        return self._trackers[buffer]

    def pointers(self, buffer: str) -> torch.Tensor:
        """The int64 table of each group's ``block_table`` / tracker row address."""
        rows = self.block_tables() if buffer == "block_table" else self.trackers(buffer)
        return self.table(f"{buffer}_ptrs", [t.data_ptr() for t in rows])

    def strides(self) -> torch.Tensor:
        return self.table("block_table_strides", [t.stride(0) for t in self.block_tables()])

    def packed(self, buffer: str) -> torch.Tensor:
        """Each group's address of its first entry of the packed ``buffer``."""
        flat = self.flat(buffer)
        return self.table(f"{buffer}_ptrs", [flat.data_ptr() + int(b) * 4 for b in self.buffers["packed_base"]])

    def finals(self, outputs: dict) -> dict[str, np.ndarray]:
        """The outputs' values after the launch, with both trackers when the launch had them."""
        out = {b: t.numpy().copy() for b, t in outputs.items()}
        if self._trackers is not None:
            for b, rows in self._trackers.items():
                out[b] = np.stack([r.numpy() for r in rows])
        return out


def _kernel_run(trace: dict, module: ModuleType | None, buffers: dict, role: KernelRole,
                remote: RemoteModule | None = None) -> tuple[dict[str, np.ndarray], Playback, list]:
    """The launch on ``module``'s kernel, or with ``remote`` (a
    :class:`~replayssm.base.remote.RemoteModule`) on its kernel in its
    process, ``module`` (its source's kernels, or None) binding the parameters."""
    view, result = ReplayView(trace, buffers), Playback()
    log: list[tuple] = []
    found = (role.jit(module) if module is not None else None) or (role.jit(remote) if remote is not None else None)
    if found is None:
        raise ValueError(f"the target has no kernel of role {role.name} ({', '.join(role.jits)})")
    grid, args, kwargs, outputs = role.replay.prepare(found[1], view)
    if remote is None:
        with watched(view.arena, log, result.out_of_bounds, result.overflows, result.conflicts):
            found[1][grid](*args, **kwargs)
        return view.finals(outputs), result, log
    from replayssm.base.isolation import ImportRef

    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    seen = remote.launch(found[0], grid, tuple(args), kwargs, also=view.arena.tensors,
                         watch=ImportRef(f"{__name__}:watched_launch", ([list(r) for r in view.arena.regions],)))
    result.out_of_bounds += seen["out_of_bounds"]
    result.overflows += seen["overflows"]
    result.conflicts += seen["conflicts"]
    log = [(tuple(program), kind, tuple(hit), value) for program, kind, hit, value in seen["log"]]
    return view.finals(outputs), result, log


def prepare_compaction(jit: Jit, v: ReplayView) -> tuple:
    """The compaction kernel's one program over the plan's flush counts."""
    from .cases import COMPACTION_ARGS
    from .source import is_constexpr, source_of

    v.buffers.setdefault("num_active", np.zeros(1, dtype=np.int32))
    t = {b: v.flat(b) for b in ("plan_flush_count", "active_request_indices")}
    args = [v.num_reqs if p.arg == "num_reqs" else v.flat(COMPACTION_ARGS[p.arg])
            for p in source_of(jit).node.args.args if not is_constexpr(p)]
    kwargs = {"MAX_NUM_REQS": v.geo.max_num_reqs, "BLOCK_SIZE": next_power_of_2(v.geo.max_num_reqs)}
    return (1,), args, kwargs, t


def prepare_migration(jit: Jit, v: ReplayView) -> tuple:
    """The reference migration kernel on grid ``(num_reqs, groups)``."""
    idx = v.per_request("idx_mapping") if v.conv.has_idx_mapping else None
    args = [idx, v.per_request("src_cols"), v.per_request("dst_cols"), v.pointers("block_table"),
            v.pointers("ring_start"), v.pointers("num_committed"), v.strides()]
    kwargs = {"PAD_SLOT_ID": v.geo.pad_slot, "HAS_IDX_MAPPING": idx is not None}
    return (v.num_reqs, v.groups), args, kwargs, {}


PLAN = ("src_slots", "dst_slots", "plan_ring_start", "plan_flush_count")


def _postprocess_args(v: ReplayView) -> list:
    import torch

    idx = v.per_request("idx_mapping") if v.conv.has_idx_mapping else None
    return [idx, v.per_request("query_metadata"), v.per_request("num_computed_tokens"),
            v.per_request("num_accepted_tokens"), v.per_request("is_prefilling", torch.bool),
            v.per_request("live_cols"), v.pointers("block_table"), v.pointers("ring_start"),
            v.pointers("num_committed"), v.packed("src_slots"), v.packed("dst_slots"), v.flat("plan_ring_start"),
            v.flat("plan_flush_count")]


def _postprocess_constexprs(v: ReplayView) -> dict:
    g = v.geo
    return {"MAX_NUM_REQS": g.max_num_reqs, "MAMBA_BLOCK_SIZE": g.block_size, "LOGICAL_WINDOW": g.window,
            "RING_BUFFER_LEN": g.ring_len, "PAD_SLOT_ID": g.pad_slot, **v.conv.as_constexprs()}


def prepare_postprocess(jit: Jit, v: ReplayView) -> tuple:
    """The reference postprocess kernel on grid ``(num_reqs, groups)``."""
    args = _postprocess_args(v) + [v.strides(), v.flat("num_layers")]
    return (v.num_reqs, v.groups), args, _postprocess_constexprs(v), {b: v.flat(b) for b in PLAN}


def prepare_blocked(jit: Jit, v: ReplayView) -> tuple:
    """The row-blocked kernel: ``cdiv(num_reqs, rows) + compact`` row blocks per group."""
    meta = v.trace["#meta"]
    rows, compact = int(meta["rows_per_program"]), bool(meta["compact"])
    args = _postprocess_args(v) + [v.flat("active_request_indices"), v.strides(), v.flat("num_layers"), v.num_reqs]
    kwargs = {**_postprocess_constexprs(v), "ROWS_PER_PROGRAM": rows, "COMPACT": compact,
              "COMPACT_BLOCK": next_power_of_2(v.geo.max_num_reqs)}
    outputs = {b: v.flat(b) for b in (*PLAN, "active_request_indices")}
    return (-(-v.num_reqs // rows) + compact, v.groups), args, kwargs, outputs


def spec_postprocess(buffers: dict, trace: dict) -> None:
    geo, conv, *_ = _setup(trace)
    n = trace["actions"][1]["picks"]["num_reqs"]
    postprocess_launch(buffers, geo, conv, n)
    if trace.get("#meta", {}).get("compact"):
        compact_launch(buffers, geo, n)


def spec_migration(buffers: dict, trace: dict) -> None:
    geo, conv, *_ = _setup(trace)
    migrate_launch(buffers, geo, conv.has_idx_mapping, trace["actions"][1]["picks"]["num_reqs"])


def spec_compaction(buffers: dict, trace: dict) -> None:
    geo, *_ = _setup(trace)
    compact_launch(buffers, geo, trace["actions"][1]["picks"]["num_reqs"])


def trace_role(trace: dict, roles: Registry) -> KernelRole:
    """The role a kernel-proof trace names (``#meta.role``; an older trace: the role whose jit is its kernel)."""
    meta = trace.get("#meta", {})
    for r in roles:
        if r.name == meta.get("role") or ("role" not in meta and meta.get("kernel") in r.jits):
            return r
    raise ValueError(f"the trace's kernel role {meta.get('role', meta.get('kernel'))!r} is not one of "
                     f"{', '.join(r.name for r in roles)}")


def playback(trace: dict, module: ModuleType | None, roles: Registry | None = None,
             remote: RemoteModule | None = None) -> Playback:
    """Run the trace's launch on ``module``'s kernel and, where its role has
    one, on the spec program; compare (``roles``: the registry the trace's
    role is looked up in; default the reference API's and ours; ``remote``:
    the target in its own process, see :func:`_kernel_run`)."""
    return _played(trace, module, roles, remote)[1]


def _played(trace: dict, module: ModuleType | None, roles: Registry | None = None,
            remote: RemoteModule | None = None) -> tuple[dict[str, np.ndarray], Playback]:
    """:func:`playback`, with the buffers the kernel left (its outputs)."""
    if remote is None and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("kernel playback needs Triton's interpreter: set TRITON_INTERPRET=1 before triton loads")
    role = trace_role(trace, roles if roles is not None else _default_roles())
    before = spec_buffers(trace)
    spec = {b: v.copy() for b, v in before.items()}
    fault = ""
    if role.replay.spec is not None:
        try:
            role.replay.spec(spec, trace)
        except (MemoryFault, ValueOverflow) as e:
            fault = str(e)
    launched = {b: v.copy() for b, v in before.items()}
    final, result, log = _kernel_run(trace, module, launched, role, remote)
    result.spec_fault = fault
    result.conflicts += conflicts(log)
    if role.frame is not None:
        geo = _setup(trace)[0]
        # the launch may add buffers the trace does not carry (a declared output such as rand_seeds): their extents
        result.outside_frame += replay_violations(log, {**launched, **before}, role.frame, geo.pad_slot,
                                                  geo.max_num_reqs, trace["actions"][1]["picks"]["num_reqs"])
    compared = trace.get("#meta", {}).get("compared")
    if not fault and role.replay.spec is not None:
        for b, impl in final.items():
            if compared is not None and b not in compared:
                continue
            s = spec[b]
            impl = impl.reshape(s.shape)
            for cell in zip(*np.nonzero(s != impl)):
                result.discrepancies.append(f"{b}{list(int(i) for i in cell)}: spec {int(s[cell])}, "
                                            f"kernel {int(impl[cell])}")
    return final, result


def _default_roles() -> Registry:
    from .registry import ROLES

    return ROLES


def kernel_outputs(trace: dict, module: ModuleType | None, role: KernelRole,
                   remote: RemoteModule | None = None) -> tuple[dict[str, np.ndarray], Playback]:
    """The buffers ``module``'s kernel of ``role`` leaves on the trace's
    launch, and its playback (compared with the spec where the role has
    one), for comparing two versions: one launch of the kernel serves both
    (``remote``: the version in its own process, launched there; see
    :func:`_kernel_run`)."""
    return _played(trace, module, [role], remote)


def fault_of(error: TargetFault | TargetGone) -> TargetFault:
    """The :class:`~replayssm.base.isolation.TargetFault` a launch in the
    target's process raised (itself, or the one a ``TargetGone`` carries)."""
    return error.fault if hasattr(error, "fault") else error


REPLAY_SECONDS = 60.0
"""The launch watchdog of ``replay`` of a kernel-proof trace (``--watchdog`` overrides)."""


def replay_kernel_trace(trace: dict, impl: str | None, device: str = "cpu", roles: Registry | None = None,
                        watchdog: float | None = None) -> tuple[bool, str]:
    """``replay`` for a kernel-proof trace: ``(True, report)`` when the kernel
    shows none of the failure the proof found (``roles``: the registry its
    role is looked up in). The target runs in a process of its own, its
    launch within ``watchdog`` seconds (None: :data:`REPLAY_SECONDS`); what it
    does to that process is ``(False, report)``. A bad device, target or
    trace is a ``ValueError``."""
    from replayssm.base.isolation import TargetFault, TargetGone, load_isolated
    from replayssm.base.targets import DEFAULT_TARGET

    from .source_module import kernel_module

    if device != "cpu":
        raise ValueError(f"a kernel-proof trace replays under Triton's interpreter: --device must be cpu, got {device!r}")
    meta = trace.get("#meta", {})
    if meta.get("property") not in EXPECTED or len(trace.get("actions", [])) != 2:
        raise ValueError("not a kernel-proof trace: it needs #meta.property and a set_state and a launch action")
    # any module with the trace's kernel (the reference's, or our row-blocked one)
    name = impl or meta.get("impl") or DEFAULT_TARGET
    header = f"kernel {meta.get('kernel')} ({meta.get('case')}), obligation {meta.get('obligation')}:"
    try:
        source = kernel_module(name, "--impl")  # its kernels' parameters, read without running it
    except ValueError:
        source = None  # not readable alone: the kernel's own parameter names, from its process
    try:
        remote = load_isolated(name, "--impl", launch_seconds=watchdog or REPLAY_SECONDS)
    except TargetFault as e:
        return False, f"{header}\n  {e.report()}\nfailure reproduced: a {e.kind} of the target at import"
    try:
        if not hasattr(remote, str(meta.get("kernel"))):
            raise ValueError(f"--impl {impl or meta.get('impl')!r} has no kernel {meta.get('kernel')!r}")
        result = playback(trace, source, roles, remote)
    except (TargetFault, TargetGone) as e:
        fault = fault_of(e)
        return False, f"{header}\n  {fault.report()}\nfailure reproduced: a {fault.kind} of the target"
    finally:
        remote.close()
    prop = meta.get("property", "equivalence")
    lines = [header, result.report()]
    ok = not result.reproduces(prop)
    lines.append("no failure: the kernel does not show it" if ok else
                 f"failure reproduced: {EXPECTED[prop].replace('_', ' ')} on the real kernel")
    return ok, "\n".join(lines)
