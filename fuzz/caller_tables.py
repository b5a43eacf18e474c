"""The callers' block tables and slots: allocation, the tables a launch sees, and the scheduler's tracker copies.

Functions of one :class:`~.callers.Callers`: its requests' columns filled as
they grow (:func:`ensure_blocks`, some earlier columns null), slots given back
when no table names them (:func:`release`), each launch's tables per group
(:func:`batch_table`, with other owners' stale slots where the kernels must
not read) as the kernels see them (:func:`kernel_table`), and the block
copies of moved live columns (:func:`block_copies`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .caller_policy import Draw, boolean, element, integer

if TYPE_CHECKING:
    from .callers import Callers, Request


def kernel_table(callers: Callers, table: list) -> list:
    """A step's block tables as the kernels see them (:attr:`table_cols` wide)."""
    if callers.table_cols == callers.setup.num_cols:
        return table
    return [[row[:callers.table_cols] for row in group] for group in table]


def alloc(callers: Callers, group: int) -> int:
    """A free slot of ``group``, allocated this step (:func:`ensure_blocks` checks there is one)."""
    slot = callers.free[group].pop()
    callers.fresh_slots.add((group, slot))
    return slot


def release(callers: Callers, r: Request) -> None:
    """Give back the slots of ``r``'s columns that no published block and no other request's table names."""
    keep = {s for slots in callers.published.values() for s in slots}
    for g, cols in enumerate(r.cols):
        for s in cols:
            if s != callers.geo.pad_slot and s not in keep and s not in callers.free[g]:
                if not any(s == o.cols[g][c] for o in callers.requests.values() if o is not r for c in range(len(o.cols[g]))):
                    callers.free[g].append(s)


def ensure_blocks(callers: Callers, draw: Draw, r: Request, live_col: int, prefill: bool = False) -> bool:
    """Allocate the columns up to the live one (some earlier ones null); the live one of a
    ``prefill`` chunk as the policy's ``taken_live_blocks`` says, of a moving one as its
    ``aliased_live_moves`` says."""
    first = r.computed // callers.geo.block_size if callers.moves else 0
    needed = []
    for c in range(first, live_col + 1):
        if r.cols[0][c] == callers.geo.pad_slot:
            needed.append(c)
    if any(len(f) < len(needed) for f in callers.free):
        return False
    groups = len(callers.free)
    for c in needed:
        null = callers.features.null_columns and c != live_col and (callers.features.shared_prompts or boolean(draw))
        # the policy's groups disagreeing on the null block: one group's live block null, the others' real
        lost = (integer(draw, 0, groups - 1) if c == live_col and callers.policy.null_live_groups and groups > 1
                and boolean(draw) else -1)
        taken = held_elsewhere(callers, draw, r) if c == live_col and prefill and lost < 0 else None
        stays = aliased_groups(callers, draw, r, c) if c == live_col else set()
        for g in range(groups):
            if null or g == lost:
                r.cols[g][c] = callers.geo.pad_slot
            elif taken is not None:
                r.cols[g][c] = taken[g]
            elif g in stays:
                r.cols[g][c] = r.cols[g][callers.source_col(r)]
            else:
                r.cols[g][c] = alloc(callers, g)
        callers.saw("null column", null)
        if lost >= 0:
            callers.lost.add(r.rid)
            callers.saw("live column null in one group")
        if taken is not None:
            callers.taken_live.add(r.rid)
            callers.saw("live block another request holds")
        callers.saw("live column moved while its block stays", bool(stays))
    return True


