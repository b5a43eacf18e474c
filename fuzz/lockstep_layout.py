"""K independent small systems side by side in one set of buffers.

``fuzz --systems K`` runs K copies of one small system's shape (geometry,
conventions, layers per group, table width) in the same buffers, so that one
launch serves all of them. Each system keeps its own callers and its own
launch actions in *local* coordinates (exactly what a one-system run would
make); :func:`combine` lays one step's actions of several systems into one
launch:

* **slots**: system ``k``'s local slot ``s`` is ``k * (S - 1) + s``, where
  ``S`` is a system's slot count; the null block (slot 0, ``PAD_SLOT_ID``)
  stays shared, so slot ranges are disjoint;
* **batch rows and request indices**: system ``k`` starts at combined row
  ``start[k]``; its batch row ``b`` and its request index ``r`` (which is
  ``b`` without ``idx_mapping``) become ``start[k] + b`` and
  ``start[k] + r``. With ``idx_mapping`` the start is static, ``k * rows``
  (``rows`` is a system's ``MAX_NUM_REQS``), and the rows between systems
  are padding rows; without it the systems' rows follow each other (every
  row below ``num_reqs`` is a request there);
* **block tables**: system ``k``'s table rows land on its combined rows, its
  slots translated.

:meth:`Layout.owner` tells which system a differing state entry belongs to:
a tracker entry by its slot, a plan or packed entry by its batch row, an
active-list entry by the rows it names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from .actions import Action, BlockCopy, Migrate, Postprocess
from .launcher import Discrepancy, Setup

Parts = dict[int, list[Action]]
"""One step's local launch actions of each system that scheduled rows."""


@dataclass(frozen=True)
class Layout:
    """Where ``systems`` copies of the small system ``local`` sit in shared buffers."""

    local: Setup
    systems: int

    def __post_init__(self) -> None:
        if self.local.geometry.pad_slot != 0:
            raise ValueError(f"lockstep systems share the null block: pad_slot must be 0, "
                             f"got {self.local.geometry.pad_slot}")
        if isinstance(self.systems, bool) or not isinstance(self.systems, int) or self.systems < 1:
            raise ValueError(f"systems must be an int >= 1, got {self.systems!r}")

    @property
    def rows(self) -> int:
        """A system's ``MAX_NUM_REQS``."""
        return self.local.geometry.max_num_reqs

    @property
    def slots_per_system(self) -> int:
        """A system's real slots (all but the shared null block)."""
        return self.local.num_slots - 1

    @property
    def setup(self) -> Setup:
        """The shared buffers' shape: ``systems`` times the rows and the real slots."""
        geo = replace(self.local.geometry, max_num_reqs=self.rows * self.systems)
        return replace(self.local, geometry=geo, num_slots=1 + self.systems * self.slots_per_system)

    def slot(self, system: int, slot: int) -> int:
        """System ``system``'s local ``slot`` in the shared buffers."""
        return slot if slot == 0 else system * self.slots_per_system + slot

    def slot_owner(self, slot: int) -> int | None:
        """The system whose slot this is (None: the null block, or past every system)."""
        if slot <= 0 or slot > self.systems * self.slots_per_system:
            return None
        return (slot - 1) // self.slots_per_system

    def starts(self, parts: Parts) -> dict[int, int]:
        """The combined batch row of each system's first row."""
        if self.local.conventions.has_idx_mapping:
            return {k: k * self.rows for k in parts}
        out, at = {}, 0
        for k in sorted(parts):
            out[k] = at
            at += _launch(parts[k], Migrate).num_reqs
        return out

    def owner(self, wrong: Iterable[Discrepancy], row_owner: list[int]) -> int | None:
        """The system the first attributable differing entry belongs to
        (``row_owner``: the launch's system per combined batch row, -1 between systems)."""
        total_rows = self.rows * self.systems

        def of_row(b: int) -> int | None:
            return row_owner[b] if 0 <= b < len(row_owner) and row_owner[b] >= 0 else None

        for d in wrong:
            if d.buffer in ("ring_start", "num_committed"):
                k = self.slot_owner(d.index[-1])
            elif d.buffer in ("plan_ring_start", "plan_flush_count"):
                k = of_row(d.index[0])
            elif d.buffer in ("src_slots", "dst_slots"):
                k = of_row(d.index[0] % total_rows)
            else:  # the active list names batch rows
                k = of_row(d.spec) if of_row(d.spec) is not None else of_row(d.impl)
            if k is not None:
                return k
        return None


