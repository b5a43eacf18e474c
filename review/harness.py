"""Running a version's kernels as its caller would, through a generation adapter.

:class:`Harness` owns the buffers a generation's contexts allocate (block
tables, one tracker pair per cache group, plan buffers per group or per model,
pointer tables), binds every kernel parameter by name from the launch
namespace, launches the phase's kernels with the adapter's grids, and hands
the plan FlashInfer would execute to the ghost (:mod:`replayssm.review.ghost`).

Every buffer lives in the fuzzer's guarded arena (:mod:`replayssm.fuzz.guards`):
red zones around each buffer, poison columns after each block-table row, the
poison slot's trackers right after each tracker array, and inputs that must
stay bit-identical. After every launch the arenas are checked; a violation is
reported by :meth:`Harness.run_phase` (the lifecycle's ``memory`` property).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from replayssm.fuzz.guards import Arena, GuardViolation, guarded_inputs, guards_enabled
from replayssm.base.isolation import TargetFault, TargetGone
from replayssm.fuzz.launcher import Setup
from replayssm.spec.launch import next_power_of_2

from replayssm.spec.generations import Api, Launch, kernel_params
from .arguments import CALLER_VECTORS, caller_vectors
from .store_lines import StoreLog
from .target import ReviewInputError

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
        groups = len(setup.layers_per_group)
        offsets = np.cumsum([0, *setup.layers_per_group]).tolist()
        self.layer_offsets = offsets
        self.arena = arena = Arena(device, poison_slot=setup.num_slots, guarded=guards_enabled())
        for g in range(groups):
            arena.reserve_table(f"block_table.g{g}", rows, setup.num_cols)
            for t in ("ring_start", "num_committed"):
                arena.reserve(f"{t}.g{g}", (setup.num_slots,), state=True)
        plan_layers: dict[str, list[int]] = {}
        for plan in api.plans:
            parts = ([(f"{plan}.g{g}", list(range(offsets[g], offsets[g + 1]))) for g in range(groups)]
                     if api.scope == "group" else [(plan, list(range(offsets[-1])))])
            for name, layers in parts:
                plan_layers[name] = layers
                for buf, shape in (("src_slots", (len(layers), rows)), ("dst_slots", (len(layers), rows)),
                                   ("plan_ring_start", (rows,)), ("plan_flush_count", (rows,)),
                                   ("active_request_indices", (rows,)), ("num_active", (1,))):
                    arena.reserve(f"{buf}.{name}", shape, state=True)
        arena.reserve("rand_seeds", (1,), torch.int64, state=True)
        tables = ("block_table_ptrs", "tracker_ring_start_ptrs", "tracker_num_committed_ptrs", "tracker_start_ptrs",
                  "tracker_committed_ptrs", "block_table_strides", "src_slots_ptrs", "dst_slots_ptrs")
        for name in tables:
            arena.reserve(name, (groups,), torch.int64)
        for name in ("tracker_capacities", "group_layer_offsets", "num_layers"):
            arena.reserve(name, (groups + (name == "group_layer_offsets"),))
        arena.allocate()
        self.tables = [arena.view(f"block_table.g{g}") for g in range(groups)]
        self.set_tables([[[geo.pad_slot] * setup.num_cols] * rows] * groups)
        self.ring_start = [arena.view(f"ring_start.g{g}") for g in range(groups)]
        self.num_committed = [arena.view(f"num_committed.g{g}") for g in range(groups)]
        self.plans: dict[str, list[PlanSet]] = {}
        for plan in api.plans:
            names = [n for n in plan_layers if n == plan or n.startswith(f"{plan}.g")]
            self.plans[plan] = [self._plan_set(n, plan_layers[n]) for n in names]
        flat = self.plans["plan"][0]
        ptr = lambda ts: [t.data_ptr() for t in ts]  # noqa: E731
        values = {
            "block_table_ptrs": ptr(self.tables), "tracker_ring_start_ptrs": ptr(self.ring_start),
            "tracker_num_committed_ptrs": ptr(self.num_committed), "tracker_start_ptrs": ptr(self.ring_start),
            "tracker_committed_ptrs": ptr(self.num_committed),
            "block_table_strides": [t.stride(0) for t in self.tables],
            "src_slots_ptrs": ptr([flat.src_slots[offsets[g] if api.scope != "group" else 0] for g in range(groups)]),
            "dst_slots_ptrs": ptr([flat.dst_slots[offsets[g] if api.scope != "group" else 0] for g in range(groups)]),
            "tracker_capacities": [setup.num_slots] * groups, "group_layer_offsets": offsets,
            "num_layers": list(setup.layers_per_group),
        }
        self.model_tables = {name: arena.put(name, v) for name, v in values.items()}
        self.rand_seeds = arena.view("rand_seeds")
        self.stores: StoreLog | None = None
        """Set (by the HTML report's timeline, and for a finding's failing step by
        ``campaign.broken_store``): each launch records which source line wrote each state cell."""

    def _plan_set(self, name: str, layers: list[int]) -> PlanSet:
        geo, arena = self.setup.geometry, self.arena
        fills = {"src_slots": geo.pad_slot, "dst_slots": geo.pad_slot, "plan_ring_start": 0, "plan_flush_count": -1,
                 "active_request_indices": -1, "num_active": 0}
        views = {}
        for buf, fill in fills.items():
            view = arena.view(f"{buf}.{name}")
            view.fill_(fill)
            views[buf] = view
        return PlanSet(layers, **views)

    def region_of(self, view: torch.Tensor) -> str | None:
        """The name of the state arena's buffer that ``view`` is (None: no buffer of it)."""
        return next((n for n in self.arena.regions if self.arena.view(n).data_ptr() == view.data_ptr()), None)

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
            if self.stores is not None:
                for t in ("ring_start", "num_committed"):
                    self.stores.host(f"{t}.g{g}[{dst}]", f"the scheduler's block copy from slot {src}")

    def set_tables(self, table: list) -> None:
        for g in range(len(self.tables)):
            self.arena.put(f"block_table.g{g}", table[g])

    # -- launching ---------------------------------------------------------------------
    def inputs(self, vectors: dict[str, Any]) -> tuple[Arena, dict[str, Any]]:
        """The caller's vectors as device tensors in a guarded arena of their own; sizes and flags as they are."""
        lists = {k: v for k, v in vectors.items() if isinstance(v, list)}
        arena, tensors = guarded_inputs(lists, self.device, self.setup.num_slots, guards_enabled())
        return arena, {**{k: v for k, v in vectors.items() if k not in lists}, **tensors}

    def namespace(self, inputs: dict[str, Any], conv: Any, launch: Launch, group: int) -> dict[str, Any]:
        geo, setup = self.setup.geometry, self.setup
        plan = self.plans[launch.plan][group if self.api.scope == "group" else 0]
        ns = dict(inputs)
        ns.update(conv.as_constexprs())
        ns.update(QUERY_IS_CUMULATIVE=conv.cumulative, NUM_COMPUTED_IS_AFTER=conv.post_step,
                  MAMBA_BLOCK_SIZE=geo.block_size, LOGICAL_WINDOW=geo.window, RING_BUFFER_LEN=geo.ring_len,
                  PAD_SLOT_ID=geo.pad_slot, MAX_NUM_REQS=geo.max_num_reqs,
                  BLOCK_SIZE=next_power_of_2(geo.max_num_reqs), EXECUTED_QUERY_WIDTH=setup.executed_width, GDN_STP=False,
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

    def launched_params(self, launch: Launch) -> list[str] | None:
        """The parameters of the kernel ``launch`` runs; None when the launch is skipped (its
        ``if_defined`` kernel is absent); a :class:`ReviewInputError` when the target lacks the kernel."""
        if launch.if_defined is not None and kernel_params(self.module, launch.if_defined) is None:
            return None
        params = kernel_params(self.module, launch.kernel)
        if params is None:
            raise ReviewInputError(f"missing kernel: the {self.api.name} API launches {launch.kernel}, "
                                   f"which the target does not define")
        return params

    def check_bindings(self) -> None:
        """Every parameter of every kernel the API launches has a provider (else a
        :class:`ReviewInputError` naming the kernel and the parameter), before any launch."""
        conv = self.setup.conventions
        for phase in self.api.phases.values():
            for launch in phase.launches:
                params = self.launched_params(launch)
                if params is None:
                    continue
                ns = self.namespace(dict.fromkeys(CALLER_VECTORS), conv, launch, 0)
                for p in params:
                    if launch.inputs.get(p, p) not in ns:
                        raise ReviewInputError(f"unknown signature: {launch.kernel} takes {p!r}, which no caller "
                                               f"of the {self.api.name} API provides")

    def launch(self, launch: Launch, inputs: dict[str, Any], conv: Any, arenas: tuple[Arena, ...] = ()) -> None:
        """Launch ``launch`` (once per group for group scope) with every parameter bound by name;
        after each kernel, ``arenas`` are checked (:class:`GuardViolation` on a violation)."""
        params = self.launched_params(launch)
        if params is None:
            return
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
            shape = tuple(ns[x] if isinstance(x, str) else x for x in grid)
            try:
                if self.stores is not None and hasattr(self.module, "launch"):  # the target's process records
                    self.stores.record(launch.kernel, self.module.launch(launch.kernel, shape, (), kwargs,
                                                                         watch=self.stores.watch()))
                else:
                    getattr(self.module, launch.kernel)[shape](**kwargs)
            except (TargetFault, TargetGone) as e:  # it raised, hung, ended or changed its process
                from .lifecycle import PropertyBroken

                raise PropertyBroken("process", (e.fault if isinstance(e, TargetGone) else e).reason) from None
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            for arena in (self.arena, *arenas):
                arena.check(launch.kernel)

    def run_phase(self, name: str, step: Any, conv: Any) -> tuple[list[PlanSet], list[str]]:
        """Launch phase ``name`` of ``step``; returns the plan sets FlashInfer
        materializes now (none when the phase has no call) and the buffers
        guard violations of its launches (the first stops the phase)."""
        phase = self.api.phases[name]
        geo = self.setup.geometry
        if not step.rows:
            return [], []
        input_arena, inputs = self.inputs(caller_vectors(step, geo.max_num_reqs, geo.block_size, conv))
        broken = []
        try:
            for launch in phase.launches:
                self.launch(launch, inputs, conv, (input_arena,))
        except GuardViolation as e:
            broken.append(str(e))
            if self.arena.guarded:
                self.arena.expected.copy_(self.arena.flat)  # judged once; later phases are judged afresh
        flag = conv.as_constexprs().get(phase.materialize_when, True)
        if phase.materialize is None or not flag:
            return [], broken
        return self.plans[phase.materialize], broken
