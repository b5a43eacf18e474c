"""Every ``postprocess.*`` obligation proves (and is not vacuous: ``prove``
fails an obligation whose assumptions never admit the covered situation).
Every per-kernel goal is a list of distinctly named parts, and the launch sizes
assume a slot pool that holds the null block."""

from __future__ import annotations

import pytest
import z3

import replayssm.verify.boundary_proofs  # noqa: F401  (registers the obligations)
import replayssm.verify.compaction_proofs  # noqa: F401
import replayssm.verify.migration_proofs  # noqa: F401
import replayssm.verify.postprocess_proofs  # noqa: F401
from replayssm.spec.assumptions import POOL_HAS_NULL_BLOCK
from replayssm.spec.geometry import Conventions
from replayssm.verify.obligation import REGISTRY, prove
from replayssm.verify.scenarios import GEOMETRIES, migration_case, postprocess_case
from replayssm.verify.terms import lift

NAMES = sorted(n for n in REGISTRY if n.startswith("postprocess."))
KERNEL_NAMES = sorted(n for n in REGISTRY if n.split(".")[0] in ("postprocess", "boundary", "migration", "compaction"))


def test_obligations_are_registered():
    assert len(NAMES) >= 10, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_postprocess_obligation_proves(name):
    result = prove(REGISTRY[name])
    assert result.status == "proved", (result.status, result.detail, result.counterexample)
    assert result.cases >= 1


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_goal_is_named_parts(name):
    """A counterexample names the parts it violates only when the goal is a
    list of (name, term) parts; one unnamed term leaves ``violated`` empty.
    Checked for every case (geometry, conventions) of the obligation."""
    claims = list(REGISTRY[name].build())
    assert claims, name
    for claim in claims:
        assert isinstance(claim.goal, list), (name, claim.case, type(claim.goal))
        # (migration.int32 has no part: the migration program computes no integer.)
        assert claim.goal or name == "migration.int32", (name, claim.case)
        names = [n() if callable(n) else n for n, _ in claim.goal]
        assert all(isinstance(n, str) and n for n in names), (name, claim.case, names)
        # (Access- and race-named parts may repeat a name: one per access pair.)
        if name.startswith(("postprocess.", "boundary.")) and \
                not name.endswith((".memory_safety", ".int32", ".determinism")):
            assert len(set(names)) == len(names), (name, claim.case, names)


@pytest.mark.parametrize("build", [
    lambda geo: postprocess_case(Conventions(True, True, True, True, False), geo),
    lambda geo: migration_case(True, geo),
], ids=["postprocess", "migration"])
def test_sizes_assume_the_null_block_in_the_pool(build):
    """``SLOT_IN_CAPACITY`` admits the null id for any ``num_slots``; the sizes
    rule out an empty pool, where every null-slot access would be out of
    bounds, and still admit a pool of the null block alone."""
    c = build(GEOMETRIES["odd"])
    assert POOL_HAS_NULL_BLOCK.name in [n for n, _ in c.assumptions]
    for num_slots, verdict in ((0, z3.unsat), (1, z3.sat)):
        s = z3.Solver()
        s.add(*[lift(f) for _, f in c.assumptions], lift(c.sizes.num_slots == num_slots))
        assert s.check() == verdict, num_slots


def test_a_part_s_name_prints_its_term_as_z3_does_once_per_term() -> None:
    """The int32 and memory-safety parts' names print their terms through
    ``goals.term_text``: Z3's text, the same string object for the same term
    (the cases share most terms, and printing one takes tens of ms)."""
    from replayssm.verify.goals import term_text
    from replayssm.verify.terms import named_int

    x = named_int("test.text_x")
    t = lift(x + 1) * 3
    assert term_text(t) == str(t) and term_text(t) is term_text(lift(x + 1) * 3) and term_text(5) == "5"
    name, _ = next(iter(REGISTRY["postprocess.int32"].build())).goal[0]
    assert name() == f"int32: {name.__defaults__[0]}"
