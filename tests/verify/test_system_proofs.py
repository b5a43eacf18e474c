"""System obligations: proofs go through, planted caller-visible bugs are caught,
counterexamples come back as replayable traces."""

from __future__ import annotations

from dataclasses import replace

import pytest

import replayssm.spec.postprocess as postprocess_module
import replayssm.spec.system as system
from replayssm.spec.system import step_phases
from replayssm.verify import bmc as bmc_module
from replayssm.verify import system_proofs as sp
from replayssm.verify import system_steps as steps
from replayssm.verify import system_world as world
from replayssm.spec.vocab import conj
from replayssm.verify.terms import named_int
from replayssm.verify.obligation import REGISTRY, Obligation, prove
from replayssm.base.system_traces import record_run, replay_actions
from replayssm.base.traces import read_json, write_json
from replayssm.verify.traces import explain


def _case_obligation(conv: str, *rows, claim=sp.preservation_claim) -> Obligation:
    """One step shape proved on its own (``claim=sp.step_claim``: as
    ``system.step`` states it, a v1 shape through v2's)."""
    p = world.system_params(world.SYSTEM_CONVENTIONS[conv])
    case = steps.StepCase(tuple(rows))

    def build():
        yield claim(steps.case_transition(p, case), case.label, cover=True)

    return Obligation(f"case {conv} {case.label}", "step", "", build)


@pytest.fixture
def fresh_cache():
    steps.fresh_context()
    yield
    steps.fresh_context()


@pytest.mark.parametrize("name", ["system.initial", "system.admit", "system.free"])
def test_small_actions_are_proved(name):
    r = prove(REGISTRY[name])
    assert r.status == "proved", r.counterexample or r.detail


def test_a_claim_two_callers_state_alike_is_proved_once():
    """admit and free read nothing of the caller's layout: the v1 and v2
    claims are the same Z3 terms and are proved once, named after both (and
    all mode's, whose admit is align's: a hit on published blocks); claims
    that differ are all kept."""
    assert [c.case for c in REGISTRY["system.admit"].build()] == [
        f"admit req={r} v1-{m} = admit req={r} v2-{m}" + (f" = admit req={r} v2-all" if m == "align" else "")
        for m in ("align", "none") for r in range(2)]
    x = named_int("test.x")
    same = ([("a", x > 0)], [("h", x > 1)], x < 5)
    claims = [sp.Claim(*same, "one"), sp.Claim(*same, "two"),
              sp.Claim([("a", x > 0)], [("h", x > 2)], x < 5, "other hypothesis"),
              sp.Claim([("a", x > 1)], [("h", x > 1)], x < 5, "other goal"),
              sp.Claim([("a", x > 0)], [("h", x > 1)], x < 6, "other cover"),
              sp.Claim([("b", x > 0)], [("h", x > 1)], x < 5, "other part name")]
    assert [c.case for c in sp.distinct_claims(claims)] == [
        "one = two", "other hypothesis", "other goal", "other cover", "other part name"]


def test_a_caller_is_proved_through_another_only_on_the_same_shapes(monkeypatch):
    """system.step states a v1 shape inside its v2 shape's claim: that needs
    both callers to list the same shapes and cover the same situation."""
    row_shapes = steps.row_shapes
    monkeypatch.setattr(steps, "row_shapes", lambda p: row_shapes(p)[:-1] if not p.conv.has_idx_mapping else row_shapes(p))
    with pytest.raises(ValueError, match="v1-align and v2-align list different 1-row step shapes"):
        next(iter(REGISTRY["system.step"].build()))
    monkeypatch.setattr(steps, "row_shapes", row_shapes)
    p = world.system_params(world.SYSTEM_CONVENTIONS["v2-align"])
    t = steps.case_transition(p, steps.StepCase(((0, 0, 0, 0),)))
    with pytest.raises(ValueError, match="v1-align covers another situation than v2-align"):
        sp.shape_claim(t, lambda u: u.picks.rows[0].acc == (1 if u.p.conv.has_idx_mapping else 2))


@pytest.mark.parametrize("conv,rows", [
    ("v2-align", ((0, 0, 0, 1),)),        # decode crossing into a new block: publish into the old one
    ("v1-align", ((1, 1, 0, 1),)),        # prefill chunk after a prefix hit
    ("v2-none", ((0, 0, 0, 0),)),
    ("v2-align", ((0, 0, 1, 1), (1, 1, -1, 0))),  # a decode row beside a first prefill chunk
    ("v1-align", ((0, 1, 0, 1), (1, 1, -1, 1))),  # two prefill rows, one continuing, one first
    ("v2-none", ((0, 0, 0, 0), (1, 1, 0, 0))),   # a decode row beside a later prefill chunk
])
def test_step_shapes_are_proved(fresh_cache, conv, rows):
    r = prove(_case_obligation(conv, *rows))
    assert r.status == "proved", r.counterexample or r.detail


