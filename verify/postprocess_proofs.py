"""Obligations of the postprocess program, one per property.

Every obligation is proved for each geometry of :data:`GEOMETRIES` and each
convention combination it concerns, over symbolic positions, row lengths,
trackers, slots, tables, batch and group indices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import z3

from replayssm.spec import assumptions as env
from replayssm.spec.flashinfer import kernel_checkpoints, kernel_window_after, materialize_plan_ok, tracker_in_range
from replayssm.spec.geometry import Conventions
from replayssm.spec.postprocess import packed_offset
from replayssm.spec.vocab import conj, disj, implies, ite, negate

from .goals import TRACKERS, in_bounds, race_free, within_int32
from .memory import Access
from .obligation import Claim, obligation
from .scenarios import (
    GEOMETRIES,
    INVARIANT_LIVE_REFINES,
    PostprocessCase,
    decode_case,
    pair_show,
    postprocess_case,
    program_pair,
)
from .terms import Fact, Sym, Symbolic, lift, named_int



REPRESENTATIVE = [
    Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=m, live_col_is_zero=z)
    for m in (False, True)
    for z in (False, True)
]
"""The conventions the behavioural obligations run under. ``postprocess.
conventions_agree`` proves that all 32 combinations decode every row to the
same positions, so v2's reading (cumulative, post-step, idx_mapping, whose
padding rows subsume the no-mapping case) stands for the query and count
conventions; the two flags that change behaviour stay enumerated."""

MODES: list[tuple[Conventions, str]] = [(conv, conv.mode) for conv in REPRESENTATIVE] + [
    (conv, "all") for conv in REPRESENTATIVE if not conv.live_col_is_zero]
"""Each representative convention in the cache mode it serves by default,
and those that pass live columns in mode all too: with publishing off the
reference's host (its live column moves, MATERIALIZE_PREFIXES off: a shape
no other mode reaches), with it on an A1-era host (chunks anywhere)."""

_CACHE: dict[tuple[str, Conventions, str], PostprocessCase] = {}


def mode_label(conv: Conventions, mode: str) -> str:
    """A case's conventions, and its cache mode where it is not the one they serve by default."""
    return conv.label() if mode == conv.mode else f"{conv.label()} in {mode}"


def _cases(when: Callable[[Conventions], bool] = lambda c: True) -> Iterator[tuple[str, PostprocessCase]]:
    for gname, geo in GEOMETRIES.items():
        for conv, mode in MODES:
            if when(conv):
                key = (gname, conv, mode)
                if key not in _CACHE:
                    _CACHE[key] = postprocess_case(conv, geo, cache_mode=mode)
                yield f"{gname} {mode_label(conv, mode)}", _CACHE[key]


def _claim(label: str, c: PostprocessCase, goal: Any, cover: Symbolic = True,
           extra: list | None = None,
           strategy: str = "parts") -> Claim:
    start, committed = _live_before(c)
    show = {**c.show(), "live ring_start before": start, "live num_committed before": committed}
    return Claim(goal, c.assumptions + (extra or []), cover, label, show, [c.mem], strategy=strategy)


def _align(conv: Conventions) -> bool:
    return conv.materialize_prefixes


def _before(c: PostprocessCase, buffer: str, slot: Symbolic) -> Sym:
    """``buffer[group, slot]`` in the memory before the step: what FlashInfer's
    decode kernel read there. The value is not the program's own load, so a
    program that loads a tracker from the wrong buffer or into the other
    tracker's place does not define its own expectation. The index is the
    program's own, though: its ``t.group`` and the ``slot`` passed in (the
    goals pass ``t.live_slot``, which the program loaded from the block
    table), so a program that loads the wrong slot from the block table moves
    the expectation with it and is not caught here."""
    return c.mem.initial(buffer, (c.trace.group, slot))


def _live_before(c: PostprocessCase) -> tuple[Sym, Sym]:
    """The live slot's ``(ring_start, num_committed)`` before the step."""
    return _before(c, "ring_start", c.trace.live_slot), _before(c, "num_committed", c.trace.live_slot)


