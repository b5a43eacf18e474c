"""What a trace file must satisfy before anything is allocated or run for it.

A trace names its format in ``#meta.format`` (``replayssm-trace/<major>``,
optionally ``.<minor>``); a reader accepts the major versions whose layout it
knows for the trace's kind (:data:`READABLE_MAJORS`), since a new major
version changes what fields mean. Its sizes are bounded
(:data:`SIZE_LIMITS`) so that a mistyped or hostile trace is an error naming
the field, not an allocation that exhausts the machine or a failure blamed on
the implementation.
"""

from __future__ import annotations

import math
from typing import Any

TRACE_FORMAT = "replayssm-trace"
TRACE_MAJOR = 2
"""The trace format this version writes: ``replayssm-trace/2``."""

READABLE_MAJORS = {"launch": (1, 2), "system": (2,)}
"""The major versions read, per kind of trace (:func:`trace_kind`). Major 2
changed the picks of a system trace's actions from flat names (``"sched_0"``,
``"slot_0_1"``) to the nested records of ``spec.system.picks`` (``{"rows":
[{"sched": 1, "slot": [5, 5], ...}]}``); launch traces kept their layout, so
a ``/1`` one still reads."""

SIZE_LIMITS = {
    "num_slots": 1 << 20,
    "num_cols": 1 << 16,
    "max_model_len": 1 << 30,
    "geometry.max_num_reqs": 1 << 16,
    "geometry.block_size": 1 << 20,
    "geometry.window": 1 << 20,
    "geometry.ring_len": 1 << 20,
    "layer groups": 64,
    "layers per group": 1024,
}
"""The largest value each size of a trace's params may take."""

MAX_TABLE_ENTRIES = 1 << 24
"""The most block-table entries (groups x rows x columns) a trace may ask for."""


def trace_kind(trace: Any) -> str:
    """``launch`` for a trace of kernel launches (the fuzzer's: its params
    name ``layers_per_group``), ``system`` for a run of the system model
    (``verify.traces``)."""
    params = trace.get("params") if isinstance(trace, dict) else None
    return "launch" if isinstance(params, dict) and "layers_per_group" in params else "system"


def check_format(meta: Any, kind: str) -> None:
    """A ``ValueError`` unless ``meta["format"]`` is ``replayssm-trace/<major>``
    or ``/<major>.<minor>`` with a major this version reads for a ``kind``
    trace (:data:`READABLE_MAJORS`); a system trace of major 1 is told why."""
    fmt = meta.get("format") if isinstance(meta, dict) else None
    if not isinstance(fmt, str) or not fmt.startswith(f"{TRACE_FORMAT}/"):
        raise ValueError(f"trace #meta.format must be {TRACE_FORMAT}/{TRACE_MAJOR}, got {fmt!r}")
    major = fmt.split("/", 1)[1].split(".", 1)[0]
    majors = READABLE_MAJORS[kind]
    if major not in [str(m) for m in majors]:
        why = (" (its picks are flat names such as sched_0 and slot_0_1; since /2 they are nested records: "
               "save the trace again with this version)" if kind == "system" and major == "1" else "")
        raise ValueError(f"trace format {fmt} is not supported for a {kind} trace{why}: this version reads "
                         f"{' and '.join(f'{TRACE_FORMAT}/{m}' for m in majors)} (any minor version) only")


def _bounded(value: Any, field: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ValueError(f"trace params.{field} must be an int in [1, {limit}], got {value!r}")
    return value


def check_sizes(params: Any) -> None:
    """A ``ValueError`` naming the field when a size of ``params`` (fuzz or
    system trace) is not a positive int within :data:`SIZE_LIMITS`, or the
    block tables would exceed :data:`MAX_TABLE_ENTRIES`."""
    if not isinstance(params, dict):
        raise ValueError(f"trace params must be an object, got {params!r}")
    sizes = {}
    for field in ("num_slots", "num_cols", "max_model_len"):
        if field in params:
            sizes[field] = _bounded(params[field], field, SIZE_LIMITS[field])
    geometry = params.get("geometry", {})
    if not isinstance(geometry, dict):
        raise ValueError(f"trace params.geometry must be an object, got {geometry!r}")
    for key in ("max_num_reqs", "block_size", "window", "ring_len"):
        if key in geometry:
            sizes[key] = _bounded(geometry[key], f"geometry.{key}", SIZE_LIMITS[f"geometry.{key}"])
    layers_key = "layers_per_group" if "layers_per_group" in params else "layers"
    layers = params.get(layers_key, [])
    if not isinstance(layers, list) or len(layers) > SIZE_LIMITS["layer groups"]:
        raise ValueError(f"trace params.{layers_key} must be a list of at most {SIZE_LIMITS['layer groups']} "
                         f"layer counts, got {layers!r}"[:300])
    for n, count in enumerate(layers):
        _bounded(count, f"{layers_key}[{n}]", SIZE_LIMITS["layers per group"])
    entries = math.prod((len(layers) or 1, sizes.get("max_num_reqs", 1), sizes.get("num_cols", 1)))
    if entries > MAX_TABLE_ENTRIES:
        raise ValueError(f"trace params ask for {entries} block-table entries (groups x max_num_reqs x num_cols), "
                         f"at most {MAX_TABLE_ENTRIES}")
