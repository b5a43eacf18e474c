"""The caller assumptions about vLLM's scheduler and block pool across requests, cache groups and steps.

Scope ``system`` (``spec/assumption_record.py``): which blocks a launch's
rows name, in every group, and what the scheduler's block copy carries when
a live column moves. The last two are kept by the system model's step by
construction (``built_in``), and a review's caller model breaks them when a
probe drops them (``caller_breaks``).
"""

from __future__ import annotations

from .assumption_record import SYSTEM, Assumption, CallerBreak, Reach, ScheduledRow
from .geometry import Conventions, Geometry
from .provenance import C1, HOST, PAGE, T1, T5, T6, cite, contradicted, guaranteed, not_guaranteed
from .vocab import Cond, Value, conj, disj, implies


def _exclusive_decode_live_slot(live_slot: Value, decode: Cond, other_written_slot: Value, pad: Value) -> Cond:
    return implies(conj(decode, live_slot != pad), other_written_slot != live_slot)


EXCLUSIVE_DECODE_LIVE_SLOT = Assumption(
    "exclusive_decode_live_slot",
    "within one launch and group, no other row writes the trackers of a decode row's live slot",
    _exclusive_decode_live_slot,
    guaranteed(
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "vLLM's block manager maps distinct live columns to distinct allocated blocks."),
    ),
    scope=SYSTEM,
)


def _fresh_distinct_destinations(dst_slot: Value, other_src_or_dst: Value, pad: Value) -> Cond:
    return implies(dst_slot != pad, dst_slot != other_src_or_dst)


FRESH_DISTINCT_DESTINATIONS = Assumption(
    "fresh_distinct_destinations",
    "within one migration launch and group, a destination slot is no other row's source or destination",
    _fresh_distinct_destinations,
    guaranteed(
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "distinct live columns (a fresh destination is one) map to distinct physical blocks."),
    ),
    scope=SYSTEM,
)


def _distinct_slots_in_row(slot_a: Value, slot_b: Value, col_a: Value, col_b: Value, pad: Value) -> Cond:
    return implies(conj(col_a != col_b, slot_a != pad), slot_a != slot_b)


DISTINCT_SLOTS_IN_ROW = Assumption(
    "distinct_slots_in_row",
    "the non-null slots of one block-table row are pairwise distinct",
    _distinct_slots_in_row,
    contradicted(
        "vLLM's own model-wide test names one physical block in two columns of a row (a live column moved "
        "while the block stays), and C1's comment promises distinct blocks for distinct live columns only: "
        "vLLM would have to promise distinct blocks for every column of a row, and its test shows it does not. "
        "Every review campaign draws it where no column is published (a host that does not publish prefixes, "
        "its live column moving): a published column aliasing the live block would take the live state with it "
        "under vLLM's own postprocess, so vLLM cannot alias there unless its runner skips that publish, which "
        "the corpus does not show",
        cite(T5, "block_tables[0][0, 1] = block_tables[0][0, 0]",
             "vLLM's test aliases columns 0 and 1 of a row to one block in one cache group ..."),
        cite(T5, "def test_modelwide_replayssm_copies_only_reassigned_cache_group(monkeypatch):",
             "... and moves the live column from 0 to 1: that group copies nothing, the other group copies."),
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "the block manager's promise is about distinct live columns, not every column of a row."),
        cite(PAGE, "# When dst_slot aliases live_slot, these stores intentionally supersede the",
             "the reference's postprocess makes a published block that is the live block canonical: a live "
             "block aliased by a column it publishes loses the live replay."),
    ),
    scope=SYSTEM,
    behavioural=True,
    caller_draws=(("aliased_live_moves", True),),
)


def _every_token_a_boundary(g: Geometry) -> bool:
    """Blocks of one token: every decode publishes in place, so the step that gives a request's live
    column the null block in one group also publishes it in the others, where a version that decides
    a row's work from one group (D's flush plan, written by group 0) shows it."""
    return g.block_size == 1


def _groups_agree_on_null(null_in_group: list[Value]) -> Cond:
    return conj(*[x == 0 for x in null_in_group])


