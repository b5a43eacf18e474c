"""Running a version's kernels as its caller would, through a generation adapter.

:class:`Harness` owns the buffers a generation's contexts allocate (block
tables, one tracker pair per cache group, plan buffers per group or per model,
pointer tables), binds every kernel parameter by name from the launch
namespace, launches the phase's kernels with the adapter's grids, and hands
the plan FlashInfer would execute to the ghost (:mod:`replayssm.review.ghost`).

Every buffer lives between two guard zones filled with a sentinel
(:class:`GuardedMemory`); a launch that writes outside a buffer changes a
guard, and :meth:`Harness.run_phase` reports it by buffer name.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from replayssm.fuzz.launcher import Setup
from replayssm.spec.launch import next_power_of_2

from .adapters import Api, Launch, kernel_params
from .arguments import CALLER_VECTORS, caller_vectors
from .target import ReviewInputError

GUARD = 64
SENTINEL = 0x5A5A5A5A


class GuardedMemory:
    """Tensors with ``GUARD`` sentinel entries on both sides."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.blocks: list[tuple[str, torch.Tensor, int]] = []

    def tensor(self, name: str, shape: tuple[int, ...], fill: int, dtype: torch.dtype = torch.int32) -> torch.Tensor:
        n = int(np.prod(shape))
        sentinel = True if dtype == torch.bool else SENTINEL
        flat = torch.full((n + 2 * GUARD,), sentinel, dtype=dtype, device=self.device)
        view = flat[GUARD:GUARD + n]
        view.fill_(fill)
        self.blocks.append((name, flat, n))
        return view.view(shape)

    def from_values(self, name: str, values: list, dtype: torch.dtype) -> torch.Tensor:
        t = self.tensor(name, (len(values),), 0, dtype)
        t.copy_(torch.tensor(values, dtype=dtype))
        return t

    def broken(self) -> list[str]:
        """Buffers whose guard zones a launch wrote."""
        out = []
        for name, flat, n in self.blocks:
            sentinel = True if flat.dtype == torch.bool else SENTINEL
            if bool((flat[:GUARD] != sentinel).any()) or bool((flat[GUARD + n:] != sentinel).any()):
                out.append(name)
        return out


@dataclass
class PlanSet:
    """FlashInfer's inputs for one materialize call over ``layers`` (global layer indices)."""

    layers: list[int]
    src_slots: torch.Tensor
    dst_slots: torch.Tensor
    plan_ring_start: torch.Tensor
    plan_flush_count: torch.Tensor
    active_request_indices: torch.Tensor
    num_active: torch.Tensor

    def numpy(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k).cpu().numpy().copy() for k in
                ("src_slots", "dst_slots", "plan_ring_start", "plan_flush_count", "active_request_indices")}


def _ptrs(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=device)


