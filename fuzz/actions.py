"""Launch actions as typed records, and their JSON form in a trace.

A *launch action* is what a caller hands the worker in one call, with every
input concrete, so a trace replays without the generator that made it:

* :class:`BlockCopy` -- the scheduler's block copies: for each
  ``(group, src, dst)`` the destination slot takes the source slot's trackers;
* :class:`SetState` -- state buffers overwritten on both sides (a trace that
  starts from an arbitrary state, or whose caller moved trackers itself);
* :class:`Migrate` -- one ``_reset_new_replayssm_slots_kernel`` launch
  (``reset_new_slots``);
* :class:`Postprocess` -- one ``_postprocess_replayssm_kernel`` launch, then
  the compaction in align mode.

In a trace (format ``replayssm.base.traces.TRACE_ID``) an action is the JSON object
``{"name": ..., "picks": {...}, "caller": [...]}``: ``name`` is the record's
:attr:`NAME`, ``picks`` its fields (``set_state``: buffer name -> values),
``caller`` the readable lines saying which caller decision made it (left out
when empty); a launch judged by containment (``fuzz --drop``) carries its
footprint as ``contained``. :func:`action_from_json` accepts exactly what
:func:`action_to_json` writes, and names the first bad field otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Union

from replayssm.base.traces import TRACE_ID  # the action shape above is the one of versions 1 and 2 alike

STATE_BUFFERS = (
    "ring_start",
    "num_committed",
    "plan_ring_start",
    "plan_flush_count",
    "src_slots",
    "dst_slots",
    "active_request_indices",
)
"""The buffers the kernels write; the harness compares every entry of each."""


@dataclass(frozen=True)
class BlockCopy:
    """The scheduler's copy-on-write of trackers, ``(group, src, dst)`` each."""

    NAME: ClassVar[str] = "block_copy"
    copies: list[list[int]]
    caller: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SetState:
    """State buffers (names from :data:`STATE_BUFFERS`) set on both sides;
    values flat or nested, in the buffer's row-major order."""

    NAME: ClassVar[str] = "set_state"
    buffers: dict[str, list]
    caller: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Migrate:
    """The migration launch's inputs (``num_reqs`` programs per group)."""

    NAME: ClassVar[str] = "migrate"
    num_reqs: int
    idx_mapping: list[int] | None
    src_cols: list[int]
    dst_cols: list[int]
    block_table: list[list[list[int]]]
    caller: list[str] = field(default_factory=list)
    contained: dict | None = None
    """Under ``fuzz --drop``: the violators' footprint (``{"rows": [...],
    "slots": [[group, slot], ...]}``), outside which the launch is judged."""


@dataclass(frozen=True)
class Postprocess:
    """The postprocess launch's inputs (``num_reqs`` programs per group);
    ``idx_mapping`` and ``live_cols`` are None when the conventions pass none."""

    NAME: ClassVar[str] = "postprocess"
    num_reqs: int
    idx_mapping: list[int] | None
    query_metadata: list[int]
    num_computed_tokens: list[int]
    num_accepted_tokens: list[int]
    is_prefilling: list[bool]
    live_cols: list[int] | None
    block_table: list[list[list[int]]]
    caller: list[str] = field(default_factory=list)
    contained: dict | None = None
    """Under ``fuzz --drop``: the violators' footprint (``{"rows": [...],
    "slots": [[group, slot], ...]}``), outside which the launch is judged."""


Action = Union[BlockCopy, SetState, Migrate, Postprocess]
Launch = Union[Migrate, Postprocess]
ACTIONS: dict[str, type] = {a.NAME: a for a in (BlockCopy, SetState, Migrate, Postprocess)}


def launch_inputs(action: Launch) -> dict[str, list]:
    """The input buffers a launch hands its kernel, by buffer name (those the
    conventions leave out are absent)."""
    return {f.name: getattr(action, f.name) for f in fields(action)
            if f.name not in ("num_reqs", "caller", "contained") and getattr(action, f.name) is not None}


def action_to_json(action: Action) -> dict:
    """The trace's JSON object for ``action``."""
    if isinstance(action, SetState):
        picks: dict[str, Any] = dict(action.buffers)
    else:
        picks = {f.name: getattr(action, f.name) for f in fields(action) if f.name not in ("caller", "contained")}
    out: dict[str, Any] = {"name": action.NAME, "picks": picks}
    if action.caller:
        out["caller"] = list(action.caller)
    if getattr(action, "contained", None):
        out["contained"] = action.contained
    return out


# -- reading ---------------------------------------------------------------------

