"""Obligations of the released (vLLM 0.33.0) lifecycle: its tracker programs and its Triton decode cursor.

Each tracker program (``spec/release_trackers.py``) runs as one symbolic lane
of its launch on :class:`.memory.SymbolicMemory`, beside the ghost of the
lane's slot (``spec/release_ghost.py``). The refinement obligations state:
if the slot refined the request before (the committed ring rows from
``ring_start`` hold the tokens after the checkpoint and end at the request's
position), then after FlashInfer's pass, the acceptance and the program, it
refines the request again. The caller behaviours they rely on are named
hypotheses from ``spec/release_caller.py``; each obligation has a
non-vacuity witness (its ``cover``). The programs are looked up on their
module at build time, so a test can plant a wrong one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from replayssm.spec import release_caller as caller
from replayssm.spec import release_trackers as trackers
from replayssm.spec.flashinfer import kernel_checkpoints
from replayssm.spec.release_cursor import decode_cursor
from replayssm.spec.release_ghost import (
    BufferGhost, RingGhost, accept, flashinfer_pass, flashinfer_reads_ok, pending_consistent, prefill, refines,
    trackers_in_range, window_row_holds,
    triton_decode, triton_reads_ok, triton_refines,
)
from replayssm.spec.release_trackers import ReleaseGeometry, TrackerTrace
from replayssm.spec.vocab import conj, ite, within

from .goals import in_bounds, race_free
from .memory import SymbolicMemory
from .obligation import Claim, PartName, obligation
from .terms import Fact, Sym, Symbolic, named_int

GEOMETRIES = {
    "W16 T4 R20": ReleaseGeometry(16, 4, 20),
    "W4 T2 R6": ReleaseGeometry(4, 2, 6),
    "W3 T3 R6": ReleaseGeometry(3, 3, 6),
}
"""Speculative (MTP) geometries the validator accepts: vLLM's non-power-of-two ring
(W = 16 with three draft tokens), a small one, and a query as long as the window."""

STP_GEOMETRIES = {
    "W16 T1 R17": ReleaseGeometry(16, 1, 17),
    "W4 T1 R5": ReleaseGeometry(4, 1, 5),
}
"""Single-token FlashInfer geometries (``R = W + 1``)."""

TRITON_CASES = (
    # (buffer_len L, block_size, align)
    (16, 1024, False),
    (4, 8, True),
    (16, 16, True),
    (4, 6, True),
)
"""Triton decode cursors: mode none, and align with a block a multiple of L, equal to it, and not a multiple."""


@dataclass
class LaneCase:
    """One symbolic lane of a tracker launch, the slot's ghost, and what is assumed of them."""

    geo: ReleaseGeometry
    mem: SymbolicMemory
    trace: TrackerTrace
    offset: Sym
    before: tuple[Sym, Sym, Sym]
    ghost: RingGhost
    assumptions: list[Fact]

    def show(self) -> dict[str, Any]:
        t = self.trace
        return {"row": self.offset, "slot": t.slot, "touched": t.valid, "ring_start": t.start,
                "prev_num_accepted": t.prev, "prev_query_len": t.pending, "accepted": t.accepted,
                "ring_start'": t.next_start, "prev_num_accepted'": t.next_prev, "prev_query_len'": t.next_pending,
                "checkpoint": self.ghost.checkpoint, "position": self.ghost.position}


