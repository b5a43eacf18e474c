"""A review trace replayed on one version, recorded step by step as data (for the HTML report).

:func:`timeline` runs the trace's steps as :func:`.campaign.replay` does and,
after each, records the rows the step scheduled, and for every slot a
scheduled row names: the trackers the version left (``ring_start``,
``num_committed``) and what the slot's bytes stand for on the ghost (per
layer, the checkpoint and each ring row as ``(stream, position)``), then the
finding at the step where a property broke, with the slots its message names
marked ``broke`` and drawn as they are after that step (the guards' poison
slot too: the trackers past the array, where a store through a slot id read
past a block-table row lands, :func:`broken_slots`). Each cell the step
wrote carries its writer (``written_by``): a tracker cell the kernel's store
line, read from the version's source (:mod:`.store_lines`: recorded where the
kernels run, on the CPU host); a checkpoint or ring row FlashInfer's decode,
prefill or materialize as the ghost models it, a materialize with the store
lines that wrote its plan row; ``host`` for the scheduler's block copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from replayssm.fuzz.launcher import Setup

from .arguments import CallerStep
from .campaign import Version, _state_copies, describe_rows
from .ghost import Ghost
from .harness import Harness, PlanSet
from .lifecycle import PropertyBroken, run_step
from .store_lines import StoreLog


def _source_file(source: str) -> str:
    """The version's source file: a ``.py`` path as given, a module's by its spec ('' when none)."""
    if source.endswith(".py"):
        return source
    from replayssm.base.module_files import module_source

    path = module_source(source)
    return str(path) if path is not None else ""


def _slots(setup: Setup, step: CallerStep) -> list[tuple[int, int]]:
    """The (group, slot) pairs the step's scheduled rows name, the pad slot aside."""
    pad = setup.geometry.pad_slot
    return sorted({(g, slot) for b, row in enumerate(step.rows) if row is not None
                   for g in range(len(setup.layers_per_group)) for slot in step.table[g][b] if slot != pad})


_NAMED = (re.compile(r"\b(?:ring_start|num_committed)\.g(?P<g>\d+)\[(?P<s>\d+)\]"),
          re.compile(r"\bgroup (?P<g>\d+) (?:live )?slot (?P<s>\d+)"),
          re.compile(r"\bslot (?P<s>\d+) of group (?P<g>\d+)"))
"""How a finding's message names a slot: a tracker entry (``ring_start.g0[48]``), ``group G [live] slot S``,
``slot S of group G`` (``review/lifecycle.py``, ``fuzz/guards.py``)."""


def broken_slots(message: str) -> list[tuple[int, int]]:
    """The (group, slot) pairs a finding's message names, in order, each once."""
    found = [(int(m["g"]), int(m["s"])) for pattern in _NAMED for m in pattern.finditer(message)]
    return list(dict.fromkeys(found))


def _poison_trackers(h: Harness, g: int) -> tuple[int, int] | None:
    """The guards' poison slot's trackers of group ``g`` (the words right after each tracker array; None unguarded)."""
    arena = h.arena
    if not arena.guarded or arena.flat is None:
        return None
    words = [arena.regions[f"{t}.g{g}"] for t in ("ring_start", "num_committed")]
    return int(arena.flat[words[0].start + words[0].shape[0]]), int(arena.flat[words[1].start + words[1].shape[0]])


