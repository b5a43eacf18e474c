"""A review trace replayed on one version, recorded step by step as data (for the HTML report).

:func:`timeline` runs the trace's steps as :func:`.campaign.replay` does and,
after each, records the rows the step scheduled, and for every slot a
scheduled row names: the trackers the version left (``ring_start``,
``num_committed``) and what the slot's bytes stand for on the ghost (per
layer, the checkpoint and each ring row as ``(stream, position)``), then the
finding at the step where a property broke.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from replayssm.fuzz.launcher import Setup

from .arguments import CallerStep
from .campaign import Version, _state_copies, describe_rows
from .ghost import Ghost
from .harness import Harness
from .lifecycle import PropertyBroken, run_step


def _slots(setup: Setup, step: CallerStep) -> list[tuple[int, int]]:
    """The (group, slot) pairs the step's scheduled rows name, the pad slot aside."""
    pad = setup.geometry.pad_slot
    return sorted({(g, slot) for b, row in enumerate(step.rows) if row is not None
                   for g in range(len(setup.layers_per_group)) for slot in step.table[g][b] if slot != pad})


def _slot(h: Harness, ghost: Ghost, g: int, slot: int) -> dict:
    start, committed = h.trackers(g, slot)
    return {"group": g, "slot": slot, "ring_len": ghost.R, "ring_start": start, "committed": committed,
            "layers": [{"layer": layer, "checkpoint": ghost.state.get((layer, slot)),
                        "rows": list(ghost.ring.get((layer, slot), [None] * ghost.R))}
                       for layer in ghost.group_layers[g]]}


def timeline(path: str, version: Version, device: str = "cpu") -> dict:
    """``{"system", "steps": [{"step", "rows", "slots", "finding"}]}``: the
    trace at ``path`` on ``version``, up to and including the step where it
    breaks a property (``finding`` that step's message, None before)."""
    trace = json.loads(Path(path).read_text())
    setup = Setup.from_json(trace["params"])
    dropped = frozenset(trace["#meta"].get("dropped", []))
    harness = Harness(setup, version.module, version.api, torch.device(device))
    geo = setup.geometry
    ghost = Ghost(setup.layers_per_group, geo.ring_len, geo.window, geo.pad_slot)
    steps = []
    for n, s in enumerate(trace["steps"]):
        step = CallerStep.from_json(s)
        finding = None
        try:
            run_step(harness, ghost, step, s["expect"], state_copies=_state_copies(dropped))
        except PropertyBroken as f:
            finding = str(f)
        steps.append({"step": n, "rows": describe_rows(step) or "no request",
                      "slots": [_slot(harness, ghost, g, slot) for g, slot in _slots(setup, step)],
                      "finding": finding})
        if finding is not None:
            break
    system = {"geometry": trace["params"]["geometry"],
              "layers_per_group": list(setup.layers_per_group), "conventions": trace["params"]["conventions"],
              "dropped": sorted(dropped), "version": version.label}
    return {"system": system, "steps": steps}


def timelines(document: dict, heads: dict[str, Version], base: Version | None, device: str = "cpu") -> dict[str, dict]:
    """A timeline per trace of a review document's findings, latent
    reliances and sampled regressions or fixes, keyed by the trace's path, each replayed on the
    version that broke (the verdict's head, by label in ``heads``; ``base``
    for a fix)."""
    out = {}
    for v in document.get("verdicts", []):
        head = heads.get(v["version"])
        entries = [(head, f) for f in [*v.get("findings", []), *v.get("latent", [])]]
        entries += [(base if d["kind"] == "fix" else head, d) for d in v.get("differences", [])
                    if d["kind"] in ("fix", "regression") and d.get("evidence", "sampled") == "sampled"]
        for version, e in entries:
            if version is not None and e.get("trace") and e["trace"] not in out and Path(e["trace"]).is_file():
                out[e["trace"]] = timeline(e["trace"], version, device)
    return out
