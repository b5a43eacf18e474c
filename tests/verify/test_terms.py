"""The Z3 interpreter's term helpers."""

from __future__ import annotations

import z3

from replayssm.spec.vocab import conj, ite
from replayssm.verify.terms import named_int, variables


def test_variables_names_the_inputs_a_term_reads():
    x, y, z = named_int("pre.x[0]"), named_int("pre.y[1]"), named_int("pick.z")
    shared = ite(x > 0, y + 1, 7)
    term = conj(shared == 3, shared * 2 == y, x != 5)
    assert variables(term) == {"pre.x[0]", "pre.y[1]"}
    assert variables(z + 0) == {"pick.z"}
    assert variables(z3.IntVal(4) + 1) == set()