def _window_after(c: PostprocessCase) -> tuple[Symbolic, Symbolic]:
    """Where FlashInfer's decode kernel leaves the live slot's window, from the
    trackers in memory before the step and the row's true length and accepted count."""
    start, committed = _live_before(c)
    return kernel_window_after(start, committed, c.ghost.query_len, c.ghost.accepted, c.geo.window, c.geo.ring_len)


def _in_place(c: PostprocessCase) -> Symbolic:
    """The row publishes into its own live slot (its trackers end (0, 0))."""
    return conj(c.trace.materialize, c.trace.dst_slot == c.trace.live_slot)


def _refinement(c: PostprocessCase) -> tuple[Symbolic, list[Fact]]:
    """The live slot's checkpoint position after the step (``P = N - committed``
    before it, by refinement, advanced past the folded rows when FlashInfer
    checkpoints), from the memory before the step, with the refinement assumed
    on decode rows."""
    t = c.trace
    _, committed = _live_before(c)
    position = c.ghost.computed_before - committed
    folds = kernel_checkpoints(committed, c.ghost.query_len, c.geo.window)
    after_step = position + ite(folds, committed, 0)
    return after_step, [(INVARIANT_LIVE_REFINES, implies(t.decode, position >= 0))]


def _decode_after(c: PostprocessCase) -> Symbolic:
    """A decode row's true position after the step, ``N' = N + accepted``."""
    return c.ghost.computed_before + c.ghost.accepted


def _const_value(value: Symbolic) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    z = lift(value)
    return z.as_long() if z3.is_int_value(z) else None


def _store_names(c: PostprocessCase) -> dict[int, str]:
    """A readable name for each store of the program, by its index in
    ``mem.accesses``: the buffer and what the store is for (``ring_start store
    (commit)``, ``plan_flush_count store (value -1)``, ``src_slots store (per
    layer)``), numbered when two stores share a name."""
    t = c.trace
    names: dict[int, str] = {}
    seen: dict[str, int] = {}
    for i, w in enumerate(c.mem.accesses):
        if w.kind != "write":
            continue
        const = _const_value(w.value)
        if w.buffer in TRACKERS:
            slot = lift(w.index[1])
            if w.loop_vars:
                role = "prefill reset of a touched column"
            elif slot.eq(lift(t.dst_slot)):
                role = "publish"
            elif slot.eq(lift(t.live_slot)):
                role = "prefill reset" if const == 0 else "commit"
            else:
                role = "other"
        elif w.loop_vars:
            role = "per layer"
        else:
            role = f"value {const}" if const is not None else "the step's plan"
        name = f"{w.buffer} store ({role})"
        seen[name] = seen.get(name, 0) + 1
        names[i] = name if seen[name] == 1 else f"{name} #{seen[name]}"
    return names


def _writes(c: PostprocessCase) -> list[tuple[str, Access]]:
    """The program's stores with their names (:func:`_store_names`), in program order."""
    names = _store_names(c)
    return [(names[i], c.mem.accesses[i]) for i in sorted(names)]


def _plan_final(c: PostprocessCase) -> tuple[Sym, Sym]:
    b = c.trace.batch
    return c.mem.final("plan_ring_start", (b,)), c.mem.final("plan_flush_count", (b,))


@obligation("postprocess.conventions_agree", "postprocess",
            "under all 32 convention combinations a real row decodes to its true step: query length, "
            "positions before and after, accepted count, prefill flag and live column")
def conventions_agree() -> Iterator[Claim]:
    # Decoding reads the live column and never uses a constexpr, so one
    # geometry covers it.
    geo = GEOMETRIES["vllm"]
    for conv in Conventions.all():
        c = decode_case(conv, geo)
        row, g = c.row, c.ghost
        advance = ite(g.prefilling, g.query_len, g.accepted)
        goal = [
            ("query_len", row.query_len == g.query_len),
            ("computed_after", row.computed_after == g.computed_before + advance),
            ("accepted", implies(negate(g.prefilling), row.accepted == g.accepted)),
            ("prefilling", row.prefilling == g.prefilling),
            ("live_col", c.live_col == g.live_col),
            ("computed_before", implies(g.prefilling, row.computed_before == g.computed_before)),
        ]
        real = g.req >= 0
        goal = [(n, implies(real, x)) for n, x in goal] + [("padding iff negative", row.is_padding == (g.req < 0))]
        show = {"req": g.req, "prefilling": g.prefilling, "computed_before": g.computed_before,
                "query_len": g.query_len, "accepted": g.accepted, "live_col": g.live_col,
                "decoded query_len": row.query_len, "decoded computed_after": row.computed_after}
        yield Claim(goal, c.assumptions, conj(real, negate(g.prefilling)), f"vllm {conv.label()}", show, [c.mem])