GROUPS_AGREE_ON_NULL = Assumption(
    "groups_agree_on_null",
    "groups agree on null slots: a scheduled request's live column is a real block in every cache group "
    "(no group hands it the null block while another gives it a real one)",
    _groups_agree_on_null,
    not_guaranteed(
        "vLLM's scheduler would have to promise that a request's live column is a real block in every cache "
        "group or in none; the reference says groups share logical columns but are given their own slots, and "
        "vLLM's own test schedules a row whose live column is null",
        cite(PAGE, "# transitions. The scheduler still assigns each group its own slots.",
             "groups share logical columns while each group gets its own physical slots."),
        cite(T1, "# Rows 2 and 3 exercise padded physical slots and padded request indices.",
             "vLLM's test schedules a request whose live column holds the null block."),
    ),
    scope=SYSTEM,
    caller_breaks=CallerBreak(
        "a request's newly allocated live column gets the null block in one cache group and real blocks in the "
        "others (its state in that group is lost: it leaves at the next step)",
        lambda s: s.live_null_in_some_groups, dropped=(("null_live_groups", True),)),
    reach=Reach(geometry=_every_token_a_boundary),
)


def _fresh_slot_is_free(ref: Value) -> Cond:
    return ref == 0


def _publishing_host_with_live_columns(c: Conventions) -> bool:
    """A host whose requests hold published blocks before their live column (align mode, live columns given)."""
    return c.materialize_prefixes and not c.live_col_is_zero


FRESH_SLOT_IS_FREE = Assumption(
    "fresh_slot_is_free",
    "a newly allocated block is referenced by no block table (the pool hands out only free blocks)",
    _fresh_slot_is_free,
    not_guaranteed(
        "vLLM's block pool would have to promise that a newly allocated block is in no block table; the corpus "
        "holds no block-pool code (C1's comment speaks of distinct live columns only)",
        cite(C1, "# BlockManager guarantees that distinct live columns map to allocated,",
             "the block manager's promise covers distinct live columns, not a fresh block versus every table."),
    ),
    scope=SYSTEM,
    caller_breaks=CallerBreak(
        "a prefill chunk's newly allocated live block is one that another running request's block table still "
        "names before its live column (a prefix block it holds, which no launch of the step reads for it): the "
        "chunk overwrites that block's state and trackers", lambda s: s.live_block_taken, dropped=(("taken_live_blocks", True),)),
    reach=Reach(_publishing_host_with_live_columns, model_blocks=3),
)


def _publishing_host(c: Conventions) -> bool:
    return c.materialize_prefixes


def _move_without_trackers(s: ScheduledRow) -> bool:
    return s.moves_between_blocks and not s.trackers_copied


def _moved_block_carries(moved: Cond, carried: Cond) -> Cond:
    return implies(moved, carried)


LIVE_MOVE_COPIES_STATE = Assumption(
    "live_move_copies_state",
    "when a request's live column moves to another real block, the scheduler's block copy puts the old block's "
    "state and replay ring into the new one (copy-on-write)",
    _moved_block_carries,
    guaranteed(
        cite(T6, "assert spec.requires_live_state_copy",
             "in align mode vLLM's Mamba cache spec asks the scheduler to copy the live state when it moves."),
        cite(T6, "assert torch.equal(raw[1], before[0])",
             "the block copy 0 -> 1 copies the packed state and ring pages."),
    ),
    ("spec/system/step.py",),
    scope=SYSTEM,
    reach=Reach(_publishing_host),
    caller_breaks=CallerBreak(
        "a live column that moves to another real block keeps that block's old state and ring: no state copy on "
        "the move", lambda s: s.moves_between_blocks, dropped=(("state_copies", False),), restored_by="copies"),
)


BLOCK_COPY_MOVES_TRACKERS = Assumption(
    "block_copy_moves_trackers",
    "the scheduler's block copy of a moved live block carries its trackers (ring_start, num_committed) with its "
    "state and ring",
    _moved_block_carries,
    guaranteed(
        cite(HOST, "Collect FlashInfer ReplaySSM state for scheduler block copies.",
             "vLLM's host module adds ReplaySSM state, trackers included, to the scheduler's block copies."),
        cite(T6, "t[1] = t[0]", "vLLM's test of the block copy 0 -> 1 expects the tracker entries copied too."),
        cite(PAGE, "Include shared trackers in scheduler block copies alongside packed pages.",
             "the reference's block-copy tensor list holds the trackers."),
    ),
    ("spec/system/step.py",),
    scope=SYSTEM,
    reach=Reach(_publishing_host),
    caller_breaks=CallerBreak(
        "the scheduler's block copy of a moved live block carries its state and ring, not its trackers",
        _move_without_trackers, kept=(("tracker_copies", "every"),), dropped=(("tracker_copies", "none"),),
        restored_by="copies"),
)