def held_elsewhere(callers: Callers, draw: Draw, r: Request) -> tuple[int, ...] | None:
    """With the policy's ``taken_live_blocks``: the blocks, one per group, of a column another running
    request holds before its live column and before any column this step's launches may read or write
    for it (a request this step schedules: two columns short of its computed tokens' block), named by
    ``r`` nowhere (published ones first); None without the policy or such a column."""
    if not callers.policy.taken_live_blocks:
        return None
    pad, groups, bs = callers.geo.pad_slot, len(callers.free), callers.geo.block_size
    mine = {(g, s) for g, cols in enumerate(r.cols) for s in cols}
    published = {(g, s) for slots in callers.published.values() for g, s in enumerate(slots)}
    options = []
    for o in sorted(callers.requests.values(), key=lambda o: o.rid):
        below = min(o.live_col, o.computed // bs - 1) if o.rid in callers.stepping else o.live_col
        if o is not r:
            options += [tuple(o.cols[g][c] for g in range(groups)) for c in range(max(below, 0))]
    options = [slots for slots in options if pad not in slots and not any((g, s) in mine for g, s in enumerate(slots))]
    if not options:
        return None
    options.sort(key=lambda slots: not all((g, s) in published for g, s in enumerate(slots)))
    return element(draw, list(dict.fromkeys(options)))


def aliased_groups(callers: Callers, draw: Draw, r: Request, live_col: int) -> set[int]:
    """With the policy's ``aliased_live_moves``, where no prefix is published and the live column
    moves: the groups (drawn) in which ``r``'s new live column ``live_col`` keeps the real block its
    state is in (vLLM's test T5: two columns of a row name one block)."""
    src = callers.source_col(r)
    if not (callers.policy.aliased_live_moves and callers.moves and not callers.align and 0 <= src != live_col):
        return set()
    return {g for g, cols in enumerate(r.cols) if cols[src] != callers.geo.pad_slot and boolean(draw)}


def batch_table(callers: Callers, draw: Draw, batch_rows: list) -> list:
    """Every group's block table for one launch: each scheduled request's
    own columns in its batch row; with stale slots on, the entries the
    kernels must not read (past a row's live column, padding rows, rows
    past the launch) may hold real slots of other owners, as a reused
    vLLM table row does."""
    groups, cols, maxr = len(callers.setup.layers_per_group), callers.setup.num_cols, callers.geo.max_num_reqs
    table = [[[callers.geo.pad_slot] * cols for _ in range(maxr)] for _ in range(groups)]
    for b in range(maxr):
        row = batch_rows[b] if b < len(batch_rows) else None
        if row is not None:
            for g in range(groups):
                table[g][b] = list(row[0].cols[g])
        first_unread = row[1].live_col + 1 if row is not None else 0
        violator = row is not None and row[0].rid in callers.tainted  # its footprint: its own slots only
        if callers.features.stale_slots and not violator and first_unread < cols and boolean(draw):
            placed = place_stale_slots(callers, draw, table, b, first_unread, row[0] if row else None)
            callers.saw("stale slot past the live column" if row else "stale slot in a padding or unused row",
                        placed > 0)
    return table


def place_stale_slots(callers: Callers, draw: Draw, table: list, b: int, first: int, owner: Request | None) -> int:
    """Fill the null entries of row ``b`` from column ``first`` on (a
    request's own slot past its live column, left by a step that
    scheduled into the next block, stays) with other requests' real
    slots: not allocated this step, none twice in the row, live slots
    first (their trackers are the ones a stray write would show).
    Returns how many columns it filled."""
    groups, cols, pad = len(table), callers.setup.num_cols, callers.geo.pad_slot
    empty = [c for c in range(first, cols) if all(table[g][b][c] == pad for g in range(groups))]
    candidates = []
    for o in sorted(callers.requests.values(), key=lambda o: o.rid):
        if o is not owner:
            candidates += [tuple(o.cols[g][c] for g in range(groups))
                           for c in sorted(range(cols), key=lambda c: c != o.live_col) if o.cols[0][c] != pad]
    taken = [set(table[g][b]) for g in range(groups)]
    usable = [slots for slots in candidates
              if not any(s in taken[g] or (g, s) in callers.fresh_slots for g, s in enumerate(slots))]
    if not usable or not empty:
        return 0
    turn = integer(draw, 0, len(usable) - 1)
    placed = 0
    for slots in usable[turn:] + usable[:turn]:
        if placed == len(empty):
            break
        if any(s in taken[g] for g, s in enumerate(slots)):
            continue
        for g, s in enumerate(slots):
            table[g][b][empty[placed]] = s
            taken[g].add(s)
        placed += 1
    return placed


def block_copies(callers: Callers, draw: Draw, batch_rows: list) -> list:
    """Copy-on-write of the trackers for moved live columns inside the
    kernels' table, as the policy's ``tracker_copies`` says."""
    copies = callers.policy.tracker_copies
    if copies == "none" or copies == "drawn" and not callers.features.block_copies:
        return []
    inside = [row if row is None or row[1].live_col < callers.table_cols else None for row in batch_rows]
    return moved_column_copies(callers, inside, (lambda: True) if copies == "every" else lambda: boolean(draw))


def moved_column_copies(callers: Callers, batch_rows: list, copied: Callable[[], bool]) -> list:
    """The tracker copies ``[group, source slot, destination slot]`` of the rows whose live
    column moves and for which ``copied()`` says yes (asked once per such row); their plans
    are marked copied."""
    copies = []
    for row in batch_rows:
        if row is None:
            continue
        r, plan = row
        src = callers.source_col(r)
        if src >= 0 and src != plan.live_col and copied():
            for g in range(len(callers.free)):
                s, d = r.cols[g][src], r.cols[g][plan.live_col]
                if s != callers.geo.pad_slot and d != callers.geo.pad_slot:
                    copies.append([g, s, d])
            plan.copied = True
    return copies
