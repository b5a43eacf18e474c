"""The concrete simulation's fast paths answer as the general interpreters do.

On Python ints the vocabulary (``spec.vocab``), the system state's ``get`` /
``set`` and the table memory's ``load`` / ``store`` skip the generic dispatch
(the explicit BMC spends most of its time there). Each must give what the
general path gives: the same values and types, 0 (or nothing written) outside
a state variable's shape, a ``MemoryFault`` for an executed out-of-bounds
kernel access, and Z3 terms still go the general way.
"""

from __future__ import annotations

from itertools import product

import pytest
import z3

from system_worlds import GEO, V2

from replayssm.spec import vocab
from replayssm.spec.arrays import int_offset, lookup, update
from replayssm.spec.memory import MemoryFault
from replayssm.spec.system import SystemParams, initial_state
from replayssm.spec.table_memory import TableMemory
from replayssm.verify.terms import lift, named_int

VALUES = (True, False, 0, 1, 2, -1)


def test_vocabulary_on_ints_answers_as_the_python_interpreter():
    py = vocab._PythonVocab
    for a, b, c in product(VALUES, repeat=3):
        for got, want in ((vocab.conj(a, b, c), py.conj(a, b, c)), (vocab.disj(a, b, c), py.disj(a, b, c)),
                          (vocab.negate(a), py.negate(a)), (vocab.implies(a, b), py.disj(py.negate(a), b)),
                          (vocab.ite(a, b, c), py.ite(a, b, c))):
            assert got == want and type(got) is type(want), (a, b, c, got, want)
    assert vocab.conj() is True and vocab.disj() is False


def test_vocabulary_on_a_term_still_builds_a_term():
    x = named_int("fast_path.x")
    for term in (vocab.conj(True, x > 0), vocab.disj(False, x > 0), vocab.negate(x > 0), vocab.implies(True, x > 0),
                 vocab.ite(x > 0, 1, 2), vocab.ite(True, x, 2)):
        assert isinstance(lift(term), z3.ExprRef)


def test_int_offset_is_the_flat_index_or_outside():
    shape = (2, 3, 4)
    vals = list(range(24))
    for index in product(range(-1, 3), range(-1, 4), range(-1, 5)):
        flat = int_offset(shape, index)
        assert (vals[flat] if flat >= 0 else 0) == lookup(vals, shape, index)
    assert int_offset(shape, (1, 2)) is None  # wrong rank: the general path raises
    assert int_offset(shape, (1, named_int("fast_path.i"), 0)) is None


@pytest.mark.parametrize("name", ["active", "rs", "table", "ring"])
def test_state_get_and_set_match_the_general_helpers(name):
    st = initial_state(SystemParams(GEO, V2))
    shape = st.p.shapes()[name]
    general = list(st.v[name])
    for n, index in enumerate(product(*[range(-1, d + 1) for d in shape])):
        assert st.get(name, *index) == lookup(general, shape, index)
        st.set(name, index, 100 + n)
        update(general, shape, index, 100 + n)
        st.set(name, index, -5, False)
        update(general, shape, index, -5, False)
        assert st.v[name] == general


def test_table_memory_fast_path_faults_out_of_bounds_only_when_executed():
    mem = TableMemory({"buf": ((2, 3), [0] * 6)}, loop_bound=4)
    mem.store("buf", (1, 2), 7)
    assert mem.load("buf", (1, 2)) == 7 and mem.buffers["buf"][1][5] == 7
    for index in ((2, 0), (0, 3), (-1, 0)):
        with pytest.raises(MemoryFault):
            mem.load("buf", index)
        with pytest.raises(MemoryFault):
            mem.store("buf", index, 1)
        assert mem.load("buf", index, guard=False, other=9) == 9
        with mem.masked(False):
            mem.store("buf", index, 1)
    with pytest.raises(MemoryFault):
        mem.load("buf", (0,))  # wrong rank
    assert mem.buffers["buf"][1] == [0, 0, 0, 0, 0, 7] and mem.faults == []


def _same_terms(got: list, want: list) -> bool:
    """Each pair of entries is equal for every value of their variables."""
    s = z3.Solver()
    s.add(z3.Or([lift(a) != lift(b) for a, b in zip(got, want)]))
    return len(got) == len(want) and s.check() == z3.unsat


def test_state_and_table_memory_on_terms_answer_as_the_general_helpers():
    """The Z3 interpreter's side: a symbolic index component or guard takes
    the general path, in the state and in the table memory alike."""
    st = initial_state(SystemParams(GEO, V2))
    x, y = named_int("fast_path.x"), named_int("fast_path.y")
    shape = st.p.shapes()["table"]
    general = list(st.v["table"])
    for index, guard in (((0, x, 1), True), ((1, 0, 0), y > 0), ((0, x, y), y < 2)):
        st.set("table", index, 9, guard)
        update(general, shape, index, 9, guard)
        assert _same_terms([st.get("table", *index)], [lookup(general, shape, index)])
    assert _same_terms(st.v["table"], general)
    mem = TableMemory({"buf": ((2, 3), list(range(6)))}, loop_bound=4)
    mem.store("buf", (x, 1), 7)
    assert len(mem.faults) == 1  # the symbolic row may lie outside: recorded, not raised
    want = list(range(6))
    update(want, (2, 3), (x, 1), 7)
    assert _same_terms(mem.buffers["buf"][1], want)
    assert _same_terms([mem.load("buf", (1, x))], [lookup(want, (2, 3), (1, x))])