@obligation("postprocess.tracker_range", "postprocess",
            "every tracker store keeps 0 <= ring_start < R and 0 <= num_committed <= W (inductive)")
def tracker_range() -> Iterator[Claim]:
    for label, c in _cases():
        goal = [(name, implies(w.guard, tracker_in_range(w.buffer, w.value, c.geo)))
                for name, w in _writes(c) if w.buffer in TRACKERS]
        yield _claim(label, c, goal, conj(c.trace.decode, c.trace.commit.checkpointed))


@obligation("postprocess.capacity", "postprocess",
            "a decode row's appended rows never overwrite committed rows: committed + T_row <= R")
def capacity() -> Iterator[Claim]:
    for label, c in _cases():
        t = c.trace
        # The committed count the commit reads (not memory's): the program's
        # own ring accounting. Stated on memory before the step it follows from
        # inv.tracker_range and decode_row_fits alone.
        goal = [("committed read + T_row <= R",
                 implies(t.decode, t.commit.old_committed + c.ghost.query_len <= c.geo.ring_len))]
        yield _claim(label, c, goal, t.decode)


@obligation("postprocess.mirror", "postprocess",
            "the host's checkpoint decision equals FlashInfer's rule pnat + row_len > max_window for the row's true length")
def mirror() -> Iterator[Claim]:
    for label, c in _cases():
        t = c.trace
        _, committed = _live_before(c)
        kernel = kernel_checkpoints(committed, c.ghost.query_len, c.geo.window)
        goal = [("host checkpoints iff FlashInfer does", implies(t.decode, t.commit.checkpointed == kernel))]
        yield _claim(label, c, goal, conj(t.decode, kernel))


@obligation("postprocess.window_mirror", "postprocess",
            "the live slot's trackers after a decode step (unless published in place) are where FlashInfer's "
            "decode kernel leaves the live window of the trackers before the step: the append row after a "
            "checkpoint (else the old start), and its committed rows")
def window_mirror() -> Iterator[Claim]:
    for label, c in _cases():
        t, g = c.trace, c.trace.group
        start, committed = _window_after(c)
        start_before, committed_before = _live_before(c)
        kept = conj(t.decode, negate(_in_place(c)))
        goal = [("ring_start after the step", implies(kept, c.mem.final("ring_start", (g, t.live_slot)) == start)),
                ("num_committed after the step",
                 implies(kept, c.mem.final("num_committed", (g, t.live_slot)) == committed))]
        folds = kernel_checkpoints(committed_before, c.ghost.query_len, c.geo.window)
        yield _claim(label, c, goal, conj(kept, folds, start_before > 0))


@obligation("postprocess.plan_contract", "postprocess",
            "every active plan meets replayssm_materialize's contract: ring start in [0, R), "
            "replay length in [0, W] and not above the committed rows FlashInfer's decode kernel left in the "
            "source's ring (from its trackers before the step); a decode plan starts at that window's ring start")
def plan_contract() -> Iterator[Claim]:
    for label, c in _cases(_align):
        t = c.trace
        start, flush = _plan_final(c)
        # The source's window after the step, as FlashInfer's decode kernel
        # left it from the trackers before the step (a prefill copy has none).
        window_start, window_committed = _window_after(c)
        source_committed = ite(t.decode, window_committed, 0)
        active = conj(t.group == 0, flush >= 0)
        source_start = ite(t.decode, window_start, 0)
        goal = [("contract", implies(active, materialize_plan_ok(start, flush, source_committed, c.geo))),
                ("replay starts at the source's ring start", implies(active, start == source_start))]
        yield _claim(label, c, goal, conj(active, t.decode, flush > 0))