@pytest.mark.parametrize("conv,rows", [
    ("v2-align", ((0, 0, 0, 1),)),                # the tail after a chunk or a prefix hit moves into the next block
    ("v1-none", ((0, 0, 0, 0),)),
    ("v2-align", ((0, 0, 0, 1), (1, 0, 0, 1))),   # two tails after prefix hits on one block, in one launch
])
def test_a_decode_shape_holds_a_prompt_tail_run_as_a_decode(fresh_cache, conv, rows):
    """The decode step shapes hold the prompt tails (prompt_tail_runs_as_decode):
    proved with the cover "request 0 runs its prompt tail as a decode of the
    longest width accepting one token" (and request 1's too, with two rows),
    so Z3 finds a state where that happens, and the step from it keeps the invariant."""
    p = world.system_params(world.SYSTEM_CONVENTIONS[conv])
    case = steps.StepCase(tuple(rows))
    t = steps.case_transition(p, case)
    tails = [t.picks.rows[row[0]] for row in rows]
    cover = conj(*[conj(k.tail_as_decode == 1, k.q == 2, k.acc == 1) for k in tails])

    def build():
        yield sp.preservation_claim(t, case.label, cover=cover)

    r = prove(Obligation(f"tail {conv} {case.label}", "step", "", build))
    assert r.status == "proved", r.counterexample or r.detail


def test_step_shapes_cover_every_step():
    r = prove(REGISTRY["system.shapes_cover"])
    assert r.status == "proved", r.counterexample or r.detail


def test_a_dropped_step_shape_is_found(monkeypatch):
    """Teeth of the coverage proof: leave out the decode row that moves into
    the next column and the proof names a step no shape lists (a decode row,
    or a prompt tail run as one)."""
    row_shapes = steps.row_shapes
    monkeypatch.setattr(steps, "row_shapes", lambda p: [x for x in row_shapes(p) if x != (0, 0, 1)])
    r = prove(REGISTRY["system.shapes_cover"])
    assert r.status == "failed" and r.counterexample["violated"] == ["a listed shape"]
    v = r.counterexample["values"]
    moved = [q for q in range(2) if v[f"pick.rows[{q}].sched"] == 1 and v[f"pre.live[{q}]"] == 0
             and v[f"pick.rows[{q}].live_col"] == 1
             and (v[f"pre.N[{q}]"] >= v[f"pre.prompt[{q}]"] or v[f"pick.rows[{q}].tail_as_decode"] == 1)]
    assert moved, v


# ---- planted bugs: each one is caller-visible and one system proof kills it


def _expect_failure(conv, rows, part):
    r = prove(_case_obligation(conv, *rows))
    assert r.status == "failed", r.detail
    assert r.counterexample is not None
    assert any(part in v for v in r.counterexample["violated"]), r.counterexample["violated"]
    return r


def test_bug_host_mirror_off_by_one(fresh_cache, monkeypatch):
    """The host checkpoints one token early: its trackers no longer follow FlashInfer's ring."""
    monkeypatch.setattr(postprocess_module, "checkpoint_decision", lambda c, n, w: c + n >= w)
    _expect_failure("v2-align", ((0, 0, 0, 0),), "refinement")


def test_bug_flashinfer_rule_misread(fresh_cache, monkeypatch):
    """The model of the decode kernel's rule differs from the host's mirror."""
    monkeypatch.setattr(step_phases, "kernel_checkpoints", lambda pnat, n, w: pnat + n >= w)
    _expect_failure("v2-align", ((0, 0, 0, 0),), "no_token_dropped")
    view = prove(REGISTRY["system.no_token_dropped"])  # the property view sees it too, alone, without lemmas
    assert view.status == "failed" and "inv(post): no_token_dropped" in view.counterexample["violated"], view.detail


