"""Running one launch action on the spec and on an implementation.

The launch actions (:mod:`.actions`) are typed records of what a caller hands
the worker kernels in one call. Three *sides* execute them: the spec on numpy
buffers (vectorized oracle), the implementation at kernel level (its kernels
on tables we build) or at context level (its ``ReplaySSMModelContext``). Each
side implements one method per kind of action, and :meth:`Side.run` is the
one dispatch on the kind. :func:`compare` then checks every entry of every
state buffer, so frame conditions come for free.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from replayssm.base.remote import RemoteModule
from replayssm.impl.pointers import register_tensor
from replayssm.spec.assumptions import block_table_width
from replayssm.spec.geometry import Conventions, Geometry, check_cache_mode
from replayssm.spec.launch import allocate, migrate_launch, next_power_of_2, postprocess_step

from .actions import STATE_BUFFERS, Action, BlockCopy, Migrate, Postprocess, SetState, launch_inputs
from .guards import TRACKERS, Arena, guard_context, guarded_inputs, guards_enabled

@dataclass(frozen=True)
class Setup:
    """The fixed shape of one fuzzed system: ``max_model_len`` is the longest
    request (``None``: ``num_cols * block_size``, the table full); a mode-none
    table has one live column whatever its length (``model_fits_table``).
    ``cache_mode`` is vLLM's cache mode (``None``: the one ``conventions``
    serve by default): all mode runs with either host's flags. ``executed_width``:
    the fixed width FlashInfer executes every decode row at, passed to the
    kernels as ``EXECUTED_QUERY_WIDTH`` (0: each row at its own length)."""

    geometry: Geometry
    conventions: Conventions
    layers_per_group: tuple[int, ...]
    num_cols: int
    num_slots: int
    max_model_len: int | None = None
    cache_mode: str | None = None
    executed_width: int = 0

    def __post_init__(self) -> None:
        if self.max_model_len is None:
            object.__setattr__(self, "max_model_len", self.num_cols * self.geometry.block_size)
        mode = self.conventions.mode if self.cache_mode is None else self.cache_mode
        object.__setattr__(self, "cache_mode", check_cache_mode(mode, self.conventions))

    @classmethod
    def sized(cls, geometry: Geometry, conventions: Conventions, layers_per_group: tuple[int, ...],
              model_blocks: int, num_slots: int, cache_mode: str | None = None) -> "Setup":
        """A system for requests of up to ``model_blocks`` blocks, its table as
        vLLM sizes it in its cache mode (``spec.assumptions.block_table_width``)."""
        max_model_len = model_blocks * geometry.block_size
        mode = conventions.mode if cache_mode is None else cache_mode
        width = block_table_width(mode, max_model_len, geometry.block_size)
        return cls(geometry, conventions, layers_per_group, width, num_slots, max_model_len, mode)

    def as_json(self) -> dict:
        g, c = self.geometry, self.conventions
        return {
            "geometry": {"max_num_reqs": g.max_num_reqs, "block_size": g.block_size, "window": g.window,
                         "ring_len": g.ring_len, "pad_slot": g.pad_slot},
            "conventions": {k: getattr(c, k) for k in ("cumulative", "post_step", "has_idx_mapping",
                                                      "materialize_prefixes", "live_col_is_zero")},
            "layers_per_group": list(self.layers_per_group),
            "num_cols": self.num_cols,
            "num_slots": self.num_slots,
            "max_model_len": self.max_model_len,
            **({"cache_mode": self.cache_mode} if self.cache_mode != c.mode else {}),
            **({"executed_width": self.executed_width} if self.executed_width else {}),
        }

    @classmethod
    def from_json(cls, d: dict) -> "Setup":
        """A trace's setup (one written before ``max_model_len`` was recorded: the table full)."""
        return cls(Geometry(**d["geometry"]).validated(), Conventions(**d["conventions"]),
                   tuple(d["layers_per_group"]), d["num_cols"], d["num_slots"], d.get("max_model_len"),
                   d.get("cache_mode"), d.get("executed_width", 0))


def copy_trackers(copies: list, trackers: Callable[[str, int], Any]) -> None:
    """A scheduler block copy: for each ``(group, src, dst)`` the destination
    slot takes the source slot's ``ring_start`` and ``num_committed``
    (``trackers(buffer, group)`` is that group's writable row of the buffer)."""
    for g, src, dst in copies:
        for b in ("ring_start", "num_committed"):
            row = trackers(b, g)
            row[dst] = row[src]


