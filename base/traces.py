"""Every trace file this kit writes or reads: its kind, format version, sizes, JSON.

A trace is a JSON object. Its kind (:data:`KINDS`) says who wrote it and who
reads it: a ``launch`` trace (the fuzzer's kernel launches), a ``system``
trace (a run of the system model, :mod:`.system_traces`), a ``review`` trace
(a caller schedule ``review`` found), a ``kernel`` trace (a kernel proof's
counterexample as one launch), a ``counterexample`` (a failed ``prove``
obligation's scenario). :func:`load_trace` reads a file once, says which
kind it is and checks its format version and its sizes, so every command
that takes a trace file answers a bad one with a message naming the field.

A format is ``<name>/<major>`` or ``<name>/<major>.<minor>``; a reader
accepts the major versions whose layout it knows for the kind
(:data:`READABLE_MAJORS`), since a new major version changes what fields
mean. Sizes are bounded (:data:`SIZE_LIMITS`) so that a mistyped or hostile
trace is an error naming the field, not an allocation that exhausts the
machine or a failure blamed on the implementation.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

TRACE_FORMAT = "replayssm-trace"
TRACE_MAJOR = 2
TRACE_ID = f"{TRACE_FORMAT}/{TRACE_MAJOR}"
"""``#meta.format`` of the launch and system traces this version writes: ``replayssm-trace/2``."""

REVIEW_FORMAT = "replayssm-review-trace"
REVIEW_MAJOR = 1
REVIEW_ID = f"{REVIEW_FORMAT}/{REVIEW_MAJOR}"
"""``#meta.format`` of the review traces this version writes."""

RELEASE_FORMAT = "replayssm-release-trace"
RELEASE_MAJOR = 1
RELEASE_ID = f"{RELEASE_FORMAT}/{RELEASE_MAJOR}"
"""``#meta.format`` of the released-lifecycle traces ``review --vllm`` writes (vLLM 0.33.0's ring trackers)."""

COUNTEREXAMPLE_FORMAT = "replayssm-counterexample"
COUNTEREXAMPLE_MAJOR = 1
COUNTEREXAMPLE_ID = f"{COUNTEREXAMPLE_FORMAT}/{COUNTEREXAMPLE_MAJOR}"
"""``schema`` of the counterexample files ``prove`` writes."""



@dataclass(frozen=True)
class Kind:
    """One kind of trace file: how it is told apart, and the format versions read."""

    name: str
    written_by: str
    field: str
    """Where its format is named: ``#meta.format``, or ``schema`` for a counterexample."""
    format: str
    majors: tuple[int, ...]
    """The major versions of ``format`` this version reads."""
    optional: bool = False
    """Files written before the kind named its format are read as the newest major."""


KINDS = {k.name: k for k in (
    Kind("launch", "fuzz (a finding), or a system trace's launches", "#meta.format", TRACE_FORMAT, (1, 2)),
    Kind("system", "prove (a system counterexample's run), or record_run", "#meta.format", TRACE_FORMAT, (2,)),
    Kind("review", "review (a caller schedule that breaks a property)", "#meta.format", REVIEW_FORMAT, (1,)),
    Kind("release", "review --vllm (a run of a released vLLM's ring-tracker kernels that breaks the lifecycle)",
         "#meta.format", RELEASE_FORMAT, (1,)),
    Kind("kernel", "prove --kernels (a kernel counterexample as one launch)", "#meta.format", TRACE_FORMAT, (2,),
         optional=True),
    Kind("counterexample", "prove (a failed obligation's scenario)", "schema", COUNTEREXAMPLE_FORMAT, (1,),
         optional=True),
)}
"""Every kind of trace file, by name (:func:`trace_kind` tells them apart)."""