def test_bug_canonical_reset_hits_the_live_slot(fresh_cache, monkeypatch):
    """Publishing resets the live slot's trackers too: committed tokens past the boundary are dropped."""
    original = step_phases.postprocess_program

    def buggy(mem, geo, conv, batch, group):
        t = original(mem, geo, conv, batch, group)
        mem.store("num_committed", (group, t.live_slot), 0, t.materialize)
        mem.store("ring_start", (group, t.live_slot), 0, t.materialize)
        return t

    monkeypatch.setattr(step_phases, "postprocess_program", buggy)
    _expect_failure("v2-align", ((0, 0, 0, 1),), "refinement")


def test_bug_caller_passes_no_migration_source(fresh_cache, monkeypatch):
    """The caller passes src_cols = -1 for a running request whose live column
    moves (as for a new request): reset_new_slots resets the destination's
    trackers and the committed tokens the block copy carried are lost."""
    original = step_phases.migrate_program

    class NoSource:
        def __init__(self, mem):
            self.mem = mem

        def load(self, buffer, index, guard=True, other=0):
            if buffer == "src_cols":
                return -1
            return self.mem.load(buffer, index, guard, other)

        def __getattr__(self, name):
            return getattr(self.mem, name)

    monkeypatch.setattr(step_phases, "migrate_program", lambda mem, *a: original(NoSource(mem), *a))
    _expect_failure("v2-align", ((0, 0, 0, 1),), "refinement")


def test_bug_block_copy_forgets_the_ring(fresh_cache, monkeypatch):
    """The scheduler's block copy moves the state and trackers but not the replay ring."""

    def buggy(out, src_state, g, src, dst, guard):
        for name in ("ck", "rs", "nc"):
            out.set(name, (g, dst), src_state.get(name, g, src), guard)

    monkeypatch.setattr(step_phases, "copy_slot", buggy)
    _expect_failure("v2-align", ((0, 0, 0, 1),), "no_token_dropped")


def test_bug_prefix_cache_registers_a_block_early(fresh_cache, monkeypatch):
    """The scheduler caches a block one step before the boundary is published."""
    original = step_phases.register_filled_blocks

    def buggy(out, after, r, sched, before, now):
        original(out, after, r, sched, before, now + out.p.geo.block_size - 1)

    monkeypatch.setattr(step_phases, "register_filled_blocks", buggy)
    _expect_failure("v2-align", ((0, 0, 0, 1),), "canonical")


def test_bug_prefill_reset_skips_intermediate_blocks(fresh_cache, monkeypatch):
    """The postprocess resets only the last block a prefill chunk touched:
    the block the chunk covers before its live one (allocated, model choice
    covered_blocks_allocated) keeps the trackers of the slot's old owner and
    is registered by the prefix cache, so it is not canonical. While the
    model left covered columns null (only_live_block_allocated) no proof
    could see this bug."""
    original = postprocess_module.prefill_columns

    def buggy(row, block_size):
        _, last = original(row, block_size)
        return last, last

    monkeypatch.setattr(postprocess_module, "prefill_columns", buggy)
    _expect_failure("v2-align", ((0, 1, -1, 1),), "canonical")


def test_bug_compaction_launched_one_row_short(fresh_cache, monkeypatch):
    """The caller hands the compaction num_reqs - 1: the last row's publish is
    planned (trackers reset to (0, 0)) but the work list leaves it out, so
    FlashInfer never materializes it."""
    original = step_phases.compact_program
    monkeypatch.setattr(step_phases, "compact_program", lambda mem, mnr, n, lanes: original(mem, mnr, n - 1, lanes))
    _expect_failure("v1-align", ((0, 0, 0, 1),), "work list is the active rows")


def test_bug_one_group_left_in_mode_none(fresh_cache, monkeypatch):
    """The caller configures one cache group without prefix caching while the
    others align: at a boundary the other groups publish and this one does not."""
    original = step_phases.postprocess_program

    def buggy(mem, geo, conv, batch, group):
        return original(mem, geo, replace(conv, materialize_prefixes=False) if group == 1 else conv, batch, group)

    monkeypatch.setattr(step_phases, "postprocess_program", buggy)
    _expect_failure("v2-align", ((0, 0, 0, 1),), "publish happens in every group or in none")