def lane_case(transition: str, geo: ReleaseGeometry, program: str = "p", arrays: dict | None = None) -> LaneCase:
    """Lane ``offset_<program>`` of the ``transition`` launch (``reset``,
    ``advance``, ``commit``) over symbolic buffers, with the slot's ghost at rest."""
    n, states = named_int("n_slots"), named_int("num_states")
    shapes = {"state_batch_indices": (n,), "num_accepted_tokens": (named_int("accepted_len"),),
              "query_start_loc": (named_int("query_start_loc_len"),),
              **{b: (named_int(f"{b}_len"),) for b in trackers.TRACKERS}}
    mem = SymbolicMemory(shapes, arrays if arrays is not None else {}, program)
    offset = named_int(f"offset_{program}")
    trace = trackers.PROGRAMS[transition](mem, geo, offset, n, states)
    slot = trace.slot
    before = tuple(mem.initial(b, (slot,)) for b in trackers.TRACKERS)
    rows = tuple(named_int(f"ring_row_{program}_{k}") for k in range(geo.ring_len))
    ghost = RingGhost(named_int(f"checkpoint_{program}"), named_int(f"position_{program}"), rows)
    a: list[Fact] = [
        ("release_launch", conj(offset >= 0, n >= 1, states >= 1,
                                *[shapes[b][0] >= states for b in trackers.TRACKERS])),
    ]
    if transition == "commit":  # the only program that reads the row buffers
        a.append((caller.ROWS_COVERED.name, caller.ROWS_COVERED(n, shapes["num_accepted_tokens"][0],
                                                                shapes["query_start_loc"][0])))
    return LaneCase(geo, mem, trace, offset, before, ghost, a)  # type: ignore[arg-type]


def _rest(c: LaneCase) -> list[Fact]:
    """The pre-state invariant of the lane's slot: trackers in range and the refinement."""
    start, prev, pending = c.before
    return [("inv(pre): trackers in range", trackers_in_range(start, prev, pending, c.geo)),
            ("inv(pre): refinement", refines(c.ghost, start, prev, c.geo))]


def _after(c: LaneCase, g: RingGhost) -> list[tuple[PartName, Symbolic]]:
    t = c.trace
    return [("ring_start in [0, R) and prev_num_accepted in [0, W]",
             trackers_in_range(t.next_start, t.next_prev, 0, c.geo)),
            ("the committed rows end at the request's position", g.checkpoint + t.next_prev == g.position),
            *[(f"committed ring row {k} holds the token after the checkpoint's {k}",
               window_row_holds(g.rows, t.next_start, t.next_prev, g.checkpoint, c.geo.ring_len, k))
              for k in range(c.geo.ring_len)]]


def commit_claims(geo_cases: dict[str, ReleaseGeometry] = GEOMETRIES) -> Iterator[Claim]:
    """The delayed MTP commit: from a slot at rest whose pending query FlashInfer
    ran, once the row's accepted count is known and committed, the slot refines
    the request's new position and the trackers FlashInfer reads next are in its contract."""
    for label, geo in geo_cases.items():
        c = lane_case("commit", geo)
        t = c.trace
        start, prev, pending = c.before
        accepted = named_int("accepted")
        current = named_int("current_query_len")
        after = accept(_pass_or_rest(c.ghost, start, prev, pending, geo), ite(pending > 0, accepted, 0))
        reported = c.mem.initial("num_accepted_tokens", (c.offset,))
        qsl = [c.mem.initial("query_start_loc", (c.offset + k,)) for k in (0, 1)]
        hyps = c.assumptions + _rest(c) + [
            ("inv(pre): no committed rows without a pending query", pending_consistent(prev, pending)),
            ("release_ghost", t.valid),
            (caller.ACCEPTED_BY_ROW.name, caller.ACCEPTED_BY_ROW(reported, accepted)),
            (caller.ACCEPTED_IN_QUERY.name, caller.ACCEPTED_IN_QUERY(accepted, pending)),
            (caller.QUERY_IN_WINDOW.name, conj(qsl[1] - qsl[0] == current,
                                               caller.QUERY_IN_WINDOW(current, geo.query_len))),
            (caller.COMMIT_BEFORE_LAYERS.name, caller.COMMIT_BEFORE_LAYERS()),
        ]
        goal: list[tuple[PartName, Symbolic]] = _after(c, after) + [
            ("prev_query_len is the current query's length", t.next_pending == current),
            ("no committed rows without a pending query", pending_consistent(t.next_prev, t.next_pending)),
            ("FlashInfer's next read is inside its contract", flashinfer_reads_ok(t.next_start, t.next_prev, current,
                                                                                  geo)),
        ]
        cover = conj(t.valid, pending > 0, kernel_checkpoints(prev, pending, geo.window), accepted < pending)
        yield Claim(goal, hyps, cover, label, c.show(), [c.mem], strategy="preprocess_parts")