@obligation("postprocess.plan_iff_publish", "postprocess",
            "group 0 leaves a row's plan active exactly when the row publishes by replay: a decode row "
            "crossing a boundary, or a prefill row ending on one whose destination is another column; "
            "every other row gets the empty plan (ring start 0, replay -1)")
def plan_iff_publish() -> Iterator[Claim]:
    for label, c in _cases(_align):
        t = c.trace
        start, flush = _plan_final(c)
        publishes = conj(t.wants_materialize, disj(t.decode, conj(t.prefill, t.live_col != t.boundary.dst_col)))
        quiet = conj(t.group == 0, negate(publishes))
        goal = [("plan active when publishing", implies(conj(t.group == 0, publishes), flush >= 0)),
                ("empty plan otherwise: ring start 0", implies(quiet, start == 0)),
                ("empty plan otherwise: replay -1", implies(quiet, flush == -1))]
        # Under live_col_is_last_block a prefill ending on a boundary has its live
        # column equal to the destination, so the prefill copy is never planned:
        # the witness is a decode publish.
        yield _claim(label, c, goal, conj(t.group == 0, t.decode, publishes))


@obligation("postprocess.replay_reaches_boundary", "postprocess",
            "the replay length equals aligned - P of the source checkpoint after the step, so the "
            "published state is exactly the state at the boundary; a prefill copy starts at the boundary")
def replay_reaches_boundary() -> Iterator[Claim]:
    for label, c in _cases(_align):
        t = c.trace
        after_step, refines = _refinement(c)
        # On the plan group 0 leaves in memory (what compaction and
        # replayssm_materialize read), not the value the program computed.
        _, flush = _plan_final(c)
        planner = t.group == 0
        goal = [("decode replay reaches aligned",
                 implies(conj(planner, t.decode, t.wants_materialize), flush == t.boundary.aligned - after_step)),
                ("prefill copy at the chunk's end",
                 implies(conj(t.prefill, t.wants_materialize),
                         t.boundary.aligned == c.ghost.computed_before + c.ghost.query_len))]
        yield _claim(label, c, goal, conj(planner, t.decode, t.wants_materialize), refines)


@obligation("postprocess.publish_canonical", "postprocess",
            "a published destination ends the step canonical: trackers (0, 0), at the block ending at aligned")
def publish_canonical() -> Iterator[Claim]:
    for label, c in _cases(_align):
        t, g = c.trace, c.trace.group
        goal = [
            ("destination ring_start 0", implies(t.materialize, c.mem.final("ring_start", (g, t.dst_slot)) == 0)),
            ("destination num_committed 0", implies(t.materialize, c.mem.final("num_committed", (g, t.dst_slot)) == 0)),
            ("destination block ends at aligned",
             implies(t.materialize, (t.boundary.dst_col + 1) * c.geo.block_size == t.boundary.aligned)),
        ]
        yield _claim(label, c, goal, conj(t.materialize, t.decode), strategy="whole_goal")


@obligation("postprocess.prefill_resets", "postprocess",
            "a prefill row leaves (0, 0) in every non-null slot of the columns it touched (align) or in "
            "its live slot (none); the touched columns include the live one and every block beginning in the chunk")
def prefill_resets() -> Iterator[Claim]:
    for label, c in _cases():
        t, g, b = c.trace, c.trace.group, c.trace.batch
        if c.conv.materialize_prefixes:
            col = named_int("touched_col")
            slot = c.mem.initial("block_table", (g, b, col))
            touched = conj(t.prefill, col >= t.first_col, col <= t.last_col, slot != c.geo.pad_slot)
            goal = [(f"touched {buf} reset", implies(touched, c.mem.final(buf, (g, slot)) == 0)) for buf in TRACKERS]
            goal.append(("live column touched", implies(conj(t.prefill, t.valid_live),
                                                        conj(t.live_col >= t.first_col, t.live_col <= t.last_col))))
            begins_in_chunk = conj(t.prefill, col * c.geo.block_size >= c.ghost.computed_before,
                                   col * c.geo.block_size < c.ghost.computed_before + c.ghost.query_len)
            goal.append(("every block the chunk begins is touched",
                         implies(begins_in_chunk, conj(col >= t.first_col, col <= t.last_col))))
            extra = [(env.SLOT_IN_CAPACITY.name, env.SLOT_IN_CAPACITY(slot, c.sizes.num_slots, c.geo.pad_slot))]
            cover = conj(touched, t.last_col > t.first_col, col != t.live_col)
        else:
            goal = [(f"live {buf} reset",
                     implies(conj(t.prefill, t.valid_live), c.mem.final(buf, (g, t.live_slot)) == 0))
                    for buf in TRACKERS]
            extra, cover = [], conj(t.prefill, t.valid_live)
        yield _claim(label, c, goal, cover, extra)