def test_a_v1_step_is_proved_through_the_v2_step_of_its_shape(fresh_cache):
    """The v1 claim states that v1 leaves every variable the invariant reads
    as v2 does (and its own checks); it states no invariant itself."""
    p = world.system_params(world.SYSTEM_CONVENTIONS["v1-align"])
    case = steps.StepCase(((0, 0, 0, 1), (1, 1, -1, 0)))
    claim = sp.step_claim(steps.case_transition(p, case), case.label)
    names = [n for n, _ in claim.goal]
    assert names[:len(steps.context().invariant_reads(p))] == [f"same {v} as v2-align" for v in steps.context().invariant_reads(p)]
    assert {"ck", "ring", "nc", "rs", "table", "reg"} <= set(steps.context().invariant_reads(p))
    assert not any(n.startswith("inv(post)") for n in names) and any(n.startswith("check: ") for n in names)
    r = prove(_case_obligation("v1-align", (0, 0, 0, 1), (1, 1, -1, 0), claim=sp.step_claim))
    assert r.status == "proved", r.counterexample or r.detail


def test_a_v1_step_on_other_hypotheses_is_not_taken_through_v2(fresh_cache, monkeypatch):
    """The reference claim rests on the v2 shape's claim: when a v1 step had
    a caller assumption v2 does not make, that claim would not cover it."""
    original = system.step_assumptions

    def v1_only(st, k):
        extra = [] if st.p.conv.has_idx_mapping else [("v1 only", st.get("N", 0) >= 0)]
        return original(st, k) + extra

    monkeypatch.setitem(system.ACTIONS, "step", replace(system.ACTIONS["step"], assumptions=v1_only))
    p = world.system_params(world.SYSTEM_CONVENTIONS["v1-align"])
    case = steps.StepCase(((0, 0, 0, 0),))
    with pytest.raises(ValueError, match="rests on other hypotheses"):
        sp.step_claim(steps.case_transition(p, case), case.label)


def test_bug_v1_caller_alone_drops_the_committed_count(fresh_cache, monkeypatch):
    """A bug only the v1 layout triggers (its decode rows keep the committed
    count the step started with): the v2 shape still proves, and the v1 shape
    names the variable the two callers leave differently."""
    original = step_phases.postprocess_program

    def buggy(mem, geo, conv, batch, group):
        if conv.has_idx_mapping:
            return original(mem, geo, conv, batch, group)
        before = list(mem.buffers["num_committed"][1])
        t = original(mem, geo, conv, batch, group)
        mem.buffers["num_committed"][1][:] = before
        return t

    monkeypatch.setattr(step_phases, "postprocess_program", buggy)
    assert prove(_case_obligation("v2-align", (0, 0, 0, 0), claim=sp.step_claim)).status == "proved"
    r = prove(_case_obligation("v1-align", (0, 0, 0, 0), claim=sp.step_claim))
    assert r.status == "failed" and r.counterexample["violated"][0] == "same nc as v2-align", r.counterexample
    # system.step states both callers of the shape in one claim: it fails on the v1 part
    r = prove(_shape_obligation("v2-align", (0, 0, 0, 0)))
    assert r.status == "failed" and r.counterexample["violated"][0] == "v1-align: same nc as v2-align", r.counterexample


def _shape_obligation(conv: str, *rows) -> Obligation:
    """One step shape as ``system.step`` states it (:func:`sp.shape_claim`)."""
    p = world.system_params(world.SYSTEM_CONVENTIONS[conv])
    case = steps.StepCase(tuple(rows))
    return Obligation(f"shape {conv} {case.label}", "step", "", lambda: [sp.shape_claim(steps.case_transition(p, case))],
                      isolated=REGISTRY["system.step"].isolated)  # solved as system.step solves it


def test_one_claim_states_a_shape_for_both_callers(fresh_cache):
    """The v2 shape's invariant and checks, then the v1 shape's reference
    parts under the same hypotheses; it proves."""
    p = world.system_params(world.SYSTEM_CONVENTIONS["v2-align"])
    case = steps.StepCase(((0, 0, 0, 1),))
    claim = sp.shape_claim(steps.case_transition(p, case))
    names = [n for n, _ in claim.goal]
    assert claim.case == f"step v2-align + v1-align: {case.label}"
    assert names[0].startswith("inv(post): ") and "v1-align: same ck as v2-align" in names
    assert any(n.startswith("v1-align: check: ") for n in names) and any(n.startswith("check: ") for n in names)
    r = prove(_shape_obligation("v2-align", (0, 0, 0, 1)))
    assert r.status == "proved", r.counterexample or r.detail


# ---- planted bugs in the initial state, admit and free: each one breaks the
# per-action proof (system.initial, system.admit, system.free)


def _expect_action_failure(name, part):
    """The per-action obligation ``name`` fails naming the invariant ``part``."""
    r = prove(REGISTRY[name])
    assert r.status == "failed", r.detail
    assert any(part in v for v in r.counterexample["violated"]), r.counterexample["violated"]
    return r