class _Recorded(Harness):
    """The harness, keeping the plan sets its last phase handed to FlashInfer (in the order they are materialized)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.materializing: list[PlanSet] = []

    def run_phase(self, name: str, step: Any, conv: Any) -> tuple[list[PlanSet], list[str]]:
        plans, broken = super().run_phase(name, step, conv)
        self.materializing = list(plans)
        return plans, broken


class _Watched(Ghost):
    """The ghost, noting who wrote each checkpoint and ring row since :meth:`clear`
    (``by``, keyed ``(layer, slot)`` for a checkpoint, ``(layer, slot, row)`` for a
    ring row): FlashInfer's prefill, decode or materialize as modelled here (a
    materialize with the kernel lines that wrote its plan row), or the host's block copy."""

    def __init__(self, h: _Recorded, *args: Any) -> None:
        super().__init__(*args)
        self.h = h
        self.by: dict[tuple[int, ...], dict[str, Any]] = {}

    def clear(self) -> None:
        self.by = {}

    def _noted(self, writer: Callable[[int, int], dict[str, Any]], run: Callable[[], Any]) -> Any:
        state, ring = dict(self.state), {k: list(v) for k, v in self.ring.items()}
        out = run()
        for (layer, slot), token in self.state.items():
            if state.get((layer, slot), 0) != token:  # 0: no checkpoint at all before
                self.by[(layer, slot)] = writer(layer, slot)
        for (layer, slot), rows in self.ring.items():
            was = ring.get((layer, slot), [None] * self.R)
            for i, token in enumerate(rows):
                if was[i] != token:
                    self.by[(layer, slot, i)] = writer(layer, slot)
        return out

    def copy_block(self, group: int, src: int, dst: int) -> None:
        copy = {"host": f"the scheduler's block copy from slot {src}"}
        self._noted(lambda layer, slot: copy, lambda: super(_Watched, self).copy_block(group, src, dst))

    def decode(self, group: int, slot: int, *args: Any) -> str | None:
        return self._noted(lambda layer, s: {"flashinfer": "decode"},
                           lambda: super(_Watched, self).decode(group, slot, *args))

    def prefill(self, group: int, *args: Any) -> str | None:
        return self._noted(lambda layer, s: {"flashinfer": "prefill (the chunked scan)"},
                           lambda: super(_Watched, self).prefill(group, *args))

    def materialize(self, plan: dict[str, Any], layers: list[int], work_list: bool, real_rows: set[int]) -> list[str]:
        plan_set = self.h.materializing.pop(0) if self.h.materializing else None
        n = len(plan["plan_flush_count"])
        order = list(range(n))
        if work_list:  # the rows it works on, in the work list's order, up to its first -1
            active = [int(x) for x in plan["active_request_indices"]]
            order = [v for v in active[:active.index(-1) if -1 in active else n] if 0 <= v < n]
        return self._noted(lambda layer, slot: self._materialized(plan, plan_set, order, layers.index(layer), slot),
                           lambda: super(_Watched, self).materialize(plan, layers, work_list, real_rows))

    def _materialized(self, plan: dict[str, Any], plan_set: PlanSet | None, order: list[int], i: int,
                      dst: int) -> dict[str, Any]:
        """A checkpoint materialize wrote into ``dst`` (layer ``i`` of the plan, batch rows worked on in ``order``):
        the plan row that wrote it last, and who wrote that row."""
        rows = [b for b in order if int(plan["dst_slots"][i][b]) == dst and int(plan["plan_flush_count"][b]) >= 0]
        if not rows:
            return {"flashinfer": "materialize"}
        b = rows[-1]
        plan_by = []
        stores = self.h.stores
        if plan_set is not None and stores is not None:
            for buf, index in (("dst_slots", i * len(plan["plan_flush_count"]) + b), ("plan_ring_start", b),
                               ("plan_flush_count", b)):
                name = self.h.region_of(getattr(plan_set, buf))
                w = stores.writer(f"{name}[{index}]") if name else None
                if w is not None and "line" in w:
                    plan_by.append({"buffer": buf, **w})
        return {"flashinfer": f"materialize of batch row {b}'s plan", "plan": plan_by}


def _slot(h: Harness, ghost: Ghost, g: int, slot: int) -> dict:
    if slot == h.setup.num_slots:  # the poison slot: past the tracker arrays
        start, committed = _poison_trackers(h, g) or (0, 0)
    else:
        start, committed = h.trackers(g, slot)
    layers: list[dict[str, Any]] = [{"layer": layer, "checkpoint": ghost.state.get((layer, slot)),
                                     "rows": list(ghost.ring.get((layer, slot), [None] * ghost.R))}
                                    for layer in ghost.group_layers[g]]
    out = {"group": g, "slot": slot, "ring_len": ghost.R, "ring_start": start, "committed": committed,
           "layers": layers}
    if h.stores is not None:
        written = {key: h.stores.writer(f"{tracker}.g{g}[{slot}]")
                   for key, tracker in (("ring_start", "ring_start"), ("committed", "num_committed"))}
        if any(written.values()):
            out["written_by"] = {k: w for k, w in written.items() if w is not None}
    if isinstance(ghost, _Watched):
        for layer in layers:
            rows = {i: ghost.by[(layer["layer"], slot, i)] for i in range(ghost.R)
                    if (layer["layer"], slot, i) in ghost.by}
            by = {"checkpoint": ghost.by.get((layer["layer"], slot)), "rows": rows}
            if by["checkpoint"] is not None or rows:
                layer["written_by"] = by
    return out