def _launch(actions: list[Action], kind: type) -> Migrate | Postprocess:
    found = [a for a in actions if isinstance(a, kind)]
    if len(found) != 1:
        raise ValueError(f"a system's step must hold one {kind.NAME} action, got {len(found)}")
    return found[0]


def combine(layout: Layout, parts: Parts) -> tuple[list[Action], list[int]]:
    """One step of several systems as one set of launch actions (block copies,
    migration, postprocess), and the system of each combined batch row (-1: a
    padding row between systems). ``parts`` holds each system's local actions."""
    if not parts:
        return [], []
    conv, rows, total = layout.local.conventions, layout.rows, layout.rows * layout.systems
    start = layout.starts(parts)
    migrates = {k: _launch(a, Migrate) for k, a in parts.items()}
    posts = {k: _launch(a, Postprocess) for k, a in parts.items()}
    num_reqs = max(start[k] + m.num_reqs for k, m in migrates.items())
    row_owner = [-1] * num_reqs
    for k, m in migrates.items():
        row_owner[start[k]:start[k] + m.num_reqs] = [k] * m.num_reqs

    def span(k: int) -> int:
        """How many of system k's request-indexed entries and table rows it owns."""
        return rows if conv.has_idx_mapping else migrates[k].num_reqs

    def table(tables: dict[int, list]) -> list:
        groups = len(layout.local.layers_per_group)
        out = [[[0] * layout.local.num_cols for _ in range(total)] for _ in range(groups)]
        for k, t in tables.items():
            for g in range(groups):
                for r in range(span(k)):
                    out[g][start[k] + r] = [layout.slot(k, s) for s in t[g][r]]
        return out

    def per_request(field: str, fill: int, source: dict) -> list[int]:
        out = [fill] * total
        for k, a in source.items():
            out[start[k]:start[k] + span(k)] = getattr(a, field)[:span(k)]
        return out

    def idx_mapping(source: dict) -> list[int] | None:
        if not conv.has_idx_mapping:
            return None
        out = [-1] * num_reqs
        for k, a in source.items():
            for b, r in enumerate(a.idx_mapping):
                out[start[k] + b] = r if r < 0 else start[k] + r
        return out

    copies = [[g, layout.slot(k, s), layout.slot(k, d)]
              for k in sorted(parts) for a in parts[k] if isinstance(a, BlockCopy) for g, s, d in a.copies]
    actions: list[Action] = [BlockCopy(copies, [f"{len(copies)} tracker copies of {len(parts)} systems"])] \
        if copies else []
    actions.append(Migrate(num_reqs, idx_mapping(migrates), per_request("src_cols", -1, migrates),
                           per_request("dst_cols", -1, migrates), table({k: m.block_table for k, m in migrates.items()}),
                           [f"systems {sorted(parts)} (of {layout.systems})"]))
    lengths = [0] * num_reqs
    prefilling = [False] * num_reqs
    caller = ["padding"] * num_reqs
    for k, p in posts.items():
        q = p.query_metadata
        for b in range(p.num_reqs):
            lengths[start[k] + b] = q[b + 1] - q[b] if conv.cumulative else q[b]
            prefilling[start[k] + b] = p.is_prefilling[b]
            caller[start[k] + b] = p.caller[b] if p.caller[b] == "padding" else f"system {k}: {p.caller[b]}"
    query = lengths
    if conv.cumulative:
        query = [0]
        for n in lengths:
            query.append(query[-1] + n)
    actions.append(Postprocess(num_reqs, idx_mapping(posts), query, per_request("num_computed_tokens", 0, posts),
                               per_request("num_accepted_tokens", 0, posts), prefilling,
                               per_request("live_cols", 0, posts) if not conv.live_col_is_zero else None,
                               table({k: p.block_table for k, p in posts.items()}), caller))
    return actions, row_owner