def _plant_action(monkeypatch, action, apply):
    """Replace the effect of one of the model's actions (the proofs look it up in ``ACTIONS``)."""
    monkeypatch.setitem(system.ACTIONS, action, replace(system.ACTIONS[action], apply=apply))


def test_bug_trackers_allocated_uninitialised(fresh_cache, monkeypatch):
    """The tracker pair is allocated with torch.empty instead of torch.zeros:
    every free slot starts with garbage trackers (the model's GARBAGE, -1),
    outside the range every kernel proof assumes of a tracker it reads. (An
    in-range nonzero start, say committed 1, proves: the invariant asks
    nothing but the range of a slot no request holds.)"""
    original = sp.initial_state  # system_proofs imported it by name

    def buggy(p):
        st = original(p)
        for name in ("rs", "nc"):
            st.v[name] = [system.GARBAGE] * len(st.v[name])
        return st

    monkeypatch.setattr(sp, "initial_state", buggy)
    _expect_action_failure("system.initial", "range")


def test_bug_prefix_hit_takes_group_0_slot_ids_in_every_group(fresh_cache, monkeypatch):
    """On a prefix-cache hit the scheduler writes group 0's block ids into every
    group's table: in group 1 the id names a slot that is not the published
    block (not registered, trackers and state not canonical)."""
    original = system.ACTIONS["admit"].apply

    def buggy(st, k):
        return original(st, replace(k, hit_slots=k.hit_slots[:1] * len(k.hit_slots)))  # none in mode none

    _plant_action(monkeypatch, "admit", apply=buggy)
    r = _expect_action_failure("system.admit", "refinement")
    v = r.counterexample["values"]
    _, NR, C = world.system_params(world.SYSTEM_CONVENTIONS[r.counterexample["case"].split()[-1]]).shapes()["table"]
    group_1_col_0 = (1 * NR + v["pick.req"]) * C  # flat index of table[1, req, 0]
    assert v["pick.hit"] >= 1 and v["pick.hit_slots[0][0]"] != v["pick.hit_slots[1][0]"], v
    assert v[f"post.table[{group_1_col_0}]"] == v["pick.hit_slots[0][0]"], v


def test_bug_free_forgets_the_refcount(fresh_cache, monkeypatch):
    """Freeing a request leaves its blocks' reference counts as they were: its
    private blocks are never free again (FRESH_SLOT_IS_FREE never holds for
    them) and a shared block outlives its last user."""
    original = system.ACTIONS["free"].apply

    def buggy(st, k):
        outcome = original(st, k)
        outcome.state.v["ref"] = list(st.v["ref"])
        return outcome

    _plant_action(monkeypatch, "free", apply=buggy)
    _expect_action_failure("system.free", "aux.refcount")


def test_plan_from_the_other_group_is_harmless_while_groups_agree(fresh_cache, monkeypatch):
    """Not a bug the proofs can see: swapping which group writes the shared plan
    changes nothing, because the invariant keeps both groups' trackers equal
    (system.groups_agree). The plan's author matters only when groups disagree."""
    original = step_phases.postprocess_program
    monkeypatch.setattr(step_phases, "postprocess_program", lambda mem, geo, conv, b, g: original(mem, geo, conv, b, 1 - g))
    assert prove(_case_obligation("v2-align", (0, 0, 0, 1))).status == "proved"


# ---- BMC and traces


def test_explicit_bmc_reaches_prefix_sharing_and_holds():
    p, r = bmc_module.explicit_bmc(depth=5)
    assert r["status"] == "proved"
    assert r.get("shared_states", 0) > 0
    assert r["actions"].get("step", 0) > 0 and r["actions"].get("admit", 0) > 0 and r["actions"].get("free", 0) > 0