class Harness:
    """One system's buffers for ``api`` and the launches of its phases."""

    def __init__(self, setup: Setup, module: ModuleType, api: Api, device: torch.device) -> None:
        self.setup, self.module, self.api, self.device = setup, module, api, device
        geo, rows = setup.geometry, setup.geometry.max_num_reqs
        self.mem = mem = GuardedMemory(device)
        groups = len(setup.layers_per_group)
        offsets = np.cumsum([0, *setup.layers_per_group]).tolist()
        self.layer_offsets = offsets
        self.tables = [mem.tensor(f"block_table[{g}]", (rows, setup.num_cols), geo.pad_slot) for g in range(groups)]
        self.ring_start = [mem.tensor(f"ring_start[{g}]", (setup.num_slots,), 0) for g in range(groups)]
        self.num_committed = [mem.tensor(f"num_committed[{g}]", (setup.num_slots,), 0) for g in range(groups)]
        self.plans: dict[str, list[PlanSet]] = {}
        for plan in api.plans:
            if api.scope == "group":
                self.plans[plan] = [self._plan_set(f"{plan}[{g}]", list(range(offsets[g], offsets[g + 1])))
                                    for g in range(groups)]
            else:
                self.plans[plan] = [self._plan_set(plan, list(range(offsets[-1])))]
        flat = self.plans["plan"][0]
        self.model_tables = {
            "block_table_ptrs": _ptrs(self.tables, device),
            "tracker_ring_start_ptrs": _ptrs(self.ring_start, device),
            "tracker_num_committed_ptrs": _ptrs(self.num_committed, device),
            "tracker_start_ptrs": _ptrs(self.ring_start, device),
            "tracker_committed_ptrs": _ptrs(self.num_committed, device),
            "tracker_capacities": torch.full((groups,), setup.num_slots, dtype=torch.int32, device=device),
            "group_layer_offsets": torch.tensor(offsets, dtype=torch.int32, device=device),
            "block_table_strides": torch.tensor([t.stride(0) for t in self.tables], dtype=torch.int64, device=device),
            "num_layers": torch.tensor(setup.layers_per_group, dtype=torch.int32, device=device),
        }
        if api.scope != "group":  # per-group pointers into the one packed [layer, batch] table
            self.model_tables["src_slots_ptrs"] = _ptrs([flat.src_slots[offsets[g]] for g in range(groups)], device)
            self.model_tables["dst_slots_ptrs"] = _ptrs([flat.dst_slots[offsets[g]] for g in range(groups)], device)
        self.rand_seeds = mem.tensor("rand_seeds", (1,), 0, torch.int64)

    def _plan_set(self, name: str, layers: list[int]) -> PlanSet:
        geo, rows, mem = self.setup.geometry, self.setup.geometry.max_num_reqs, self.mem
        return PlanSet(layers,
                       mem.tensor(f"{name}.src_slots", (len(layers), rows), geo.pad_slot),
                       mem.tensor(f"{name}.dst_slots", (len(layers), rows), geo.pad_slot),
                       mem.tensor(f"{name}.plan_ring_start", (rows,), 0),
                       mem.tensor(f"{name}.plan_flush_count", (rows,), -1),
                       mem.tensor(f"{name}.active_request_indices", (rows,), -1),
                       mem.tensor(f"{name}.num_active", (1,), 0))

    # -- state the caller and the checks see ---------------------------------------
    def trackers(self, group: int, slot: int) -> tuple[int, int]:
        return int(self.ring_start[group][slot]), int(self.num_committed[group][slot])

    def tracker_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.stack([t.cpu().numpy() for t in self.ring_start]),
                np.stack([t.cpu().numpy() for t in self.num_committed]))

    def copy_trackers(self, copies: list) -> None:
        """The scheduler's block copy of tracker entries ``(group, src, dst)``."""
        for g, src, dst in copies:
            self.ring_start[g][dst] = self.ring_start[g][src]
            self.num_committed[g][dst] = self.num_committed[g][src]

    def set_tables(self, table: list) -> None:
        for g, t in enumerate(self.tables):
            t.copy_(torch.tensor(table[g], dtype=torch.int32))

    # -- launching ---------------------------------------------------------------------
    def inputs(self, vectors: dict[str, Any]) -> dict[str, Any]:
        """The caller's vectors as device tensors (guarded), sizes and flags as they are."""
        out: dict[str, Any] = {}
        for k, v in vectors.items():
            if isinstance(v, list):
                out[k] = self.mem.from_values(k, v, torch.bool if k == "is_prefilling" else torch.int32)
            else:
                out[k] = v
        return out

    def namespace(self, inputs: dict[str, Any], conv: Any, launch: Launch, group: int) -> dict[str, Any]:
        geo, setup = self.setup.geometry, self.setup
        plan = self.plans[launch.plan][group if self.api.scope == "group" else 0]
        ns = dict(inputs)
        ns.update(conv.as_constexprs())
        ns.update(QUERY_IS_CUMULATIVE=conv.cumulative, NUM_COMPUTED_IS_AFTER=conv.post_step,
                  MAMBA_BLOCK_SIZE=geo.block_size, LOGICAL_WINDOW=geo.window, RING_BUFFER_LEN=geo.ring_len,
                  PAD_SLOT_ID=geo.pad_slot, MAX_NUM_REQS=geo.max_num_reqs,
                  BLOCK_SIZE=next_power_of_2(geo.max_num_reqs), EXECUTED_QUERY_WIDTH=0, GDN_STP=False,
                  rand_seeds=self.rand_seeds, NUM_RAND_SEEDS=1,
                  max_num_reqs=geo.max_num_reqs, num_groups=len(setup.layers_per_group),
                  block_table_stride_req=self.tables[0].stride(0), slot_table_stride_layer=plan.src_slots.stride(0),
                  MAX_LAYERS_PER_GROUP=max(setup.layers_per_group),
                  src_slots=plan.src_slots, dst_slots=plan.dst_slots, plan_ring_start=plan.plan_ring_start,
                  plan_flush_count=plan.plan_flush_count, active_request_indices=plan.active_request_indices,
                  num_active_ptr=plan.num_active)
        ns.update(self.model_tables)
        ns.update(block_table=self.tables[group], tracker_start=self.ring_start[group],
                  tracker_committed=self.num_committed[group], tracker_capacity=setup.num_slots,
                  NUM_LAYERS=setup.layers_per_group[group])
        return ns

    def check_bindings(self) -> None:
        """Every parameter of every kernel the API launches has a provider (else a
        :class:`ReviewInputError` naming the kernel and the parameter), before any launch."""
        conv = self.setup.conventions
        for phase in self.api.phases.values():
            for launch in phase.launches:
                if launch.if_defined is not None and kernel_params(self.module, launch.if_defined) is None:
                    continue
                params = kernel_params(self.module, launch.kernel)
                if params is None:
                    raise ReviewInputError(f"missing kernel: the {self.api.name} API launches {launch.kernel}, "
                                           f"which the target does not define")
                ns = self.namespace(dict.fromkeys(CALLER_VECTORS), conv, launch, 0)
                for p in params:
                    if launch.inputs.get(p, p) not in ns:
                        raise ReviewInputError(f"unknown signature: {launch.kernel} takes {p!r}, which no caller "
                                               f"of the {self.api.name} API provides")

    def launch(self, launch: Launch, inputs: dict[str, Any], conv: Any) -> None:
        """Launch ``launch`` (once per group for group scope) with every parameter bound by name."""
        if launch.if_defined is not None and kernel_params(self.module, launch.if_defined) is None:
            return
        params = kernel_params(self.module, launch.kernel)
        if params is None:
            raise ReviewInputError(f"missing kernel: the {self.api.name} API launches {launch.kernel}, "
                                   f"which the target does not define")
        grid = launch.grid
        if launch.grid_if_defined and kernel_params(self.module, launch.grid_if_defined[0]) is not None:
            grid = launch.grid_if_defined[1]
        groups = range(len(self.setup.layers_per_group)) if launch.scope == "group" else [0]
        for g in groups:
            ns = self.namespace(inputs, conv, launch, g)
            if launch.when is not None and not ns[launch.when]:
                return
            kwargs = {}
            for p in params:
                key = launch.inputs.get(p, p)
                if key not in ns:
                    raise ReviewInputError(f"unknown signature: {launch.kernel} takes {p!r}, which no caller of "
                                           f"the {self.api.name} API provides")
                kwargs[p] = ns[key]
            getattr(self.module, launch.kernel)[tuple(ns[x] if isinstance(x, str) else x for x in grid)](**kwargs)

    def run_phase(self, name: str, step: Any, conv: Any) -> tuple[list[PlanSet], list[str]]:
        """Launch phase ``name`` of ``step``; returns the plan sets FlashInfer
        materializes now (none when the phase has no call) and the buffers
        whose guards a launch broke."""
        phase = self.api.phases[name]
        geo = self.setup.geometry
        if not step.rows:
            return [], []
        inputs = self.inputs(caller_vectors(step, geo.max_num_reqs, geo.block_size, conv))
        for launch in phase.launches:
            self.launch(launch, inputs, conv)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        broken = self.mem.broken()
        self.mem.blocks = [b for b in self.mem.blocks if b[0] not in inputs]
        flag = conv.as_constexprs().get(phase.materialize_when, True)
        if phase.materialize is None or not flag:
            return [], broken
        return self.plans[phase.materialize], broken
