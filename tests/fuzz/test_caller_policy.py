"""The fuzz callers' policy (``fuzz/caller_policy.py``): every decision it holds is the one the callers make.

Each test drives :class:`Callers` with a policy that makes one decision its
own way and checks the steps show it (a callers that ignored the field would
fail); the lockstep policy's steps decode from a row of choice bytes throughout,
the default's do not; review's policy follows the assumptions it drops."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from replayssm.fuzz.actions import BlockCopy, Migrate, Postprocess
from replayssm.fuzz.caller_policy import DEFAULT, ONE_TOKEN_CONTINUATIONS, TRACKER_COPIES, CallerPolicy
from replayssm.fuzz.caller_shapes import GEOMETRIES, NUM_SLOTS, Features, systems
from replayssm.fuzz.callers import Callers
from replayssm.fuzz.launcher import Setup
from replayssm.fuzz.bulk_choices import rows_of
from replayssm.fuzz.lockstep import LOCKSTEP_POLICY
from replayssm.review.lifecycle import StepRecord, review_callers, review_policy, state_copies
from replayssm.spec import assumptions as env
from replayssm.spec.geometry import Conventions

ALIGN = tuple(c for c in Conventions.all() if c.materialize_prefixes and not c.live_col_is_zero)
"""Conventions whose live column moves (tracker copies, multi-column tables)."""

QUICK = settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))

TABLE_SHORT = frozenset(env.TABLE_SHORT_BY_ONE.names)


def _run(data: Any, callers: Callers, steps: int = 8, draw: Any = None) -> list[list]:
    """Up to ``steps`` admissions and model-runner steps; the actions of each step."""
    draw = draw or data.draw
    out = []
    for _ in range(steps):
        if len(callers.requests) < callers.geo.max_num_reqs and draw(hs.booleans()):
            callers.admit(draw)
        if callers.requests:
            out.append(callers.step(draw))
    return out


class Watch:
    """A ``scheduled`` hook that keeps every step's batch rows as they were then."""

    def __init__(self) -> None:
        self.steps: list[list] = []

    def __call__(self, callers: Callers, batch_rows: list) -> None:
        self.steps.append([None if row is None else (row[0].computed, callers.source_col(row[0]), row[1])
                           for row in batch_rows])

    def rows(self) -> list:
        return [row for step in self.steps for row in step if row is not None]


def _caller_rids(post: Postprocess) -> list[int]:
    return [int(line.split()[1]) for line in post.caller if line != "padding"]


@QUICK
@given(data=hs.data())
def test_the_policy_chooses_the_rows_and_their_order(data) -> None:
    """Every running request asked for, in reverse batch order: the postprocess rows
    are those of them the step could plan, in that order."""
    setup, features = data.draw(systems(tuple(Conventions.all())))
    asked: list[list[int]] = []

    def every(draw: Any, rids: list[int]) -> list[int]:
        asked.append(list(rids))
        return list(rids)

    callers = Callers(setup, features, policy=CallerPolicy(choose_rows=every, batch_order=lambda draw, n: list(range(n))[::-1]))
    for _ in range(6):
        if len(callers.requests) < callers.geo.max_num_reqs:
            callers.admit(data.draw)
        actions = callers.step(data.draw)
        if actions:
            rids = _caller_rids(actions[-1])
            assert rids == [r for r in reversed(asked[-1]) if r in rids], (rids, asked[-1])


@QUICK
@given(data=hs.data())
def test_lockstep_steps_decode_from_a_row_and_the_defaults_do_not(data) -> None:
    """A lockstep system's steps decode every decision from its row of choice
    bytes, never reaching Hypothesis's strategies (``bulk_choices.BulkDraw``'s
    fallback); the default policy's choice of rows does."""
    setup, features = data.draw(systems(tuple(Conventions.all())))
    fallback: list[Any] = []
    real = data.conjecture_data.draw

    def counted(strategy: Any, *args: Any, **kwargs: Any) -> Any:
        fallback.append(strategy)
        return real(strategy, *args, **kwargs)

    data.conjecture_data.draw = counted
    draw = rows_of(data, 1)[0]
    lockstep = Callers(setup, features, policy=LOCKSTEP_POLICY)
    lockstep.admit(draw)
    for _ in range(4):
        if lockstep.requests:
            lockstep.step(draw)
        else:
            lockstep.admit(draw)
    assert not fallback, f"lockstep draws through the strategies: {fallback}"
    default = Callers(setup, features)
    default.admit(draw)
    default.step(draw)
    assert fallback, "the default policy's rows were decoded from the row: is the policy used?"