def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _ints(value: Any, where: str, *, depth: int = 1, bools: bool = False) -> list:
    """``value`` as a list nested ``depth`` deep with int (or bool) leaves."""
    ok = (lambda x: isinstance(x, bool) or _is_int(x)) if bools else _is_int
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list, got {value!r:.80}")
    for i, x in enumerate(value):
        if depth > 1:
            _ints(x, f"{where}[{i}]", depth=depth - 1, bools=bools)
        elif not ok(x):
            raise ValueError(f"{where}[{i}] must be {'a bool or ' if bools else 'an '}int, got {x!r:.80}")
    return value


def _nested_ints(value: Any, where: str) -> list:
    """A list of any nesting with int leaves (a state buffer's values)."""
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list, got {value!r:.80}")
    for i, x in enumerate(value):
        if isinstance(x, list):
            _nested_ints(x, f"{where}[{i}]")
        elif not _is_int(x):
            raise ValueError(f"{where}[{i}] must be an int, got {x!r:.80}")
    return value


_LAUNCH_FIELDS: dict[str, tuple[int, bool, bool]] = {
    # name: (list depth, bool leaves allowed, may be null)
    "idx_mapping": (1, False, True),
    "src_cols": (1, False, False),
    "dst_cols": (1, False, False),
    "query_metadata": (1, False, False),
    "num_computed_tokens": (1, False, False),
    "num_accepted_tokens": (1, False, False),
    "is_prefilling": (1, True, False),
    "live_cols": (1, False, True),
    "block_table": (3, False, False),
}


def _contained(value: Any, where: str) -> dict | None:
    """A launch's containment footprint, checked."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"rows", "slots"}:
        raise ValueError(f"{where} must be an object with rows and slots, got {value!r:.80}")
    _ints(value["rows"], f"{where}.rows")
    for i, pair in enumerate(_ints(value["slots"], f"{where}.slots", depth=2)):
        if len(pair) != 2:
            raise ValueError(f"{where}.slots[{i}] must be [group, slot], got {pair!r}")
    return value


def _launch_from_picks(kind: type, picks: dict, where: str, caller: list[str], contained: dict | None) -> Launch:
    names = [f.name for f in fields(kind) if f.name not in ("caller", "contained")]
    unknown = sorted(set(picks) - set(names))
    missing = [n for n in names if n not in picks]
    if unknown or missing:
        bad = f"unknown picks {', '.join(map(repr, unknown))}" if unknown else \
            f"missing picks {', '.join(map(repr, missing))}"
        raise ValueError(f"{where}.picks: {bad}; a {kind.NAME} action has {', '.join(names)}")
    if not _is_int(picks["num_reqs"]) or picks["num_reqs"] < 0:
        raise ValueError(f"{where}.picks.num_reqs must be an int >= 0, got {picks['num_reqs']!r}")
    values: dict[str, Any] = {"num_reqs": picks["num_reqs"]}
    for name in names[1:]:
        depth, bools, nullable = _LAUNCH_FIELDS[name]
        value = picks[name]
        if value is None and nullable:
            values[name] = None
            continue
        values[name] = _ints(value, f"{where}.picks.{name}", depth=depth, bools=bools)
    if kind is Postprocess:
        values["is_prefilling"] = [bool(x) for x in values["is_prefilling"]]
    return kind(**values, caller=caller, contained=contained)


def action_from_json(obj: Any, where: str = "action") -> Action:
    """The record a trace's action object describes; a ``ValueError`` naming
    the first field (``where`` is its path in the trace) that is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be an object, got {obj!r:.80}")
    name, picks = obj.get("name"), obj.get("picks")
    if name not in ACTIONS:
        raise ValueError(f"{where}.name must be one of {', '.join(ACTIONS)}, got {name!r}")
    if not isinstance(picks, dict):
        raise ValueError(f"{where}.picks must be an object, got {picks!r:.80}")
    caller = obj.get("caller", [])
    if not isinstance(caller, list) or not all(isinstance(c, str) for c in caller):
        raise ValueError(f"{where}.caller must be a list of strings, got {caller!r:.80}")
    kind = ACTIONS[name]
    if kind is BlockCopy:
        if set(picks) != {"copies"}:
            raise ValueError(f"{where}.picks: a block_copy action has exactly copies, got {', '.join(picks)}")
        copies = _ints(picks["copies"], f"{where}.picks.copies", depth=2)
        for i, c in enumerate(copies):
            if len(c) != 3:
                raise ValueError(f"{where}.picks.copies[{i}] must be [group, src, dst], got {c!r}")
        return BlockCopy(copies, caller)
    if kind is SetState:
        for b, values in picks.items():
            if b not in STATE_BUFFERS:
                raise ValueError(f"{where}.picks: unknown buffer {b!r}; set_state sets {', '.join(STATE_BUFFERS)}")
            _nested_ints(values, f"{where}.picks.{b}")
        return SetState(dict(picks), caller)
    return _launch_from_picks(kind, picks, where, caller, _contained(obj.get("contained"), f"{where}.contained"))
