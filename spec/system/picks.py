"""The nondeterministic choices of the system actions, as typed records.

Each action's picks are one record: :class:`AdmitPicks`, :class:`FreePicks`,
or :class:`StepPicks` with one :class:`RowPick` per request and the step's
batch order. Leaves are
vocabulary values (ints in the concrete simulation, Z3 terms in proofs).

A record has a readable JSON form (:func:`picks_json`: nested objects and
lists, as saved in traces) and a flat one (:func:`flat_picks`: one entry per
leaf, named by its path, e.g. ``rows[1].slot[0]``), which names the proofs'
variables and each leaf's domain (:class:`PickSpec`).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import lru_cache
from typing import Any, Callable, TypeVar, Union

from ..vocab import Value
from .state import SystemParams


@dataclass(frozen=True)
class PickSpec:
    """One leaf of an action's picks, named by its path, with its domain
    ``[lo, hi]`` and the value a hand-written run that leaves it out gets
    (``default``; ``None``: ``lo``)."""

    name: str
    lo: int
    hi: int
    default: int | None = None

    @property
    def fallback(self) -> int:
        """The value of the leaf where picks leave it out."""
        return self.lo if self.default is None else self.default


@dataclass(frozen=True)
class AdmitPicks:
    """A waiting request ``req`` arrives with a ``prompt``-token prompt of
    token stream ``stream``; the prefix cache serves its first ``hit``
    blocks from ``hit_slots[g][c]`` (group ``g``, column ``c < hit``)."""

    req: Value
    stream: Value
    prompt: Value
    hit: Value
    hit_slots: tuple[tuple[Value, ...], ...]


@dataclass(frozen=True)
class FreePicks:
    """Running request ``req`` finishes or is preempted."""

    req: Value


@dataclass(frozen=True)
class RowPick:
    """One request's part of an engine step: whether it is scheduled
    (``sched``), its query length ``q``, accepted count ``acc``, live column
    and ``is_prefilling`` flag; per cache group the fresh slot the pool
    hands out (``slot[g]``) and whether the column is kept null (``null[g]``).
    For each column ``c`` but the last, what the pool gives that column when
    the row covers it before its live column and it holds the null block
    (``spec.system.step.covers``): the null block in every group
    (``cover_null[c]`` 1) or, per group, the slot ``cover_slot[c][g]``.
    ``tail_as_decode`` 1 runs a prompt tail (prior state, one prompt token
    left) as a decode row instead of a prefill chunk (0 in a trace written
    before the pick existed)."""

    sched: Value
    q: Value
    acc: Value
    live_col: Value
    is_prefilling: Value
    slot: tuple[Value, ...]
    null: tuple[Value, ...]
    cover_slot: tuple[tuple[Value, ...], ...]
    cover_null: tuple[Value, ...]
    tail_as_decode: Value = 0


@dataclass(frozen=True)
class StepPicks:
    """An engine step: one :class:`RowPick` per request, and the batch
    order: ``order`` is a permutation of the requests, and the scheduled
    ones take batch rows ``0 .. n - 1`` in the order they appear in it
    (``spec.system.step.batch_layout``); each step picks its own."""

    rows: tuple[RowPick, ...]
    order: tuple[Value, ...]


Picks = Union[AdmitPicks, FreePicks, StepPicks]

P = TypeVar("P", AdmitPicks, FreePicks, StepPicks)
"""One of the picks records."""


def _record(cls: type, d: dict) -> Any:
    """``cls`` from its JSON form (lists become tuples, rows records)."""
    def tup(x: Any) -> Any:
        return tuple(tup(v) for v in x) if isinstance(x, list) else x

    if cls is StepPicks:
        return StepPicks(tuple(_record(RowPick, row) for row in d["rows"]), tup(d["order"]))
    # a list field with no leaves (hit_slots of a one-column table) has no flat entry; a leaf
    # with a default (a pick added after the trace was written) takes it
    return cls(**{f.name: tup(d.get(f.name, [])) for f in fields(cls)
                  if f.name in d or f.default is MISSING})


_PATH = re.compile(r"(\w+)|\[(\d+)\]")


def _unflatten(flat: dict[str, Value]) -> dict:
    """The nested JSON form of flat ``{path: value}`` entries."""
    root: dict = {}
    for path, value in flat.items():
        keys: list[Any] = [int(i) if i else name for name, i in _PATH.findall(path)]
        node: Any = root
        for key, nxt in zip(keys, keys[1:]):
            if isinstance(node, dict):
                node = node.setdefault(key, [] if isinstance(nxt, int) else {})
            else:
                while len(node) <= key:
                    node.append(None)
                if node[key] is None:
                    node[key] = [] if isinstance(nxt, int) else {}
                node = node[key]
        last = keys[-1]
        if isinstance(node, dict):
            node[last] = value
        else:
            while len(node) <= last:
                node.append(None)
            node[last] = value
    return root


def picks_from_flat(cls: type[P], flat: dict[str, Value]) -> P:
    """The ``cls`` record whose leaves are ``flat``'s values by path (every leaf given)."""
    return _record(cls, _unflatten(flat))


def picks_json(picks: Picks, leaf: Callable[[Value], Any] = lambda x: x) -> dict:
    """The readable JSON form of a picks record, ``leaf`` applied to every value."""
    def walk(x: Any) -> Any:
        if is_dataclass(x):
            return {f.name: walk(getattr(x, f.name)) for f in fields(x)}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return leaf(x)

    return walk(picks)


@lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def leaf_values(picks: Picks) -> list[Value]:
    """Every leaf of a picks record, in the order of :func:`flat_picks`."""
    out: list[Value] = []

    def walk(x: Any) -> None:
        if is_dataclass(x):
            record: type = type(x)
            for name in _field_names(record):
                walk(getattr(x, name))
        elif isinstance(x, tuple):
            for v in x:
                walk(v)
        else:
            out.append(x)

    walk(picks)
    return out


def flat_picks(picks: Picks | dict) -> dict[str, Value]:
    """Every leaf of a picks record (or of its JSON form) by path, e.g. ``rows[0].q``."""
    out: dict[str, Value] = {}

    def walk(x: Any, path: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        else:
            out[path] = x

    walk(picks if isinstance(picks, dict) else picks_json(picks), "")
    return out


def idle_row(p: SystemParams) -> RowPick:
    """The picks of a request a step does not schedule (every leaf at its domain's low end)."""
    return RowPick(0, 0, 0, 0, 0, (1,) * p.groups, (0,) * p.groups, cover_picks(p), (0,) * (p.num_cols - 1))


def cover_picks(p: SystemParams, slots: dict[int, tuple[int, ...]] | None = None) -> tuple[tuple[int, ...], ...]:
    """``cover_slot`` of a row: column ``c``'s slots (one per group) from
    ``slots``, the domain's low end (1) in the other columns."""
    given = slots or {}
    return tuple(given.get(c, (1,) * p.groups) for c in range(p.num_cols - 1))


def request_order(p: SystemParams) -> tuple[int, ...]:
    """The batch order that lists the requests by index."""
    return tuple(range(p.num_reqs))


def step_of(p: SystemParams, rows: dict[int, RowPick], order: tuple[int, ...] | None = None) -> StepPicks:
    """A step scheduling ``rows`` (by request), every other request idle, in
    batch ``order`` (default :func:`request_order`)."""
    return StepPicks(tuple(rows.get(r, idle_row(p)) for r in range(p.num_reqs)), order or request_order(p))