@obligation("postprocess.live_commit_refines", "postprocess",
            "the live slot a row commits is its block table's entry at the caller's live column; after a "
            "decode step it refines the request (P' + committed = N'), or it was published in place exactly "
            "at N' with trackers (0, 0)")
def live_commit_refines() -> Iterator[Claim]:
    for label, c in _cases():
        t, g = c.trace, c.trace.group
        caller_block = c.mem.initial("block_table", (g, t.batch, c.ghost.live_col))
        after_step, refines = _refinement(c)
        start = c.mem.final("ring_start", (g, t.live_slot))
        committed = c.mem.final("num_committed", (g, t.live_slot))
        in_place = _in_place(c)
        published, kept = conj(t.decode, in_place), conj(t.decode, negate(in_place))
        n_after = _decode_after(c)
        goal = [
            ("the live slot is the block of the caller's live column", implies(t.valid_live, t.live_slot == caller_block)),
            ("in place: ring_start 0", implies(published, start == 0)),
            ("in place: num_committed 0", implies(published, committed == 0)),
            ("in place: published at N'", implies(published, t.boundary.aligned == n_after)),
            ("refines: P' + num_committed = N'", implies(kept, after_step + committed == n_after)),
        ]
        cover = conj(t.decode, in_place) if c.conv.materialize_prefixes else t.decode
        yield _claim(label, c, goal, cover, refines)


@obligation("postprocess.plan_per_group", "postprocess",
            "only group 0 writes the shared plan; every group writes its own source and destination "
            "slot for each of its layers, or the pad id when nothing is published")
def plan_per_group() -> Iterator[Claim]:
    for label, c in _cases(_align):
        t, mem, geo = c.trace, c.mem, c.geo
        # (Stated on the stores: a program that makes none meets it.)
        goal = [(f"{name} only in group 0", implies(w.guard, t.group == 0))
                for name, w in _writes(c) if w.buffer in ("plan_ring_start", "plan_flush_count")]
        # Stated on the memory after the program, so a missing store fails it.
        layer = named_int("any_layer")
        base = mem.initial("packed_base", (t.group,))
        layers = mem.initial("num_layers", (t.group,))
        entry = base + packed_offset(layer, t.batch, geo)
        expected = {"src_slots": ite(t.materialize, t.live_slot, geo.pad_slot),
                    "dst_slots": ite(t.materialize, t.dst_slot, geo.pad_slot)}
        real = negate(c.trace.row.is_padding)
        for buffer, value in expected.items():
            goal.append((f"{buffer} after the step at every layer's entry",
                         implies(conj(real, layer >= 0, layer < layers), mem.final(buffer, (entry,)) == value)))
        yield _claim(label, c, goal, conj(real, t.materialize, t.group != 0, layers > 1))


@obligation("postprocess.frame", "postprocess",
            "a program stores only to its group's live, destination and prefill-touched slots, its own "
            "plan entry (group 0) and its group's packed entries for its row; a padding row only clears its plan")
def frame() -> Iterator[Claim]:
    for label, c in _cases():
        t, mem, geo = c.trace, c.mem, c.geo
        base = mem.initial("packed_base", (t.group,))
        layers = mem.initial("num_layers", (t.group,))
        real = negate(t.row.is_padding)
        parts = []
        for name, w in _writes(c):
            if w.buffer in TRACKERS:
                touched = [conj(v >= t.first_col, v <= t.last_col,
                                w.index[1] == mem.initial("block_table", (t.group, t.batch, v)))
                           for v in w.loop_vars]
                ok = conj(real, w.index[0] == t.group,
                          disj(w.index[1] == t.live_slot, w.index[1] == t.dst_slot, *touched))
            elif w.buffer in ("plan_ring_start", "plan_flush_count"):
                ok = conj(t.group == 0, w.index[0] == t.batch)
            else:
                ok = conj(real, disj(*[conj(v >= 0, v < layers,
                                            w.index[0] == base + packed_offset(v, t.batch, geo)) for v in w.loop_vars]))
            parts.append((f"{name} in the frame", implies(w.guard, ok)))
        yield _claim(label, c, parts, conj(t.prefill, t.last_col > t.first_col), strategy="whole_goal")