def _pass_or_rest(g: RingGhost, start: Symbolic, prev: Symbolic, pending: Symbolic, geo: ReleaseGeometry) -> RingGhost:
    """The slot's ghost after the pending query's pass, or unchanged when none is pending."""
    ran = flashinfer_pass(g, start, prev, pending, geo)
    some = pending > 0
    return RingGhost(ite(some, ran.checkpoint, g.checkpoint), g.position,
                     tuple(ite(some, r, o) for r, o in zip(ran.rows, g.rows)))


@obligation("release.commit.refinement", "release.commit",
            "0.33.0's delayed MTP commit (_commit_replayssm_ring_trackers_kernel): after FlashInfer ran the "
            "pending query and the row's accepted count arrives, the committed ring rows from ring_start stand "
            "for the request's new position, and FlashInfer's next read is in its contract")
def commit_refinement() -> Iterator[Claim]:
    yield from commit_claims()


def advance_claims(geo_cases: dict[str, ReleaseGeometry] = STP_GEOMETRIES) -> Iterator[Claim]:
    """The single-token advance after FlashInfer decoded one token on a slot at rest."""
    for label, geo in geo_cases.items():
        c = lane_case("advance", geo)
        t = c.trace
        start, prev, _ = c.before
        after = accept(flashinfer_pass(c.ghost, start, prev, 1, geo), 1)
        hyps = c.assumptions + _rest(c) + [
            ("release_ghost", t.valid),
            (caller.STP_ONE_TOKEN.name, caller.STP_ONE_TOKEN(1)),
            (caller.ADVANCE_AFTER_LAYERS.name, caller.ADVANCE_AFTER_LAYERS()),
        ]
        goal: list[tuple[PartName, Symbolic]] = _after(c, after) + [("prev_query_len unchanged", c.mem.final("prev_query_len", (t.slot,)) == c.before[2])]
        yield Claim(goal, hyps, conj(t.valid, kernel_checkpoints(prev, 1, geo.window)), label, c.show(), [c.mem])


@obligation("release.advance.refinement", "release.advance",
            "0.33.0's single-token advance (_update_replayssm_ring_trackers_kernel, RESET off): after FlashInfer "
            "decoded one token, the committed ring rows from ring_start stand for the request's new position")
def advance_refinement() -> Iterator[Claim]:
    yield from advance_claims()


def reset_claims(geo_cases: dict[str, ReleaseGeometry] = GEOMETRIES) -> Iterator[Claim]:
    """The reset after a prefill: the slot refines the prefilled request with no
    committed rows, and no speculative query is pending (so the next commit adds nothing)."""
    for label, geo in {**geo_cases, **STP_GEOMETRIES}.items():
        c = lane_case("reset", geo)
        t = c.trace
        computed = named_int("computed")
        after = prefill(c.ghost, computed)
        final = [c.mem.final(b, (t.slot,)) for b in trackers.TRACKERS]
        hyps = c.assumptions + [("release_ghost", t.valid),
                                (caller.RESET_ON_PREFILL.name, caller.RESET_ON_PREFILL())]
        goal: list[tuple[PartName, Symbolic]] = [("ring_start in [0, R) and prev_num_accepted in [0, W]",
                 trackers_in_range(final[0], final[1], final[2], geo)),
                ("the committed ring rows stand for the request's position", refines(after, final[0], final[1], geo)),
                ("no speculative query pending after a prefill", final[2] == 0),
                ("no committed rows without a pending query", pending_consistent(final[1], final[2]))]
        yield Claim(goal, hyps, t.valid, label, c.show(), [c.mem])


@obligation("release.reset.refinement", "release.reset",
            "0.33.0's reset (_update_replayssm_ring_trackers_kernel, RESET on): after a prefill the slot stands "
            "for the prefilled request with no committed rows and no pending speculative query")