class Side(ABC):
    """Something that executes launch actions: one method per kind."""

    def run(self, action: Action) -> Any:
        """Execute ``action``: the one dispatch on the kind of launch action."""
        if isinstance(action, BlockCopy):
            return self.block_copy(action)
        if isinstance(action, SetState):
            return self.set_state(action)
        if isinstance(action, Migrate):
            return self.migrate(action)
        if isinstance(action, Postprocess):
            return self.postprocess(action)
        raise TypeError(f"not a launch action: {action!r:.80}")

    @abstractmethod
    def block_copy(self, action: BlockCopy) -> Any:
        """Execute one block_copy action."""

    @abstractmethod
    def set_state(self, action: SetState) -> Any:
        """Execute one set_state action."""

    @abstractmethod
    def migrate(self, action: Migrate) -> Any:
        """Execute one migrate action."""

    @abstractmethod
    def postprocess(self, action: Postprocess) -> Any:
        """Execute one postprocess action."""

    @abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """Every state buffer (:data:`STATE_BUFFERS`) as numpy."""


class SpecSide(Side):
    """The oracle: spec launches on numpy buffers."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.buffers = allocate(setup.geometry, setup.num_cols, setup.num_slots, list(setup.layers_per_group))

    def block_copy(self, action: BlockCopy) -> None:
        copy_trackers(action.copies, lambda b, g: self.buffers[b][g])

    def set_state(self, action: SetState) -> None:
        for b, values in action.buffers.items():
            self.buffers[b][...] = np.asarray(values, dtype=self.buffers[b].dtype).reshape(self.buffers[b].shape)

    def _take_inputs(self, action: Migrate | Postprocess) -> None:
        for key, value in launch_inputs(action).items():
            self.buffers[key] = np.asarray(value, dtype=np.bool_ if key == "is_prefilling" else np.int32)

    def migrate(self, action: Migrate) -> Any:
        self._take_inputs(action)
        geo, conv = self.setup.geometry, self.setup.conventions
        return migrate_launch(self.buffers, geo, conv.has_idx_mapping, action.num_reqs, vectorized=True)

    def postprocess(self, action: Postprocess) -> Any:
        self._take_inputs(action)
        geo, conv = self.setup.geometry, self.setup.conventions
        return postprocess_step(self.buffers, geo, conv, action.num_reqs, vectorized=True)

    def state(self) -> dict[str, np.ndarray]:
        return {b: self.buffers[b].copy() for b in STATE_BUFFERS}


def _addresses(tensors: list[torch.Tensor]) -> list[int]:
    return [t.data_ptr() for t in tensors]


KERNEL_POINTER_TABLES = ("block_table_ptrs", "block_table_strides", "tracker_start_ptrs", "tracker_committed_ptrs",
                         "src_slots_ptrs", "dst_slots_ptrs")
"""The int64 tables the harness builds for the kernels (one entry per cache group)."""


class KernelSide(Side):
    """The implementation at kernel level: its kernels on tables we build.

    Every buffer sits in a guarded arena (:mod:`.guards`): block tables with
    guard columns, per-group tracker arrays followed by the poison slot's
    trackers, the plan, packed and work-list buffers, the pointer and stride
    tables; each launch's inputs in an arena of their own. After each kernel
    the arenas are checked, so a finding names the kernel."""

    def __init__(self, setup: Setup, module: ModuleType, device: torch.device) -> None:
        self.setup, self.module, self.device = setup, module, device
        geo, groups = setup.geometry, len(setup.layers_per_group)
        init = allocate(geo, setup.num_cols, setup.num_slots, list(setup.layers_per_group))
        self.arena = arena = Arena(device, setup.num_slots, guards_enabled())
        for g in range(groups):
            arena.reserve_table(f"block_table.g{g}", geo.max_num_reqs, setup.num_cols)
            for b in TRACKERS:
                arena.reserve(f"{b}.g{g}", (setup.num_slots,), state=True)
        for b in ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots"):
            arena.reserve(b, init[b].shape, state=True)
        arena.reserve("num_layers", (groups,))
        for b in KERNEL_POINTER_TABLES:
            arena.reserve(b, (groups,), torch.int64)
        arena.allocate()
        for b in ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots"):
            arena.put(b, init[b])
        arena.put("num_layers", init["num_layers"])
        tables = [arena.view(f"block_table.g{g}") for g in range(groups)]
        for g, table in enumerate(tables):
            arena.put(f"block_table.g{g}", init["block_table"][g])
        src, dst = arena.view("src_slots"), arena.view("dst_slots")
        bases = [int(b) for b in init["packed_base"]]
        arena.put("block_table_ptrs", _addresses(tables))
        arena.put("block_table_strides", [t.stride(0) for t in tables])
        arena.put("tracker_start_ptrs", _addresses([self._trackers("ring_start", g) for g in range(groups)]))
        arena.put("tracker_committed_ptrs", _addresses([self._trackers("num_committed", g) for g in range(groups)]))
        arena.put("src_slots_ptrs", _addresses([src[b:] for b in bases]))
        arena.put("dst_slots_ptrs", _addresses([dst[b:] for b in bases]))

    def _trackers(self, buffer: str, group: int) -> torch.Tensor:
        return self.arena.view(f"{buffer}.g{group}")

    def block_copy(self, action: BlockCopy) -> None:
        copy_trackers(action.copies, self._trackers)

    def set_state(self, action: SetState) -> None:
        for b, values in action.buffers.items():
            if b in TRACKERS:
                rows = np.asarray(values, dtype=np.int32).reshape(len(self.setup.layers_per_group), -1)
                for g, row in enumerate(rows):
                    self._trackers(b, g).copy_(torch.from_numpy(row))
            else:
                view = self.arena.view(b)
                view.copy_(torch.tensor(values, dtype=view.dtype).reshape(view.shape))

    def _launch(self, action: Migrate | Postprocess) -> tuple[Arena, dict[str, torch.Tensor]]:
        """Put the action's block tables in place and its other inputs in a fresh arena."""
        for g, rows in enumerate(action.block_table):
            self.arena.put(f"block_table.g{g}", rows)
        inputs = {k: v for k, v in launch_inputs(action).items() if k != "block_table"}
        return guarded_inputs(inputs, self.device, self.setup.num_slots, self.arena.guarded)

    def _check(self, inputs: Arena, kernel: str) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.arena.check(kernel)
        inputs.check(kernel)

    def migrate(self, action: Migrate) -> None:
        arena, inp = self._launch(action)
        n, groups = action.num_reqs, len(self.setup.layers_per_group)
        if n == 0:
            return
        a = self.arena.view
        self.module._reset_new_replayssm_slots_kernel[(n, groups)](
            inp.get("idx_mapping"), inp["src_cols"], inp["dst_cols"],
            a("block_table_ptrs"), a("tracker_start_ptrs"), a("tracker_committed_ptrs"), a("block_table_strides"),
            PAD_SLOT_ID=self.setup.geometry.pad_slot, HAS_IDX_MAPPING=action.idx_mapping is not None,
        )
        self._check(arena, "_reset_new_replayssm_slots_kernel")

    def postprocess(self, action: Postprocess) -> None:
        arena, inp = self._launch(action)
        geo, conv = self.setup.geometry, self.setup.conventions
        n, groups = action.num_reqs, len(self.setup.layers_per_group)
        if n == 0:
            return
        a = self.arena.view
        self.module._postprocess_replayssm_kernel[(n, groups)](
            inp.get("idx_mapping"), inp["query_metadata"], inp["num_computed_tokens"], inp["num_accepted_tokens"],
            inp["is_prefilling"], inp.get("live_cols"),
            a("block_table_ptrs"), a("tracker_start_ptrs"), a("tracker_committed_ptrs"), a("src_slots_ptrs"),
            a("dst_slots_ptrs"), a("plan_ring_start"), a("plan_flush_count"), a("block_table_strides"),
            a("num_layers"),
            MAX_NUM_REQS=geo.max_num_reqs, MAMBA_BLOCK_SIZE=geo.block_size, LOGICAL_WINDOW=geo.window,
            RING_BUFFER_LEN=geo.ring_len, PAD_SLOT_ID=geo.pad_slot, **conv.as_constexprs(),
        )
        self._check(arena, "_postprocess_replayssm_kernel")
        if conv.materialize_prefixes:
            self.module._compact_replayssm_requests_kernel[(1,)](
                a("plan_flush_count"), a("active_request_indices"), n,
                MAX_NUM_REQS=geo.max_num_reqs, BLOCK_SIZE=next_power_of_2(geo.max_num_reqs),
            )
            self._check(arena, "_compact_replayssm_requests_kernel")

    def state(self) -> dict[str, np.ndarray]:
        groups = range(len(self.setup.layers_per_group))
        out = {b: torch.stack([self._trackers(b, g) for g in groups]).cpu().numpy() for b in TRACKERS}
        for b in STATE_BUFFERS:
            if b not in TRACKERS:
                out[b] = self.arena.view(b).cpu().numpy().copy()
        return out