@obligation("postprocess.padding_rows", "postprocess",
            "a padding row (negative idx_mapping) gets the empty plan (ring start 0, replay -1) and nothing else")
def padding_rows() -> Iterator[Claim]:
    for label, c in _cases(lambda conv: conv.has_idx_mapping):
        t = c.trace
        start, flush = _plan_final(c)
        padding, plan_owner = t.row.is_padding, conj(t.row.is_padding, t.group == 0)
        goal = [("plan ring start 0", implies(plan_owner, start == 0)),
                ("plan cleared (replay -1)", implies(plan_owner, flush == -1))]
        goal += [(f"no {name}", implies(padding, negate(w.guard)))
                 for name, w in _writes(c) if w.buffer not in ("plan_ring_start", "plan_flush_count")]
        yield _claim(label, c, goal, conj(t.row.is_padding, t.group == 0))


@obligation("postprocess.memory_safety", "postprocess",
            "every table column, slot id, tracker index, plan entry and packed-table entry the program "
            "touches is in bounds")
def memory_safety() -> Iterator[Claim]:
    for label, c in _cases():
        goal = in_bounds(c.mem)
        yield _claim(label, c, goal, c.trace.wants_materialize if c.conv.materialize_prefixes else c.trace.decode,
                     strategy="whole_goal")


@obligation("postprocess.int32", "postprocess",
            "no integer intermediate of the program leaves int32, for max_model_len up to 2^30")
def int32() -> Iterator[Claim]:
    for label, c in _cases():
        goal = within_int32(c.intermediates)
        yield _claim(label, c, goal, c.trace.decode, strategy="whole_goal")


@obligation("postprocess.determinism", "postprocess",
            "no two programs of one launch store different values to one entry, and no program reads "
            "a tracker another one writes, when no other row writes a decode row's live slot")
def determinism() -> Iterator[Claim]:
    for gname, geo in GEOMETRIES.items():
        for conv, mode in MODES:
            p, q = program_pair(partial(postprocess_case, conv, geo, cache_mode=mode))
            yield _race_claim(f"{gname} {mode_label(conv, mode)}", p, q)


def _race_claim(label: str, p: PostprocessCase, q: PostprocessCase) -> Claim:
    pad = p.geo.pad_slot
    distinct = disj(p.trace.batch != q.trace.batch, p.trace.group != q.trace.group)
    aliasing = []
    for me, other in ((p, q), (q, p)):
        for w in other.mem.writes:
            if w.buffer in TRACKERS:
                same_group = conj(w.guard, w.index[0] == me.trace.group)
                aliasing.append((env.EXCLUSIVE_DECODE_LIVE_SLOT.name, implies(
                    same_group, env.EXCLUSIVE_DECODE_LIVE_SLOT(me.trace.live_slot, me.trace.decode, w.index[1], pad))))
    rows = [[c.mem.initial(buf, (c.trace.group,)) for buf in ("packed_base", "num_layers")] for c in (p, q)]
    (base_p, layers_p), (base_q, layers_q) = rows
    aliasing.append((env.PACKED_GROUPS_DISJOINT.name, env.PACKED_GROUPS_DISJOINT(
        base_p, layers_p, base_q, layers_q, p.geo.max_num_reqs, p.trace.group == q.trace.group)))
    shared_plan = conj(p.trace.group == q.trace.group, p.trace.decode, q.trace.prefill)
    return Claim(race_free(p.mem, q.mem), p.assumptions + q.assumptions + aliasing + [("distinct_programs", distinct)],
                 shared_plan, label, pair_show(p, q), [p.mem, q.mem], strategy="whole_goal")