READABLE_MAJORS = {name: k.majors for name, k in KINDS.items()}
"""The major versions read, per kind of trace. Major 2 of ``replayssm-trace``
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
    """Which of :data:`KINDS` a trace document is: a ``counterexample`` names
    its ``obligation``; a ``review`` trace's format is :data:`REVIEW_FORMAT`; a
    ``release`` trace's format is :data:`RELEASE_FORMAT`; a
    ``kernel`` trace's ``#meta.source`` is ``kernel-proof``; a ``launch``
    trace's params name ``layers_per_group``; anything else is read as a
    ``system`` trace (whose reader names what is missing)."""
    if not isinstance(trace, dict):
        return "system"
    meta = trace.get("#meta")
    meta = meta if isinstance(meta, dict) else {}
    fmt = meta.get("format")
    if "obligation" in trace:
        return "counterexample"
    if isinstance(fmt, str) and fmt.startswith(f"{REVIEW_FORMAT}/"):
        return "review"
    if isinstance(fmt, str) and fmt.startswith(f"{RELEASE_FORMAT}/"):
        return "release"
    if meta.get("source") == "kernel-proof":
        return "kernel"
    params = trace.get("params")
    return "launch" if isinstance(params, dict) and "layers_per_group" in params else "system"


def check_format(meta: Any, kind: str) -> None:
    """A ``ValueError`` unless ``meta["format"]`` is ``replayssm-trace/<major>``
    or ``/<major>.<minor>`` with a major this version reads for a ``kind``
    trace (:data:`READABLE_MAJORS`); a system trace of major 1 is told why.
    For a counterexample, ``meta`` is the document and its ``schema`` is read."""
    k = KINDS[kind]
    key = k.field.rsplit(".", 1)[-1]
    fmt = meta.get(key) if isinstance(meta, dict) else None
    if fmt is None and k.optional:
        return
    newest = f"{k.format}/{k.majors[-1]}"
    if not isinstance(fmt, str) or not fmt.startswith(f"{k.format}/"):
        where = "trace #meta.format" if k.field == "#meta.format" else f"a {kind} file's {k.field}"
        raise ValueError(f"{where} must be {newest}, got {fmt!r}")
    major = fmt.split("/", 1)[1].split(".", 1)[0]
    if major not in [str(m) for m in k.majors]:
        why = (" (its picks are flat names such as sched_0 and slot_0_1; since /2 they are nested records: "
               "save the trace again with this version)" if kind == "system" and major == "1" else "")
        raise ValueError(f"trace format {fmt} is not supported for a {kind} trace{why}: this version reads "
                         f"{' and '.join(f'{k.format}/{m}' for m in k.majors)} (any minor version) only")


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


class Loaded(NamedTuple):
    """A trace file as :func:`load_trace` read it."""

    kind: str
    """One of :data:`KINDS`."""
    trace: dict


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path``; not JSON is a ``ValueError`` saying so
    (``OSError`` when unreadable). Only a regular file is read: a FIFO, a
    device or a socket is a ``ValueError`` naming what it is, found without
    waiting on it (opened non-blocking, a FIFO with no writer included)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
            raise ValueError(f"{what}, not a trace file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    try:
        return json.loads(data.decode())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"not a JSON trace: {e}") from e


_SPECIAL = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
"""What a path that is no regular file is, as :func:`read_json` names it."""


def write_json(trace: dict, path: str | Path) -> Path:
    """Write ``trace`` to ``path`` (its folder made if needed); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace, indent=1))
    return path


def check_trace(trace: Any) -> Loaded:
    """A trace document's kind, once its format version and sizes are checked
    (a ``ValueError`` naming the field); what each kind's fields hold is
    checked by its reader (a system trace's sizes too, after its params:
    :func:`.system_traces.params_from_json`)."""
    if not isinstance(trace, dict):
        raise ValueError(f"a trace is a JSON object, got {type(trace).__name__}")
    kind = trace_kind(trace)
    meta = trace.get("#meta", {})
    if not isinstance(meta, dict):
        raise ValueError(f"trace.#meta must be an object, got {meta!r}")
    check_format(trace if kind == "counterexample" else meta, kind)
    if "params" in trace and kind not in ("counterexample", "system"):  # a system trace's reader checks its own
        check_sizes(trace["params"])
    return Loaded(kind, trace)


def load_trace(path: str | Path) -> Loaded:
    """The trace file at ``path``, read once: ``(kind, trace)``. A file that
    is not JSON, of an unknown or unsupported format version, or too large
    is a ``ValueError`` saying why; an unreadable one an ``OSError``."""
    return check_trace(read_json(path))
