"""The Z3 interpreter's term helpers."""

from __future__ import annotations

import numpy as np
import pytest
import z3

from replayssm.spec.vocab import cdiv, cmod, conj, disj, ite, negate, within
from replayssm.verify.terms import SMALL_RANGE, lift, named_bool, named_int, variables


def test_variables_names_the_inputs_a_term_reads():
    x, y, z = named_int("pre.x[0]"), named_int("pre.y[1]"), named_int("pick.z")
    shared = ite(x > 0, y + 1, 7)
    term = conj(shared == 3, shared * 2 == y, x != 5)
    assert variables(term) == {"pre.x[0]", "pre.y[1]"}
    assert variables(z + 0) == {"pick.z"}
    assert variables(z3.IntVal(4) + 1) == set()


def test_terms_built_through_the_c_api_mean_what_z3py_builds():
    """The fast constructors make the same terms z3.py makes (same Z3 ids,
    since Z3 shares equal terms), mixed sorts included."""
    x, y, b = named_int("x"), named_int("y"), named_bool("b")
    zx, zy, zb = lift(x), lift(y), lift(b)
    pairs = [
        (ite(b, x, y + 1), z3.If(zb, zx, zy + 1)),
        (conj(x > 0, y <= 2, b), z3.And(zx > 0, zy <= 2, zb)),
        (disj(x < 0, y >= 2), z3.Or(zx < 0, zy >= 2)),
        (negate(x == y), z3.Not(zx == zy)),
        (x != y, zx != zy),
        (x * 3 - y, zx * 3 - zy),
        (2 - x, 2 - zx),
    ]
    for ours, theirs in pairs:
        assert lift(ours).get_id() == theirs.get_id(), (ours, theirs)
    assert lift(conj()).eq(z3.BoolVal(True)) and lift(disj()).eq(z3.BoolVal(False))
    assert lift(7) is lift(7) and lift(True).eq(z3.BoolVal(True)) and not lift(1).eq(lift(True))
    # mixed sorts: Z3 coerces a boolean branch or operand to 0/1 as z3.py
    # does, and rejects an integer where a boolean must be
    assert lift(ite(b, x, b)).get_id() == z3.If(zb, zx, zb).get_id()
    assert lift(ite(b, True, x) + 1).get_id() == (z3.If(zb, z3.BoolVal(True), zx) + 1).get_id()
    assert z3.is_int(lift(ite(b, True, x))) and z3.is_bool(lift(ite(b, True, False)))
    assert lift(x == b).get_id() == (zx == zb).get_id()
    with pytest.raises(z3.Z3Exception, match="Sort mismatch"):
        conj(x, b)


@pytest.mark.parametrize("a", [-7, -6, -1, 0, 1, 6, 7])
def test_c_division_and_remainder_on_terms_match_the_oracle(a):
    x = named_int("a")
    s = z3.Solver()
    s.add(lift(x) == a)
    assert s.check() == z3.sat
    m = s.model()
    assert m.eval(lift(cdiv(x, 2))).as_long() == cdiv(a, 2)
    assert m.eval(lift(cmod(x, 4))).as_long() == cmod(a, 4)


@pytest.mark.parametrize("lo, hi", [(0, 0), (-1, 1), (1, 4), (0, SMALL_RANGE - 1), (0, SMALL_RANGE), (-3, 40)])
def test_within_is_the_closed_range_on_every_interpreter(lo, hi):
    """The disjunction Z3 gets for a small range is the range itself (Z3 finds
    no integer where it and the bounds disagree), as are the oracle's and the
    vectorized oracle's answers."""
    x = named_int("x")
    s = z3.Solver()
    s.add(lift(within(x, lo, hi)) != z3.And(lift(x) >= lo, lift(x) <= hi))
    assert s.check() == z3.unsat
    values = list(range(lo - 2, hi + 3))
    assert [within(v, lo, hi) for v in values] == [lo <= v <= hi for v in values]
    assert within(np.array(values), lo, hi).tolist() == [lo <= v <= hi for v in values]


def test_within_states_a_small_range_by_its_values():
    x = named_int("x")
    assert lift(within(x, -1, 1)).get_id() == z3.Or(lift(x) == -1, lift(x) == 0, lift(x) == 1).get_id()
    assert lift(within(x, 0, SMALL_RANGE)).get_id() == z3.And(lift(x) >= 0, lift(x) <= SMALL_RANGE).get_id()


@pytest.mark.parametrize("lo, hi, bad", [(named_int("n"), 3, "lo"), (0, 2.5, "hi"), (True, 3, "lo")])
def test_within_rejects_bounds_that_are_not_int_constants(lo, hi, bad):
    with pytest.raises(ValueError, match=f"within: {bad} must be an int constant"):
        within(named_int("x"), lo, hi)
