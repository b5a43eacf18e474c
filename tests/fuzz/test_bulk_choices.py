"""``fuzz/bulk_choices.py``: one system's decisions decoded from its row of the rule's choice bytes.

The decoder is checked against its contract: every decision the callers
make decodes without Hypothesis's strategies, byte 0 is the simplest
decision, a row that runs out draws a fresh one, and the decoded values are
as uniform as the module says (over every byte value, no value of a
choice is decoded more than once more often than another)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as hs

from replayssm.fuzz.bulk_choices import MAX_VALUES, ONE_BYTE, ROW_BYTES, BulkDraw, rows_of
from replayssm.fuzz.caller_policy import boolean, element, integer
from replayssm.fuzz.lockstep import IDLE, SCHEDULED


class NoData:
    """A conjecture data that refuses every draw: a decision that needs one fails."""

    def draw(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("a decision went through Hypothesis's strategies")

    draw_bytes = draw_integer = draw


@settings(max_examples=5, deadline=None, database=None)
@given(data=hs.data())
def test_one_draw_gives_every_system_a_row_and_the_callers_draws_decode_from_it(data) -> None:
    """One bytes choice per rule; the callers' strategies (a Hypothesis
    upgrade that changed their shape would fail here, not slow the campaign)
    decode from the row."""
    rows = rows_of(data, 3)
    assert len(rows) == 3 and all(len(r.data) == ROW_BYTES for r in rows)
    draw = BulkDraw(NoData(), bytes(range(1, ROW_BYTES + 1)))
    assert 0 <= draw(hs.integers(0, 5)) <= 5 and draw(hs.integers(3, 3)) == 3
    assert draw(hs.booleans()) in (False, True)
    assert draw(hs.sampled_from([1, 2, 3])) in (1, 2, 3) and draw(hs.sampled_from(range(4, 6))) in (4, 5)
    assert draw(hs.sampled_from([7])) == 7 and draw(hs.just(8)) == 8
    assert draw(IDLE) in range(64) and integer(draw, *SCHEDULED) in range(4)
    assert integer(draw, 2, 4) in (2, 3, 4) and boolean(draw) in (False, True) and element(draw, "xyz") in "xyz"
    assert 10 <= draw(hs.integers(10, 10 + MAX_VALUES - 1)) < 10 + MAX_VALUES


def test_byte_zero_decodes_the_simplest_decision() -> None:
    draw = BulkDraw(NoData(), bytes(ROW_BYTES))
    assert draw(hs.integers(3, 9)) == 3 and draw(hs.integers(5, 200)) == 5
    assert draw(hs.booleans()) is False and draw(hs.sampled_from(["a", "b", "c"])) == "a"
    assert integer(draw, 7, 200) == 7 and boolean(draw) is False and element(draw, range(4, 9)) == 4


@settings(max_examples=3, deadline=None, database=None)
@given(data=hs.data())
def test_a_row_that_runs_out_draws_a_fresh_row_and_a_wide_range_goes_to_hypothesis(data) -> None:
    row = BulkDraw(data.conjecture_data, b"\x05")
    assert row(hs.integers(0, 9)) == 5 and row.refills == 0
    row(hs.integers(0, 9))
    assert row.refills == 1 and len(row.data) == ROW_BYTES
    used = row.at
    assert 0 <= row(hs.integers(0, MAX_VALUES)) <= MAX_VALUES and row.at == used  # drawn by Hypothesis
    assert 0 <= integer(row, 0, 10 * MAX_VALUES) <= 10 * MAX_VALUES and row.at == used


def test_decoded_values_are_uniform_over_the_bytes() -> None:
    """Over every value of the bytes a decision takes, each of its n values is decoded
    floor or ceiling of an equal share: the modulo's bias is the only one."""
    for n in (2, 3, 5, 16, 17, 100, MAX_VALUES):
        width = 1 if n <= ONE_BYTE else 2
        counts = Counter(BulkDraw(NoData(), v.to_bytes(width, "big"))(hs.integers(0, n - 1)) for v in range(256 ** width))
        assert set(counts) == set(range(n)) and max(counts.values()) - min(counts.values()) <= 1, n
    assert Counter(BulkDraw(NoData(), bytes([v]))(hs.booleans()) for v in range(256)) == {False: 128, True: 128}