@pytest.mark.parametrize("copies", TRACKER_COPIES)
@QUICK
@given(data=hs.data())
def test_tracker_copies_follow_the_policy(copies: str, data) -> None:
    """``every``: each row whose live column moves between real slots has its trackers
    copied; ``none``: no block copy at all; ``drawn``: none with the feature off."""
    setup, features = data.draw(systems(ALIGN))
    watch = Watch()
    callers = Callers(setup, features, policy=CallerPolicy(tracker_copies=copies, scheduled=watch))
    steps = _run(data, callers)
    moved = [plan for _, src, plan in watch.rows() if src >= 0 and src != plan.live_col]
    if copies == "every":
        assert all(plan.copied for plan in moved)
    if copies == "none" or copies == "drawn" and not features.block_copies:
        assert not any(isinstance(a, BlockCopy) for actions in steps for a in actions)
        assert not any(plan.copied for plan in moved)


def test_one_token_continuations_follow_the_policy() -> None:
    """Prefill continuation chunks of one token: ``never`` schedules none, where the
    row rule's own draws (``drawn``) and ``often`` schedule some in as many runs."""
    seen = {}
    for ones in ONE_TOKEN_CONTINUATIONS:
        found = []

        @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  derandomize=True)
        @given(data=hs.data())
        def run(data) -> None:
            setup, features = data.draw(systems(tuple(Conventions.all())))
            watch = Watch()
            callers = Callers(setup, features, policy=CallerPolicy(one_token_continuations=ones, scheduled=watch))
            _run(data, callers, steps=12)
            found.extend(plan for computed, _, plan in watch.rows()
                         if plan.prefilling and computed > 0 and plan.query_len == 1)

        run()
        seen[ones] = len(found)
    assert seen["never"] == 0 < min(seen["drawn"], seen["often"]), seen


@QUICK
@given(data=hs.data())
def test_the_kernels_table_is_short_by_the_policy(data) -> None:
    """``table_short_by=1``: the launches' block tables and the kernels' setup are one column
    narrower than the callers' rows; the default hands the kernels the callers' own table."""
    setup, features = data.draw(systems(ALIGN))
    for short_by in (0, 1):
        callers = Callers(setup, features, policy=CallerPolicy(table_short_by=short_by))
        assert callers.kernel_setup.num_cols == callers.table_cols == setup.num_cols - short_by
        for actions in _run(data, callers, steps=4):
            for a in actions:
                if isinstance(a, (Migrate, Postprocess)):
                    assert {len(row) for group in a.block_table for row in group} == {setup.num_cols - short_by}


@pytest.mark.parametrize("field, value, allowed", [
    ("tracker_copies", "some", str(TRACKER_COPIES)),
    ("one_token_continuations", "always", str(ONE_TOKEN_CONTINUATIONS)),
    ("table_short_by", -1, "an int >= 0"),
    ("table_short_by", True, "an int >= 0"),
])
def test_a_bad_policy_is_refused_naming_the_field_and_the_allowed_values(field: str, value: Any,
                                                                         allowed: str) -> None:
    with pytest.raises(ValueError) as e:
        CallerPolicy(**{field: value})
    assert str(e.value).startswith(f"{field} must be") and allowed in str(e.value) and repr(value) in str(e.value)


def test_the_default_policy_is_the_fuzz_campaigns() -> None:
    assert DEFAULT == CallerPolicy() and DEFAULT.scheduled is None and DEFAULT.table_short_by == 0
    assert (DEFAULT.tracker_copies, DEFAULT.one_token_continuations) == ("drawn", "drawn")


