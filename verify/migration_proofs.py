"""Obligations of the migration program (`reset_new_slots`)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from replayssm.spec import assumptions as env
from replayssm.spec.vocab import conj, disj, implies, ite, negate

from replayssm.spec.flashinfer import tracker_in_range
from replayssm.spec.migration import MigrationTrace, migrate_program

from .memory import SymbolicMemory
from .goals import TRACKERS, in_bounds, race_free, within_int32
from .obligation import Claim, obligation
from .scenarios import GEOMETRIES, MigrationCase, migration_case, pair_show, program_pair
from .terms import named_int



def _cases(**kw) -> Iterator[tuple[str, MigrationCase]]:
    for gname, geo in GEOMETRIES.items():
        for has_map in (False, True):
            yield f"{gname} {'map' if has_map else 'nomap'}", migration_case(has_map, geo, **kw)


def _claim(label: str, c: MigrationCase, goal, cover=True, extra=None) -> Claim:
    return Claim(goal, c.assumptions + (extra or []), cover, label, c.show(), [c.mem])


def _moved(t: MigrationTrace) -> Any:
    """The row's live column moves to a real destination: a valid destination
    slot, and no valid source or a source slot other than it. Stated from the
    slots the program resolved, not from its own ``changed`` decision (so a
    program that writes when it should not does not define when it moves)."""
    return conj(t.valid_dst, disj(negate(t.valid_src), t.src_slot != t.dst_slot))


@obligation("migration.copy_or_reset", "migration",
            "a moved live column's destination slot takes the source slot's trackers, or (0, 0) without a "
            "valid source; with a null destination or the same slot nothing is written")
def copy_or_reset() -> Iterator[Claim]:
    for label, c in _cases():
        t, g = c.trace, c.group
        src_before = [c.mem.initial(b, (g, t.src_slot)) for b in TRACKERS]
        after = [c.mem.final(b, (g, t.dst_slot)) for b in TRACKERS]
        moved = _moved(t)
        goal = [
            ("destination takes the source", implies(moved, conj(*[
                a == ite(t.valid_src, s, 0) for a, s in zip(after, src_before)]))),
            ("nothing written otherwise", implies(negate(moved), conj(*[negate(w.guard) for w in c.mem.writes]))),
        ]
        yield _claim(label, c, goal, conj(moved, t.valid_src))


@obligation("migration.idempotent", "migration",
            "running the migration program twice leaves the same trackers as running it once")
def idempotent() -> Iterator[Claim]:
    for label, c in _cases():
        again = SymbolicMemory(c.mem.shapes, {b: c.mem.current.get(b, c.mem.array(b)) for b in c.mem.shapes
                                              if b in c.mem.arrays}, "again")
        migrate_program(again, c.geo.pad_slot, c.has_idx_mapping, c.batch, c.group)
        g2, slot = named_int("any_group"), named_int("any_slot")
        goal = [(b, again.final(b, (g2, slot)) == c.mem.final(b, (g2, slot))) for b in TRACKERS]
        yield _claim(label, c, goal, c.trace.changed)


@obligation("migration.tracker_range", "migration",
            "migration keeps 0 <= ring_start < R and 0 <= num_committed <= W (inductive)")
def tracker_range() -> Iterator[Claim]:
    for label, c in _cases():
        goal = [(f"{w.buffer} store", implies(w.guard, tracker_in_range(w.buffer, w.value, c.geo)))
                for w in c.mem.writes]
        yield _claim(label, c, goal, c.trace.changed)


@obligation("migration.memory_safety", "migration",
            "every column, slot and tracker entry the migration program touches is in bounds")
def memory_safety() -> Iterator[Claim]:
    for label, c in _cases():
        goal = in_bounds(c.mem)
        yield _claim(label, c, goal, c.trace.changed)


@obligation("migration.int32", "migration", "no integer intermediate of the migration program leaves int32")
def int32() -> Iterator[Claim]:
    for label, c in _cases():
        goal = within_int32(c.intermediates)
        yield _claim(label, c, goal, c.trace.changed)


@obligation("migration.determinism", "migration",
            "no two programs of one migration launch store different values to one tracker entry or read "
            "one another's stores, when destinations are fresh and distinct within the launch")
def determinism() -> Iterator[Claim]:
    for gname, geo in GEOMETRIES.items():
        for has_map in (False, True):
            p, q = program_pair(partial(migration_case, has_map, geo))
            yield race_claim(f"{gname} {'map' if has_map else 'nomap'}", p, q)


def race_claim(label: str, p: MigrationCase, q: MigrationCase) -> Claim:
    """Two programs of one launch race-free, under fresh distinct destinations
    (also what the kernel-source conflict obligation assumes)."""
    pad = p.geo.pad_slot
    same_group = p.group == q.group
    fresh = []
    for me, other in ((p, q), (q, p)):
        for slot in (other.trace.src_slot, other.trace.dst_slot):
            fresh.append((env.FRESH_DISTINCT_DESTINATIONS.name, implies(
                conj(same_group, _moved(me.trace)),
                env.FRESH_DISTINCT_DESTINATIONS(me.trace.dst_slot, slot, pad))))
    goal = race_free(p.mem, q.mem)
    distinct = ("distinct_programs", disj(p.batch != q.batch, p.group != q.group))
    return Claim(goal, p.assumptions + q.assumptions + fresh + [distinct],
                 conj(same_group, _moved(p.trace), _moved(q.trace)), label, pair_show(p, q), [p.mem, q.mem])
