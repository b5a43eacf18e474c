"""Planted bugs: each one breaks a spec transition (or, for
``max_model_len_up_to_int32_max``, the caller contract a transition relies
on), and every obligation its ``caught_by`` names must then fail with a
counterexample; where ``shows`` says so, one that names the violated goal part
and/or whose values show the bug (every per-kernel goal is a list of named
parts). An obligation suite that proves a buggy spec has no teeth.

A bug is planted with ``monkeypatch``: either a module attribute is replaced
(``checkpoint_decision``, ``cmod``, the boundary helper, a limit of
``spec.assumptions``) or a transition is recompiled from its own source with
exactly one snippet replaced (:func:`mutant`; it asserts the snippet occurs
exactly once, so a spec edit that removes it fails here loudly instead of
silently planting nothing).

``verify.postprocess_proofs`` caches symbolic programs in ``_CACHE``; every
test starts from an empty cache so that the patched spec is re-evaluated, and
the modules that imported a transition by name (``verify.scenarios``,
``verify.compaction_proofs``, ``verify.migration_proofs``,
``verify.boundary_proofs``) are patched alongside the spec module.

Bugs that no obligation caught when this file was written (gaps in the
obligation set) are listed in ``GAPS``, each shown to be caught by a
hand-computed oracle case; those an obligation now catches name it in
``closed_by`` and are tested like the other planted bugs (every gap is
closed now).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import z3

import replayssm.spec.assumptions as A
import replayssm.spec.boundary as B
import replayssm.spec.compaction as C
import replayssm.spec.launch as L
import replayssm.spec.migration as MG
import replayssm.spec.postprocess as P
import replayssm.spec.row_assumptions as RA
import replayssm.verify.postprocess_proofs as pp
import replayssm.verify.scenarios as S
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.vocab import INT32_MAX, INT32_MIN
from replayssm.verify.obligation import REGISTRY, prove
from replayssm.verify.terms import Sym

# --------------------------------------------------------------------------------------
# planting machinery
# --------------------------------------------------------------------------------------


def mutant(module, name: str, old: str, new: str) -> Callable:
    """``module.name`` recompiled from its source with ``old`` replaced by ``new``."""
    fn = getattr(module, name)
    src = inspect.getsource(fn)
    assert src.count(old) == 1, f"snippet to mutate occurs {src.count(old)} times in {module.__name__}.{name}: {old!r}"
    ns = dict(vars(module))
    exec(compile(src.replace(old, new), f"<mutant of {module.__name__}.{name}>", "exec"), ns)
    return ns[name]


Patch = list[tuple[object, str, object]]


def _proof_modules(kind: str) -> list:
    import importlib

    names = {"compaction": ["replayssm.verify.compaction_proofs"],
             "migration": ["replayssm.verify.migration_proofs"],
             "boundary": ["replayssm.verify.boundary_proofs"]}[kind]
    return [importlib.import_module(n) for n in names]


def program(old: str, new: str) -> Callable[[], Patch]:
    """A one-line mutant of ``postprocess_program``, everywhere it is imported."""
    def build() -> Patch:
        f = mutant(P, "postprocess_program", old, new)
        return [(P, "postprocess_program", f), (S, "postprocess_program", f), (L, "postprocess_program", f)]
    return build


def decode(old: str, new: str) -> Callable[[], Patch]:
    return lambda: [(P, "decode_row", mutant(P, "decode_row", old, new))]


def commit(old: str, new: str) -> Callable[[], Patch]:
    return lambda: [(P, "commit_trackers", mutant(P, "commit_trackers", old, new))]


def boundary_shift(**delta: int) -> Callable[[], Patch]:
    """The postprocess program sees ``mamba_state_copy_boundary`` with fields shifted."""
    original = B.mamba_state_copy_boundary

    def shifted(running_pos, new_computed, block_size):
        b = original(running_pos, new_computed, block_size)
        return dataclasses.replace(b, **{k: getattr(b, k) + d for k, d in delta.items()})

    return lambda: [(P, "mamba_state_copy_boundary", shifted)]


def boundary_mutant(old: str, new: str) -> Callable[[], Patch]:
    def build() -> Patch:
        f = mutant(B, "mamba_state_copy_boundary", old, new)
        return [(B, "mamba_state_copy_boundary", f), (P, "mamba_state_copy_boundary", f)] + [
            (m, "mamba_state_copy_boundary", f) for m in _proof_modules("boundary")]
    return build


def compaction(old: str, new: str) -> Callable[[], Patch]:
    def build() -> Patch:
        f = mutant(C, "compact_program", old, new)
        return [(C, "compact_program", f), (L, "compact_program", f)] + [
            (m, "compact_program", f) for m in _proof_modules("compaction")]
    return build


def migration(old: str, new: str) -> Callable[[], Patch]:
    def build() -> Patch:
        f = mutant(MG, "migrate_program", old, new)
        return [(MG, "migrate_program", f), (S, "migrate_program", f), (L, "migrate_program", f)] + [
            (m, "migrate_program", f) for m in _proof_modules("migration") if hasattr(m, "migrate_program")]
    return build


def slot_lookup(old: str, new: str) -> Callable[[], Patch]:
    """A one-line mutant of the migration's column-to-slot lookup (``migrate_program``
    calls it through its module, so patching the module plants it everywhere)."""
    return lambda: [(MG, "_slot_at", mutant(MG, "_slot_at", old, new))]


def _bitmask_mod(a, b):
    """``a & (b - 1)``: the power-of-two shortcut, wrong for R = 20."""
    if isinstance(a, Sym) or isinstance(b, Sym):
        za = a.z if isinstance(a, Sym) else z3.IntVal(a)
        zm = (b - 1).z if isinstance(b, Sym) else z3.IntVal(b - 1)
        return Sym(z3.BV2Int(z3.Int2BV(za, 32) & z3.Int2BV(zm, 32)))
    return a & (b - 1)


def plant(monkeypatch: pytest.MonkeyPatch, build: Callable[[], Patch]) -> None:
    monkeypatch.setattr(pp, "_CACHE", {})
    for module, attr, value in build():
        monkeypatch.setattr(module, attr, value)


Check = str | Callable[[dict], bool]
Expect = Check | tuple[Check, ...]
"""What a failing obligation's counterexample must show: a goal part it names
as violated (a substring of one ``violated`` entry), a predicate on the whole
counterexample (its ``case``, ``values`` and ``accesses``) where the values
show more than the part's name, or a tuple of both (each must hold). A name
check says which part fails only where the goal has several parts (and must
then be one part's name, not a substring that matches all of them); for a
goal of one part, as ``postprocess.mirror``'s, it adds nothing to "failed"."""


def _check(bug: str, name: str, ce: dict, expect: Check) -> None:
    if isinstance(expect, str):
        assert any(expect in v for v in ce["violated"]), (bug, name, expect, ce["violated"])
    else:
        assert expect(ce), (bug, name, ce)


def assert_caught(bug: str, names: list[str] | tuple[str, ...], shows: dict[str, Expect]) -> None:
    """Every named obligation fails under the planted bug, with a counterexample
    that shows what ``shows`` asks of it."""
    assert names and set(shows) <= set(names), (bug, names, sorted(shows))
    for name in names:
        assert name in REGISTRY, f"unknown obligation {name}"
        r = prove(REGISTRY[name])
        assert r.status == "failed", f"planted bug {bug}: {name} {r.status} {r.detail}"
        ce = r.counterexample
        assert ce and (ce.get("values") or ce.get("accesses") or ce.get("violated")), (bug, name, r.detail)
        expect = shows.get(name)
        for check in expect if isinstance(expect, tuple) else (() if expect is None else (expect,)):
            _check(bug, name, ce, check)


@dataclass(frozen=True)
class Bug:
    id: str
    build: Callable[[], Patch]
    caught_by: list[str]
    """Obligations that must each fail under the bug (all of them, not the first)."""
    shows: dict[str, Expect] = field(default_factory=dict)


# predicates on counterexamples, for what a violated part's name does not say


def _accessed(ce: dict, kind: str, buffer: str) -> list[int]:
    return [a["value"] for a in ce["accesses"] if a["kind"] == kind and a["buffer"] == buffer]


def _ring_start_read_overflows_ring(ce: dict) -> bool:
    """The live slot's ring start, read as its committed count, plus the row's
    length passes the ring's end."""
    v = ce["values"]
    return v["prefilling"] is False and any(
        s + v["query_len"] > v["RING_BUFFER_LEN"] for s in _accessed(ce, "read", "ring_start"))


def _block_rounding_overflows(ce: dict) -> bool:
    """Rounding the row's end up to its block (``computed_after + bs - 1``,
    for the last column a chunk touched) leaves int32 at ``computed_after + bs``."""
    v = ce["values"]
    return any(n.startswith("int32:") for n in ce["violated"]) and \
        v["computed_after"] + v["MAMBA_BLOCK_SIZE"] > INT32_MAX


def _none_column_overflows(ce: dict) -> bool:
    """A column read as -2^31 (negative: none) and decoded 1-based."""
    return any(n.startswith("int32:") for n in ce["violated"]) and any(
        a["kind"] == "read" and a["buffer"] in ("src_cols", "dst_cols") and a["value"] == INT32_MIN
        for a in ce["accesses"])


# --------------------------------------------------------------------------------------
# planted bugs, each with the obligations that must catch it
# --------------------------------------------------------------------------------------

POSTPROCESS_BUGS = [
    Bug("checkpoint_uses_ge",
        lambda: [(P, "checkpoint_decision", lambda c, r, w: c + r >= w)],
        ["postprocess.mirror"]),
    Bug("bias_without_plus_one", boundary_shift(bias=-1),
        ["postprocess.replay_reaches_boundary"]),
    Bug("dst_col_off_by_one", boundary_shift(dst_col=1),
        ["postprocess.publish_canonical", "postprocess.memory_safety"]),
    Bug("replay_drops_committed_term",
        program("boundary.bias + 1 + ite(commit.checkpointed, 0, commit.old_committed)", "boundary.bias + 1"),
        ["postprocess.replay_reaches_boundary"]),
    Bug("every_group_writes_plan",
        program("writes_plan = group == 0", "writes_plan = True"),
        ["postprocess.plan_per_group", "postprocess.determinism"]),
    Bug("align_prefill_resets_live_column_only",
        program("for col in mem.each(first_col, last_col + 1, prefill):",
                "for col in mem.each(live_col, live_col + 1, prefill):"),
        ["postprocess.prefill_resets"]),
    Bug("none_mode_prefill_keeps_trackers",
        program('mem.store("ring_start", (group, live_slot), 0, conj(prefill, valid_live))', "pass"),
        ["postprocess.prefill_resets"]),
    Bug("publish_leaves_committed",
        program('mem.store("num_committed", (group, dst_slot), 0, materialize)', "pass"),
        ["postprocess.publish_canonical"]),
    Bug("cumulative_metadata_wrong_row",
        decode('"query_metadata", (batch + 1,), real', '"query_metadata", (batch + 2,), real'),
        ["postprocess.conventions_agree", "postprocess.memory_safety"]),
    Bug("post_step_subtracts_accepted",
        decode("computed_before = computed - query_len if conv.post_step else computed",
               "computed_before = computed - imax(mem.load('num_accepted_tokens', (req,), real), 1) "
               "if conv.post_step else computed"),
        ["postprocess.conventions_agree", "postprocess.prefill_resets"]),
    # The stored count drops the committed rows. The plan is computed from the
    # count the commit read, so it is right for the ring FlashInfer left, and
    # plan_contract (stated against that ring) proves; it failed only while it
    # took the program's own commit for the source's committed rows.
    Bug("commit_forgets_old_committed",
        commit("ite(checkpointed, accepted, old_committed + accepted)", "accepted"),
        ["postprocess.live_commit_refines", "postprocess.window_mirror"],
        {"postprocess.live_commit_refines": "refines", "postprocess.window_mirror": "num_committed after the step"}),
    Bug("packed_stride_is_layer_count",
        program("pointer_add(base, packed_offset(layer, batch, geo))", "pointer_add(base, layer * layers + batch)"),
        ["postprocess.plan_per_group", "postprocess.frame", "postprocess.determinism"]),
    Bug("prefill_skips_first_column",
        lambda: [(P, "prefill_columns",
                  lambda row, bs, _f=P.prefill_columns: (_f(row, bs)[0] + 1, _f(row, bs)[1]))],
        ["postprocess.prefill_resets"]),
    # A decode row whose live column holds the null block commits the null
    # block's trackers, which every such row shares. memory_safety used to
    # fail too, but only for a pool without slots (the null id 0 out of
    # bounds); the sizes now assume the pool holds the null block.
    Bug("null_live_slot_is_valid",
        program("valid_live = conj(valid_live_col, live_slot != pad)", "valid_live = valid_live_col"),
        ["postprocess.determinism"], {"postprocess.determinism": "write-write"}),
    # A prefill row's live slot gets the decode commit's count over its reset,
    # and a real row whose live column is null writes the null block's. The
    # count stays in [0, W] and the slot is the row's live slot, which the
    # program may write, so tracker_range and frame prove; memory_safety
    # failed only for a pool without slots (see null_live_slot_is_valid).
    Bug("commit_ignores_decode_guard",
        program('mem.store("num_committed", (group, live_slot), commit.next_committed, decode)',
                'mem.store("num_committed", (group, live_slot), commit.next_committed, real)'),
        ["postprocess.prefill_resets", "postprocess.determinism"],
        {"postprocess.prefill_resets": "num_committed reset", "postprocess.determinism": "num_committed write-write"}),
    # The commit reads the live slot's trackers into each other's place. The
    # obligations that describe the commit state it against the trackers in
    # memory before the step (what FlashInfer's decode kernel read), so they
    # all see it; capacity, the program's own accounting, sees a ring start
    # near R taken as the committed count leave no room for the appended rows.
    Bug("commit_reads_trackers_swapped",
        program('mem.load("ring_start", (group, live_slot), decode),\n        mem.load("num_committed", (group, live_slot), decode),',
                'mem.load("num_committed", (group, live_slot), decode),\n        mem.load("ring_start", (group, live_slot), decode),'),
        ["postprocess.capacity", "postprocess.mirror", "postprocess.window_mirror", "postprocess.plan_contract",
         "postprocess.replay_reaches_boundary", "postprocess.live_commit_refines"],
        {"postprocess.capacity": ("committed read + T_row <= R", _ring_start_read_overflows_ring),
         "postprocess.mirror": "host checkpoints iff FlashInfer does",
         "postprocess.window_mirror": "ring_start after the step",
         "postprocess.plan_contract": "contract",
         "postprocess.replay_reaches_boundary": "decode replay reaches aligned",
         "postprocess.live_commit_refines": "refines"}),
    Bug("checkpoint_start_not_wrapped",
        commit("cmod(old_start + old_committed, geo.ring_len)", "old_start + old_committed"),
        ["postprocess.tracker_range", "postprocess.window_mirror", "postprocess.plan_contract"],
        {"postprocess.tracker_range": "ring_start store (commit)",
         "postprocess.window_mirror": "ring_start after the step", "postprocess.plan_contract": "contract"}),
    # The kernel returns early for a padding row before clearing its plan (the
    # real kernel clears it first): the row keeps last step's replay length,
    # and compaction hands FlashInfer a stale copy.
    Bug("padding_row_keeps_stale_plan",
        program('mem.store("plan_flush_count", (batch,), -1, writes_plan)',
                'mem.store("plan_flush_count", (batch,), -1, '
                'conj(writes_plan, mem.load("idx_mapping", (batch,)) >= 0 if conv.has_idx_mapping else True))'),
        ["postprocess.padding_rows", "postprocess.plan_iff_publish", "postprocess.plan_contract"],
        {"postprocess.padding_rows": "plan cleared", "postprocess.plan_iff_publish": "replay -1",
         "postprocess.plan_contract": "contract"}),
    # The live slot is looked up one column early. Every goal about the commit
    # reads memory at the program's own live slot, so only the part tying
    # that slot to the caller's live column sees it.
    Bug("live_slot_from_previous_column",
        program('live_slot = mem.load("block_table", (group, batch, live_col), valid_live_col, other=pad)',
                'live_slot = mem.load("block_table", (group, batch, live_col - 1), valid_live_col, other=pad)'),
        ["postprocess.live_commit_refines"],
        {"postprocess.live_commit_refines": "the live slot is the block of the caller's live column"}),
    # The program computes the right replay length but stores one row less:
    # the goal stated on the computed value (t.plan_flush) proved it; it is
    # stated on the plan left in memory now. plan_contract proves (a shorter
    # replay stays within the committed rows).
    Bug("plan_stores_replay_one_row_short",
        program('mem.store("plan_flush_count", (batch,), plan_flush, conj(decode, wants_materialize, writes_plan))',
                'mem.store("plan_flush_count", (batch,), plan_flush - 1, conj(decode, wants_materialize, writes_plan))'),
        ["postprocess.replay_reaches_boundary"],
        {"postprocess.replay_reaches_boundary": "decode replay reaches aligned"}),
    # No source slot is written to the packed table: FlashInfer copies from
    # whatever the entry held. The per-layer goal built from the program's
    # stores had no part for it (vacuous); it is stated on the tables after the
    # step now. frame and memory_safety are about the stores made, and prove.
    Bug("packed_src_slots_not_stored",
        program('mem.store("src_slots", (entry,), ite(materialize, live_slot, pad))', "pass"),
        ["postprocess.plan_per_group"],
        {"postprocess.plan_per_group": "src_slots after the step"}),
    # The caller contract caps max_model_len at INT32_MAX ("every position fits
    # int32") instead of 2^30: rounding a chunk's end up to its block overflows.
    Bug("max_model_len_up_to_int32_max",
        lambda: [(RA, "MAX_MODEL_LEN_LIMIT", INT32_MAX)],  # where int32_sizes reads it
        ["postprocess.int32"], {"postprocess.int32": _block_rounding_overflows}),
    # The kernel reads live_cols only while it publishes, taking column 0
    # otherwise: the model's old rule for every unpublished mode (vLLM #55688's
    # class of bug). Mode none's live column is 0, so only all mode under the
    # reference's host (live columns given, MATERIALIZE_PREFIXES off) shows it:
    # the commit lands on column 0's slot, not the live one.
    Bug("live_col_zero_when_unpublished",
        program("live_col = 0 if conv.live_col_is_zero else",
                "live_col = 0 if conv.live_col_is_zero or not conv.materialize_prefixes else"),
        ["postprocess.live_commit_refines"],
        {"postprocess.live_commit_refines": ("the live slot is the block of the caller's live column",
                                             lambda ce: ce["case"].endswith("/none/live in all"))}),
]

OTHER_BUGS = [
    Bug("compaction_strict_gt",
        compaction("flush >= 0", "flush > 0"), ["compaction.work_list"]),
    Bug("compaction_ignores_num_reqs",
        compaction("is_active = conj(in_capacity, lane < num_reqs, flush >= 0)",
                   "is_active = conj(in_capacity, flush >= 0)"), ["compaction.work_list"]),
    Bug("compaction_tail_off_by_one",
        compaction("lane >= count", "lane > count"), ["compaction.work_list"]),
    Bug("compaction_tail_past_capacity",
        compaction("conj(lane < max_num_reqs, lane >= count)", "lane >= count"), ["compaction.memory_safety"]),
    Bug("migration_resets_instead_of_copying",
        migration('start = mem.load("ring_start", (group, src_slot), valid_src, other=0)', "start = 0"),
        ["migration.copy_or_reset"]),
    Bug("migration_copies_when_src_is_dst",
        migration("changed = conj(valid_dst, disj(negate(valid_src), src_slot != dst_slot))", "changed = valid_dst"),
        ["migration.copy_or_reset"]),
    # A "none" column (negative) is looked up in the block table as it is:
    # block_table[group, batch, -1].
    Bug("migration_looks_up_none_column",
        slot_lookup("valid_col = conj(valid_req, col >= 0)", "valid_col = valid_req"),
        ["migration.memory_safety"], {"migration.memory_safety": "read block_table"}),
    # Reading the null block's trackers is in bounds (the pool holds it):
    # memory_safety failed only for a pool without slots. The read value,
    # not 0, lands in the destination.
    Bug("migration_reads_null_source",
        migration('start = mem.load("ring_start", (group, src_slot), valid_src, other=0)',
                  'start = mem.load("ring_start", (group, src_slot), True, other=0)'),
        ["migration.copy_or_reset"], {"migration.copy_or_reset": "destination takes the source"}),
    Bug("migration_swaps_src_and_dst",
        migration('mem.store("ring_start", (group, dst_slot), start, changed)',
                  'mem.store("ring_start", (group, src_slot), start, changed)'),
        ["migration.copy_or_reset", "migration.determinism"],
        {"migration.copy_or_reset": "destination takes the source", "migration.determinism": "ring_start read-write"}),
    # A move instead of a copy: the source slot's committed count is cleared.
    # The destination is right, so copy_or_reset proves; a second run (or
    # another row sharing the source, say a published prefix block) reads 0.
    Bug("migration_clears_source",
        migration('mem.store("num_committed", (group, dst_slot), committed, changed)',
                  'mem.store("num_committed", (group, dst_slot), committed, changed); '
                  'mem.store("num_committed", (group, src_slot), 0, conj(changed, valid_src))'),
        ["migration.idempotent", "migration.determinism"],
        {"migration.idempotent": "num_committed", "migration.determinism": "num_committed read-write"}),
    Bug("migration_marks_source_free",
        migration('mem.store("ring_start", (group, dst_slot), start, changed)',
                  'mem.store("ring_start", (group, dst_slot), start, changed); '
                  'mem.store("ring_start", (group, src_slot), -1, conj(changed, valid_src))'),
        ["migration.tracker_range", "migration.idempotent"],
        {"migration.tracker_range": "ring_start store", "migration.idempotent": "ring_start"}),
    # The kernel decodes the columns 1-based (0 = none) while the caller passes
    # them 0-based (negative = none). The obligations state the effect from the
    # slots the program resolved, so the wrong column itself is not theirs to
    # see; the decode col - 1 overflows for a "none" of -2^31.
    Bug("migration_columns_one_based",
        slot_lookup("col = mem.load(cols_buffer, (req,), valid_req, other=-1)",
                    "col = mem.load(cols_buffer, (req,), valid_req, other=0) - 1"),
        ["migration.int32"], {"migration.int32": _none_column_overflows}),
    Bug("boundary_strict_gt",
        boundary_mutant("needs_copy=aligned >= running_pos", "needs_copy=aligned > running_pos"),
        ["boundary.exact", "boundary.prefill_exact"]),
    Bug("boundary_dst_col_no_minus_one",
        boundary_mutant("dst_col=cdiv(aligned, block_size) - 1", "dst_col=cdiv(aligned, block_size)"),
        ["boundary.exact"]),
    Bug("boundary_rounds_up",
        boundary_mutant("aligned = cdiv(new_computed, block_size) * block_size",
                        "aligned = cdiv(new_computed + block_size - 1, block_size) * block_size"),
        ["boundary.exact", "boundary.single_when_short"],
        {"boundary.exact": "copy => aligned inside", "boundary.single_when_short": "no boundary inside below aligned"}),
    # Publishes the first boundary the step reaches, not the last: consistent
    # (a boundary inside the interval, its block, its bias), so boundary.exact
    # proves; only a step crossing several boundaries (longer than a block) shows it.
    Bug("boundary_publishes_first",
        boundary_mutant("aligned = cdiv(new_computed, block_size) * block_size\n"
                        "    return Boundary(\n"
                        "        needs_copy=aligned >= running_pos,",
                        "aligned = cdiv(running_pos + block_size - 1, block_size) * block_size\n"
                        "    return Boundary(\n"
                        "        needs_copy=aligned <= new_computed,"),
        ["boundary.last_published"], {"boundary.last_published": "no boundary inside above aligned"}),
]


def _load_other_obligations() -> None:
    for kind in ("compaction", "migration", "boundary"):
        _proof_modules(kind)


_load_other_obligations()


@pytest.mark.parametrize("bug", POSTPROCESS_BUGS + OTHER_BUGS, ids=lambda b: b.id)
def test_planted_bug_is_caught(bug: Bug, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, bug.build)
    assert_caught(bug.id, bug.caught_by, bug.shows)


def test_at_least_ten_distinct_bugs() -> None:
    ids = [b.id for b in POSTPROCESS_BUGS + OTHER_BUGS]
    assert len(set(ids)) == len(ids) and len(POSTPROCESS_BUGS) >= 10


def test_every_kernel_obligation_is_listed_by_a_bug() -> None:
    """An obligation no planted bug fails has untested teeth (dropping the
    empty pool, for one, took migration.memory_safety's only bug). Every
    registered obligation (the catalog imports every proof module, so a new
    kernel's obligations count without editing this test) except:

    - ``system.*``: their planted bugs live in tests/verify/test_system_proofs.py;
    - ``kernel.*`` (proofs of the Triton source): their planted bugs are
      tests/verify/kernel_mutants.py, caught in tests/verify/test_kernel_teeth.py;
    - ``release.*`` (the released 0.33.0 lifecycle): each is failed by the test of
      tests/verify/test_release_teeth.py that its ``PLANTED`` table names;
    - ``binding.*``: each is failed by its own test function in
      tests/verify/test_binding_proofs.py (``test_*_is_caught``,
      ``test_replayssm_layers_copied_is_necessary``), not declared as a table
      this test could import.
    """
    import replayssm.verify.catalog  # noqa: F401  (registers every obligation)

    from test_release_teeth import PLANTED

    listed = {n for b in POSTPROCESS_BUGS + OTHER_BUGS for n in b.caught_by} | {n for g in GAPS for n in g.closed_by}
    listed |= set(PLANTED)
    kernel = {n for n in REGISTRY if n.split(".")[0] not in ("system", "binding", "kernel")}
    assert {n.split(".")[0] for n in kernel} >= {"postprocess", "boundary", "migration", "compaction"}
    assert sorted(kernel - listed) == []


def test_unpatched_obligations_still_prove_after_planting(monkeypatch: pytest.MonkeyPatch) -> None:
    """monkeypatch undoes a plant: the original spec proves the obligation again
    (guards against a plant leaking into later tests through a cache)."""
    with monkeypatch.context() as m:
        plant(m, POSTPROCESS_BUGS[0].build)
        assert prove(REGISTRY["postprocess.mirror"]).status == "failed"
    monkeypatch.setattr(pp, "_CACHE", {})
    assert prove(REGISTRY["postprocess.mirror"]).status == "proved"


# --------------------------------------------------------------------------------------
# gaps: planted bugs no obligation catches (today), each caught by a hand oracle case
# --------------------------------------------------------------------------------------

GEO = Geometry(max_num_reqs=2, block_size=16, window=16, ring_len=20)
V1 = Conventions(False, False, False, True, False)
V2 = Conventions(True, True, True, True, False)


def _wrap_case() -> dict[str, np.ndarray]:
    """Oracle case (c) of tests/spec/test_oracle_cases.py, one group: decode N = 20,
    T = 4, accepted 4, old trackers (10, 14) -> checkpoint (14 + 4 > 16),
    start (10 + 14) % 20 = 4, committed 4."""
    buf = L.allocate(GEO, 2, 6, [1])
    buf.update(idx_mapping=np.zeros(1, np.int32), query_metadata=np.array([4], np.int32),
               num_computed_tokens=np.array([20, 0], np.int32), num_accepted_tokens=np.array([4, 0], np.int32),
               is_prefilling=np.zeros(1, np.int32), live_cols=np.array([1, 0], np.int32))
    buf["block_table"][0, 0] = [3, 4]
    buf["ring_start"][0, 4], buf["num_committed"][0, 4] = 10, 14
    return buf


def _publish_case() -> dict[str, np.ndarray]:
    """Oracle case (b): decode N = 30, T = 4, accepted 2, trackers (3, 14) ->
    checkpoint to start 17, plan (17, 2)."""
    buf = L.allocate(GEO, 3, 6, [1])
    buf.update(idx_mapping=np.zeros(1, np.int32), query_metadata=np.array([4], np.int32),
               num_computed_tokens=np.array([30, 0], np.int32), num_accepted_tokens=np.array([2, 0], np.int32),
               is_prefilling=np.zeros(1, np.int32), live_cols=np.array([2, 0], np.int32))
    buf["block_table"][0, 0] = [1, 2, 5]
    buf["ring_start"][0, 5], buf["num_committed"][0, 5] = 3, 14
    return buf


def _request_zero_case() -> dict[str, np.ndarray]:
    """v2 conventions, one row mapped to persistent request 0: decode N = 5, T = 1,
    accepted 1 (post-step count 6), trackers (1, 3) -> (1, 4)."""
    buf = L.allocate(GEO, 2, 6, [1])
    buf.update(idx_mapping=np.array([0], np.int32), query_metadata=np.array([0, 1], np.int32),
               num_computed_tokens=np.array([6, 0], np.int32), num_accepted_tokens=np.array([1, 0], np.int32),
               is_prefilling=np.zeros(1, np.int32), live_cols=np.array([0, 0], np.int32))
    buf["block_table"][0, 0] = [4, 0]
    buf["ring_start"][0, 4], buf["num_committed"][0, 4] = 1, 3
    return buf


@dataclass(frozen=True)
class Gap:
    """A planted bug first found to survive every obligation. ``closed_by``
    names the obligation added since to catch it (empty while still open)."""

    id: str
    build: Callable[[], Patch]
    oracle: Callable[[], bool]  # True when the hand case sees the bug
    closed_by: tuple[str, ...] = ()


def _oracle_wrap_start() -> bool:
    buf = _wrap_case()
    L.postprocess_step(buf, GEO, V1, 1)
    return (int(buf["ring_start"][0, 4]), int(buf["num_committed"][0, 4])) != (4, 4)


def _oracle_plan_start() -> bool:
    buf = _publish_case()
    L.postprocess_step(buf, GEO, V1, 1)
    return (int(buf["plan_ring_start"][0]), int(buf["plan_flush_count"][0])) != (17, 2)


def _oracle_request_zero() -> bool:
    buf = _request_zero_case()
    L.postprocess_step(buf, GEO, V2, 1)
    return (int(buf["ring_start"][0, 4]), int(buf["num_committed"][0, 4])) != (1, 4)


def _final_prefill_case() -> dict[str, np.ndarray]:
    """Oracle case (d3): final prefill chunk 0 -> 20 (bs 16), live col 1; the
    boundary 16 lies behind the running position 20, so no plan: (0, -1)."""
    buf = L.allocate(GEO, 2, 6, [1])
    buf.update(idx_mapping=np.zeros(1, np.int32), query_metadata=np.array([20], np.int32),
               num_computed_tokens=np.array([0, 0], np.int32), num_accepted_tokens=np.array([0, 0], np.int32),
               is_prefilling=np.ones(1, np.int32), live_cols=np.array([1, 0], np.int32))
    buf["block_table"][0, 0] = [3, 4]
    return buf


def _oracle_no_plan_after_final_prefill() -> bool:
    buf = _final_prefill_case()
    L.postprocess_step(buf, GEO, V1, 1)
    return (int(buf["plan_ring_start"][0]), int(buf["plan_flush_count"][0])) != (0, -1)


def _oracle_no_plan_without_boundary() -> bool:
    buf = _wrap_case()  # no boundary in (20, 24]: plan (0, -1)
    L.postprocess_step(buf, GEO, V1, 1)
    return (int(buf["plan_ring_start"][0]), int(buf["plan_flush_count"][0])) != (0, -1)


GAPS = [
    # Found when no obligation stated the live slot's ring start after a
    # checkpoint ((start + committed) mod R).
    Gap("ring_start_bitmask",
        lambda: [(P, "cmod", _bitmask_mod)],
        _oracle_wrap_start,
        ("postprocess.window_mirror",)),
    Gap("checkpoint_keeps_old_start",
        commit("cmod(old_start + old_committed, geo.ring_len)", "old_start"),
        _oracle_wrap_start,
        ("postprocess.window_mirror",)),
    # Found when no obligation tied the plan's ring start to the source slot's
    # ring start after the step.
    Gap("plan_uses_pre_step_ring_start",
        program('mem.store("plan_ring_start", (batch,), commit.next_start,',
                'mem.store("plan_ring_start", (batch,), commit.old_start,'),
        _oracle_plan_start,
        ("postprocess.plan_contract",)),
    # Found when the obligations guarded their goals with the spec's own
    # is_padding, not the caller's req >= 0.
    Gap("request_zero_is_padding",
        decode("is_padding = req < 0", "is_padding = req <= 0"),
        _oracle_request_zero,
        ("postprocess.conventions_agree",)),
    # Found when no obligation said a plan is active only when the row
    # publishes (the packed pairs are pad, so FlashInfer would skip them, but
    # the work list and plan differ from the reference).
    Gap("prefill_plan_without_boundary",
        program("conj(prefill, wants_materialize, live_col != boundary.dst_col, writes_plan)",
                "conj(prefill, live_col != boundary.dst_col, writes_plan)"),
        _oracle_no_plan_after_final_prefill,
        ("postprocess.plan_iff_publish",)),
    Gap("decode_plan_without_boundary",
        program('mem.store("plan_ring_start", (batch,), commit.next_start, conj(decode, wants_materialize, writes_plan))',
                'mem.store("plan_ring_start", (batch,), commit.next_start, conj(decode, writes_plan))'),
        _oracle_no_plan_without_boundary,
        ("postprocess.plan_iff_publish",)),
]


@pytest.mark.parametrize("gap", GAPS, ids=lambda g: g.id)
def test_gap_is_caught_by_hand_oracle_case(gap: Gap, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not gap.oracle(), "the hand case must pass on the unpatched spec"
    plant(monkeypatch, gap.build)
    assert gap.oracle(), f"hand oracle case misses planted bug {gap.id}"


@pytest.mark.parametrize("gap", [g for g in GAPS if g.closed_by], ids=lambda g: g.id)
def test_closed_gap_is_caught_by_its_obligation(gap: Gap, monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch, gap.build)
    assert_caught(gap.id, gap.closed_by, {})