@dataclass(frozen=True)
class _CacheSpec:
    """What ``ReplaySSMModelContext.create`` reads of a cache group's spec."""

    block_size: int
    mamba_cache_mode: str


class _Layer:
    """A Mamba layer as the reference reads it (attribute names only)."""

    def __init__(self, kv_cache: list[torch.Tensor], A: torch.Tensor, window: int,
                 trackers: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.kv_cache, self.A, self.replayssm_buffer_len = kv_cache, A, window
        self.mamba_config = type("MambaConfig", (), {"enable_stochastic_rounding": False,
                                                     "stochastic_rounding_philox_rounds": 0})()
        self.use_replayssm = self.use_flashinfer_replayssm = True
        self._replayssm_ring_start, self._replayssm_prev_num_accepted = trackers
        self._plans_replayssm_decode = False


def forget_previous(module: Any) -> None:
    """Before a new system's context: a target in a process of its own drops
    the objects and buffers it shared for the previous one."""
    if isinstance(module, RemoteModule):
        module.forget()


class ContextSide(Side):
    """The implementation at context level: its ``ReplaySSMModelContext``
    (create, reset_new_slots, postprocess with compaction and materialize)
    over layer objects carrying the reference's attribute names; a target in
    a process of its own is called there (:class:`~replayssm.base.remote.RemoteObject`),
    every tensor it uses shared with this process, where they are judged. Slot contents
    are tiny (1 head, dim 2, dstate 2); only the integer state is compared.
    The block tables and trackers sit in a guarded arena, the context's own
    buffers are moved into another (:func:`.guards.guard_context`), and each
    call's inputs get one of their own; a subclass that builds its own tables
    (``arena`` None) runs unguarded."""

    arena: Arena | None = None
    own: Arena | None = None

    def __init__(self, setup: Setup, module: ModuleType, device: torch.device) -> None:
        self.setup, self.device = setup, device
        forget_previous(module)
        geo, slots = setup.geometry, setup.num_slots
        heads, dim, dstate, ring = 1, 2, 2, geo.ring_len
        gen = torch.Generator().manual_seed(0)

        def cache() -> list[torch.Tensor]:
            return [torch.zeros(slots, 1, device=device),
                    torch.randn(slots, heads, dim, dstate, generator=gen).to(device),
                    torch.randn(slots, heads, ring, dim, generator=gen).to(device, torch.bfloat16),
                    torch.rand(slots, heads, ring, generator=gen).to(device),
                    torch.randn(slots, 1, ring, dstate, generator=gen).to(device, torch.bfloat16)]

        spec = _CacheSpec(geo.block_size, setup.conventions.mode)
        self.arena = arena = Arena(device, slots, guards_enabled())
        for g in range(len(setup.layers_per_group)):
            arena.reserve_table(f"block_table.g{g}", geo.max_num_reqs, setup.num_cols)
            for b in TRACKERS:
                arena.reserve(f"{b}.g{g}", (slots,), state=True)
        arena.allocate()
        self.tables, self.trackers, grouped = [], [], []
        for g, layers in enumerate(setup.layers_per_group):
            table = arena.put(f"block_table.g{g}", np.full((geo.max_num_reqs, setup.num_cols), geo.pad_slot))
            pair = (arena.put(f"ring_start.g{g}", np.zeros(slots)), arena.put(f"num_committed.g{g}", np.zeros(slots)))
            mixers = [_Layer(cache(), -torch.rand(heads, generator=gen).to(device), geo.window, pair)
                      for _ in range(layers)]
            for tensor in (t for m in mixers for t in (*m.kv_cache, m.A)):
                register_tensor(tensor)  # the torch materialize backend resolves any target's address tables
            self.tables.append(table)
            self.trackers.append(pair)
            grouped.append((mixers, spec, table))
        self.ctx = module.ReplaySSMModelContext.create(grouped, geo.max_num_reqs)
        self.own = guard_context(self.ctx, device, slots) if arena.guarded else None
        """The context's own buffers, moved into a guarded arena."""

    def block_copy(self, action: BlockCopy) -> None:
        copy_trackers(action.copies, lambda b, g: self.trackers[g][b == "num_committed"])

    def set_state(self, action: SetState) -> None:
        for b, values in action.buffers.items():
            if b in TRACKERS:
                rows = torch.tensor(values, dtype=torch.int32).reshape(len(self.trackers), -1)
                for g, pair in enumerate(self.trackers):
                    pair[b == "num_committed"].copy_(rows[g])
            else:
                t = getattr(self.ctx, b)
                t.copy_(torch.tensor(values, dtype=t.dtype).reshape(t.shape))

    def _call(self, entry: str, action: Migrate | Postprocess, **kwargs: Any) -> None:
        """Call ``ctx.<entry>`` with the action's inputs (each in a guarded
        buffer of a fresh arena) and ``kwargs``, then check every arena."""
        guarded = self.arena is not None and self.arena.guarded
        for g, rows in enumerate(action.block_table):
            if self.arena is not None:
                self.arena.put(f"block_table.g{g}", rows)
            else:
                self.tables[g].copy_(torch.tensor(rows, dtype=torch.int32))
        values = {k: v for k, v in launch_inputs(action).items() if k != "block_table"}
        inputs, tensors = guarded_inputs(values, self.device, self.setup.num_slots, guarded)
        args = {k: tensors.get(k) for k in kwargs.pop("names")}
        getattr(self.ctx, entry)(**args, **kwargs, num_reqs=action.num_reqs)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        kernel = f"ReplaySSMModelContext.{entry}"
        for arena in (self.arena, inputs, self.own):
            if arena is not None:
                arena.check(kernel)

    def migrate(self, action: Migrate) -> None:
        self._call("reset_new_slots", action, names=("idx_mapping", "src_cols", "dst_cols"))

    def postprocess(self, action: Postprocess) -> None:
        conv = self.setup.conventions
        self._call("postprocess", action, names=("idx_mapping", "query_metadata", "num_computed_tokens",
                                                 "num_accepted_tokens", "is_prefilling", "live_cols"),
                   query_metadata_is_cumulative=conv.cumulative, num_computed_is_post_step=conv.post_step)

    def state(self) -> dict[str, np.ndarray]:
        c = self.ctx
        return {
            "ring_start": torch.stack([p[0] for p in self.trackers]).cpu().numpy(),
            "num_committed": torch.stack([p[1] for p in self.trackers]).cpu().numpy(),
            "plan_ring_start": c.plan_ring_start.cpu().numpy(),
            "plan_flush_count": c.plan_flush_count.cpu().numpy(),
            "src_slots": c.src_slots.reshape(-1).cpu().numpy(),
            "dst_slots": c.dst_slots.reshape(-1).cpu().numpy(),
            "active_request_indices": c.active_request_indices.cpu().numpy(),
        }


LEVELS: dict[str, type[Side]] = {"kernel": KernelSide, "context": ContextSide}
"""How deep the harness drives an implementation."""


@dataclass(frozen=True)
class Discrepancy:
    """One buffer entry where the implementation and the spec disagree."""

    buffer: str
    index: tuple
    spec: int
    impl: int

    def __str__(self) -> str:
        return f"{self.buffer}{list(self.index)}: spec {self.spec}, implementation {self.impl}"


def compare(spec: dict[str, np.ndarray], impl: dict[str, np.ndarray]) -> list[Discrepancy]:
    """Every entry of every state buffer where the two sides differ."""
    out = []
    for b in STATE_BUFFERS:
        s, i = spec[b], impl[b].reshape(spec[b].shape)
        for idx in zip(*np.nonzero(s != i)):
            out.append(Discrepancy(b, tuple(int(x) for x in idx), int(s[idx]), int(i[idx])))
    return out