def reset_refinement() -> Iterator[Claim]:
    yield from reset_claims()


@obligation("release.memory_safety", "release",
            "every entry the three 0.33.0 tracker programs load or store is in bounds")
def memory_safety() -> Iterator[Claim]:
    for transition in trackers.PROGRAMS:
        geo = GEOMETRIES["W16 T4 R20"] if transition != "advance" else STP_GEOMETRIES["W16 T1 R17"]
        c = lane_case(transition, geo)
        yield Claim(in_bounds(c.mem), c.assumptions, c.trace.valid, transition, c.show(), [c.mem],
                    strategy="whole_goal")


@obligation("release.determinism", "release",
            "no two lanes of one 0.33.0 tracker launch store different values to one tracker entry or read "
            "another's stores, when rows name distinct slots")
def determinism() -> Iterator[Claim]:
    for transition in trackers.PROGRAMS:
        geo = GEOMETRIES["W4 T2 R6"] if transition != "advance" else STP_GEOMETRIES["W4 T1 R5"]
        arrays: dict = {}
        p, q = lane_case(transition, geo, "p", arrays), lane_case(transition, geo, "q", arrays)
        hyps = p.assumptions + q.assumptions + [
            (caller.DISTINCT_SLOTS.name, caller.DISTINCT_SLOTS(p.trace.slot, q.trace.slot, geo.pad)),
            ("distinct_programs", p.offset != q.offset)]
        goal = race_free(p.mem, q.mem, trackers.TRACKERS)
        yield Claim(goal, hyps, conj(p.trace.valid, q.trace.valid), transition,
                    {**{f"p.{k}": v for k, v in p.show().items()}, **{f"q.{k}": v for k, v in q.show().items()}},
                    [p.mem, q.mem])


def triton_claims(cases: tuple[tuple[int, int, bool], ...] = TRITON_CASES, cursor=decode_cursor) -> Iterator[Claim]:  # type: ignore[no-untyped-def]
    """The Triton decode of one token at the CPU cursor: it reads the state of
    the tokens before it, and the invariant holds for the next token."""
    for buffer_len, block_size, align in cases:
        label = f"L{buffer_len} block {block_size} {'align' if align else 'none'}"
        nc, base, cp = named_int("num_computed"), named_int("decode_base"), named_int("checkpoint")
        ghost = BufferGhost(cp, tuple(named_int(f"buffer_row_{k}") for k in range(buffer_len)))
        cur = cursor(nc, 1, base, buffer_len, block_size, align)
        after = triton_decode(ghost, cur, nc)
        hyps = [("release_launch", conj(nc >= 0, base >= 1)),
                (caller.TRITON_EXACT_LENGTHS.name, caller.TRITON_EXACT_LENGTHS(1)),
                (caller.DECODE_BASE_AT_ADMISSION.name, caller.DECODE_BASE_AT_ADMISSION()),
                ("inv(pre): the Triton buffer refines the request",
                 triton_refines(ghost, nc, base, buffer_len, block_size, align))]
        goal: list[tuple[PartName, Symbolic]] = [("the cursor is a row of the buffer", within(cur.write_pos, 0, buffer_len - 1)),
                ("the decode reads the state of the tokens before it", triton_reads_ok(ghost, cur, nc)),
                ("the buffer refines the request after the token",
                 triton_refines(after, nc + 1, base, buffer_len, block_size, align))]
        show = {"num_computed": nc, "decode_base": base, "checkpoint": cp, "write_pos": cur.write_pos,
                "is_flush": cur.is_flush, "anchor": cur.anchor}
        yield Claim(goal, hyps, conj(cur.is_flush, cur.write_pos > 0), label, show)


@obligation("release.triton_cursor.refinement", "release.triton_cursor",
            "0.33.0's Triton decode cursor (mamba_attn.py: write_pos and is_flush from the CPU decode count): "
            "each decode reads the checkpoint and the rows of the tokens before it, and the buffer keeps standing "
            "for the request")
def triton_cursor_refinement() -> Iterator[Claim]:
    yield from triton_claims()