def timeline(path: str, version: Version, device: str = "cpu", writers: bool = True) -> dict:
    """``{"system", "steps": [{"step", "rows", "slots", "finding"}]}``: the
    trace at ``path`` on ``version``, up to and including the step where it
    breaks a property (``finding`` that step's message, None before);
    ``writers``: each written cell's writer recorded (False: the cells only,
    what ``benchmarks/report_lines_cost.py`` compares against)."""
    trace = json.loads(Path(path).read_text())
    setup = Setup.from_json(trace["params"])
    dropped = frozenset(trace["#meta"].get("dropped", []))
    harness = (_Recorded if writers else Harness)(setup, version.module, version.api, torch.device(device))
    if writers:
        harness.stores = StoreLog(harness.arena, _source_file(version.source))
    geo = setup.geometry
    shape = (setup.layers_per_group, geo.ring_len, geo.window, geo.pad_slot)
    ghost = _Watched(harness, *shape) if isinstance(harness, _Recorded) else Ghost(*shape)
    steps = []
    for n, s in enumerate(trace["steps"]):
        step = CallerStep.from_json(s)
        finding = None
        if isinstance(ghost, _Watched) and harness.stores is not None:
            harness.stores.clear()
            ghost.clear()
        try:
            run_step(harness, ghost, step, s["expect"], state_copies=_state_copies(dropped))
        except PropertyBroken as f:
            finding = str(f)
        slots = [_slot(harness, ghost, g, slot) for g, slot in _slots(setup, step)]
        if finding is not None:
            groups = len(setup.layers_per_group)
            for g, slot in broken_slots(finding):
                if g >= groups or not 0 <= slot <= setup.num_slots:
                    continue
                drawn = next((x for x in slots if (x["group"], x["slot"]) == (g, slot)), None)
                if drawn is None:
                    drawn = _slot(harness, ghost, g, slot)
                    slots.append(drawn)
                drawn["broke"] = True
                if slot == setup.num_slots:
                    drawn["note"] = "the guards' poison slot, past the tracker array: no request holds it"
        steps.append({"step": n, "rows": describe_rows(step) or "no request", "slots": slots, "finding": finding})
        if finding is not None:
            break
    system = {"geometry": trace["params"]["geometry"],
              "layers_per_group": list(setup.layers_per_group), "conventions": trace["params"]["conventions"],
              "dropped": sorted(dropped), "version": version.label}
    return {"system": system, "steps": steps}


def timelines(document: dict, heads: dict[str, Version], base: Version | None, device: str = "cpu",
              writers: bool = True) -> dict[str, dict]:
    """A timeline per trace of a review document's findings, latent
    reliances and sampled regressions or fixes, keyed by the trace's path, each replayed on the
    version that broke (the verdict's head, by label in ``heads``; ``base``
    for a fix); ``writers`` as :func:`timeline`."""
    out = {}
    for v in document.get("verdicts", []):
        head = heads.get(v["version"])
        entries = [(head, f) for f in [*v.get("findings", []), *v.get("latent", [])]]
        entries += [(base if d["kind"] == "fix" else head, d) for d in v.get("differences", [])
                    if d["kind"] in ("fix", "regression") and d.get("evidence", "sampled") == "sampled"]
        for version, e in entries:
            if version is not None and e.get("trace") and e["trace"] not in out and Path(e["trace"]).is_file():
                out[e["trace"]] = timeline(e["trace"], version, device, writers)
    return out