def test_explicit_bmc_finds_the_live_column_counterexample(tmp_path):
    """Drop live_col_is_last_block and let the caller use the block of the
    first scheduled token: a run from the initial state drops committed tokens."""

    def first_token_block(st):
        for action, picks in system.enumerate_picks(st, prompts=(3,)):
            if action != "step":
                continue
            for r, row in enumerate(picks.rows):
                if row.sched == 1:
                    rows = list(picks.rows)
                    rows[r] = replace(row, live_col=st.get("N", r) // st.p.geo.block_size)
                    yield action, replace(picks, rows=tuple(rows))

    p, r = bmc_module.explicit_bmc(depth=6, dropped=("live_col_is_last_block",), extra=first_token_block)
    assert r["status"] == "failed"
    trace = record_run(p, r["run"], checked=False, source="explicit", violated=r["violated"],
                       dropped=["live_col_is_last_block"])
    path = write_json(trace, tmp_path / "live.json")
    text = explain(path)
    assert "BROKEN invariants" in text or "FAILED checks" in text
    assert all(diff == [] for _, _, diff in replay_actions(read_json(path)))


def test_z3_bmc_counterexample_is_a_replayable_trace():
    p = world.system_params(world.SYSTEM_CONVENTIONS["v2-align"], num_slots=5, num_streams=1)
    r = bmc_module.run_bmc(p, 2, dropped=("is_prefilling_agrees",))
    assert r.status == "failed" and r.trace is not None
    steps = list(replay_actions(r.trace))
    assert all(diff == [] for _, _, diff in steps)
    assert "g0 slot" in explain(r.trace)
    assert bmc_module.run_bmc(p, 2).status == "proved"


def test_recorded_run_round_trips(tmp_path):
    p = world.system_params(world.SYSTEM_CONVENTIONS["v1-align"])
    steps = [("admit", {"req": 0, "stream": 0, "prompt": 3, "hit": 0}),
             ("step", {"rows": [{"sched": 1, "q": 2, "live_col": 0, "acc": 1, "is_prefilling": 1, "slot": [1, 1]}]}),
             ("step", {"rows": [{"sched": 1, "q": 1, "live_col": 1, "acc": 1, "is_prefilling": 1, "slot": [2, 3]}]})]
    path = write_json(record_run(p, steps), tmp_path / "t.json")
    trace = read_json(path)
    assert set(trace) == {"#meta", "params", "states", "actions"}
    assert len(trace["states"]) == 4 and trace["actions"][1]["picks"]["rows"][0]["q"] == 2
    assert all(diff == [] for _, _, diff in replay_actions(trace))
    assert "published" in explain(path)


def test_an_impossible_step_shape_is_reported_vacuous():
    """Teeth of the per-case non-vacuity of system.step/step_batch: a prefill
    chunk that stays in column 0 admits no state (its position would be 0,
    which has no live column), and prove says which case is vacuous."""
    p = world.system_params(world.SYSTEM_CONVENTIONS["v2-align"])
    impossible = steps.StepCase(((0, 1, 0, 0),))
    assert (1, 0, 0) not in steps.row_shapes(p)

    def build():
        yield sp.preservation_claim(steps.case_transition(p, impossible), impossible.label)

    r = prove(Obligation("impossible shape", "step", "", build, every_case=True, isolated=REGISTRY["system.step"].isolated))
    assert r.status == "failed" and r.detail.startswith("vacuous case: r0 prefill live 0->0"), r.detail


def test_the_slot_layout_lemma_can_fail(monkeypatch):
    """Teeth of shapes_cover's renaming part: demanding that no two requests
    ever share a block (false under prefix hits) fails it."""
    def never_shared(st):
        pad, cells = st.p.geo.pad_slot, [(r, c) for r in range(st.p.num_reqs) for c in range(st.p.num_cols)]
        return sp.conj(*[sp.implies(sp.conj(a != pad, b != pad), a != b) for g in range(st.p.groups)
                         for i, x in enumerate(cells) for y in cells[i + 1:]
                         for a, b in [(st.get("table", g, *x), st.get("table", g, *y))]])

    monkeypatch.setattr(sp, "pinned_layout_is_general", never_shared)
    r = prove(REGISTRY["system.shapes_cover"])
    assert r.status == "failed" and r.counterexample["violated"] == ["slot ids as pinned, up to renaming"]

def test_a_bit_mask_for_the_ring_modulo_is_caught_by_the_odd_ring():
    """The spec's ring modulo replaced by a bit mask (``x & (R - 1)``): on the
    other worlds' ring of 4 rows the two agree, so only a world whose ring is
    not a power of two (``system.bmc_odd_ring``) can see it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(postprocess_module, "cmod", lambda a, b: a & (b - 1))
        masked = prove(REGISTRY["system.bmc_odd_ring"])
        _, ring4 = bmc_module.explicit_bmc(**{**bmc_module.ODD_RING_DOMAIN, "geo": world.SYSTEM_GEOMETRY, "depth": 4})
    assert masked.status == "failed" and "inv: no_token_dropped" in masked.counterexample["violated"][0], masked
    assert masked.counterexample["trace"]["actions"], masked.counterexample
    assert ring4["status"] == "proved"  # the same depth on a ring of 4: the mask is invisible there