@pytest.mark.parametrize("dropped, copies, ones, short_by, state", [
    (frozenset(), "every", "never", 0, True),
    (frozenset({env.BLOCK_COPY_MOVES_TRACKERS.name}), "none", "never", 0, True),
    (frozenset({env.PREFILL_CONTINUATION_LONGER_THAN_ONE.name}), "every", "often", 0, True),
    (TABLE_SHORT, "every", "never", 1, True),
    (frozenset({env.COLUMNS_IN_TABLE.name}), "every", "never", 0, True),
    (frozenset({env.LIVE_MOVE_COPIES_STATE.name}), "every", "never", 0, False),
])
def test_reviews_policy_follows_what_it_drops(dropped: frozenset[str], copies: str, ones: str,
                                              short_by: int, state: bool) -> None:
    """The decisions come from the records' ``caller_breaks`` (kept, or all its names dropped)."""
    record = StepRecord(dropped)
    policy = review_policy(record)
    assert (policy.tracker_copies, policy.one_token_continuations, policy.table_short_by) == (copies, ones, short_by)
    assert policy.state_copies == state == state_copies(dropped)
    assert policy.scheduled == record.scheduled


def test_review_breaks_one_per_request_assumption_at_a_time() -> None:
    setup, features = Setup.sized(GEOMETRIES[0], Conventions.all()[0], (1,), 3, NUM_SLOTS), Features()
    callers, _ = review_callers(setup, features, frozenset({env.DECODE_ROW_FITS.name}))
    assert callers.drop == env.DECODE_ROW_FITS.name
    with pytest.raises(ValueError, match="one per-request assumption at a time"):
        review_callers(setup, features, frozenset({env.DECODE_ROW_FITS.name, env.ROW_NONEMPTY.name}))


@QUICK
@given(data=hs.data())
def test_reviews_record_holds_each_steps_rows_before_the_forward_pass(data) -> None:
    """The record's rows are the postprocess launch's rows as they were scheduled."""
    setup, features = data.draw(systems(tuple(Conventions.all())))
    callers, record = review_callers(setup, features, frozenset())
    for _ in range(6):
        if len(callers.requests) < callers.geo.max_num_reqs:
            callers.admit(data.draw)
        actions = callers.step(data.draw)
        if actions:
            post = actions[-1]
            assert [row.rid for row in record.rows if row is not None] == _caller_rids(post)
            assert [row.computed_before for row in record.rows if row is not None] == \
                [int(line.split("N=")[1].split()[0]) for line in post.caller if line != "padding"]


def test_prompt_tails_run_as_decodes_under_every_policy() -> None:
    """At a prompt tail (prior state, one prompt token left) the callers run
    some rows as the decode vLLM runs there (``prompt_tail_runs_as_decode``),
    whatever the policy on one-token continuation chunks: not a prefill, of
    a width ``RowRule.tail_lens`` lists, accepting the one real token, its
    live column the block of its last scheduled token."""
    for ones in ONE_TOKEN_CONTINUATIONS:
        tails: list = []

        def seen(callers: Callers, batch_rows: list) -> None:
            for row in batch_rows:
                if row is not None and row[0].prefilling and not row[1].prefilling:
                    r, plan = row
                    rule = callers.rows
                    assert plan.query_len in rule.tail_lens(r.computed, r.prompt_len) and plan.accepted == 1, plan
                    assert plan.live_col == rule.live_col(r.computed, plan.query_len), plan
                    tails.append(plan)

        @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  derandomize=True)
        @given(data=hs.data())
        def run(data) -> None:
            setup, features = data.draw(systems(tuple(Conventions.all())))
            _run(data, Callers(setup, features, policy=CallerPolicy(one_token_continuations=ones, scheduled=seen)),
                 steps=12)

        run()
        assert tails, f"no prompt tail ran as a decode with one_token_continuations={ones!r}"
