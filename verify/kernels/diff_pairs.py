"""Both versions' programs of one kernel variant over the same symbolic inputs, and the claim that they agree.

Every input of a case is a named Z3 term (``mem_<buffer>`` arrays,
``batch_p``, ``num_reqs``, ...), so two cases built from one variant share
them; a :class:`PairCase` holds both, the hypotheses split into those the
diff decides under (the launch contract and the guaranteed caller contract,
:func:`guaranteed`) and the others, and per buffer either version writes
the part saying their final values agree (:func:`equality_parts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import z3

from replayssm.spec import assumptions as env

from ..terms import Fact, lift, named_int
from .cases import KernelCase
from .obligations import Part, kernel_case
from .roles import KernelRole

LAUNCH_CONTRACT = (env.BATCH_IN_LAUNCH.name, "int32_sizes", "num_reqs_in_capacity")
"""Hypotheses about the launch itself, the role's launch contract (the
program's ids inside the grid, the sizes int32, ``num_reqs`` within the
capacity), whatever their provenance as caller facts."""


def guaranteed(name: str) -> bool:
    """Whether the diff decides under hypothesis ``name``: a launch-contract
    fact, a guaranteed caller fact, or the proofs' own structure."""
    from replayssm.spec.contract import PROOF, classify
    from replayssm.spec.provenance import GUARANTEED

    return name in LAUNCH_CONTRACT or classify(name) in (GUARANTEED, PROOF)


def _size(params: tuple) -> tuple:
    """A variant's order for minimisation: rows, block, window, ring."""
    geo = next((p for p in params if hasattr(p, "ring_len")), None)
    if geo is None:
        return (params[0],)
    return (geo.max_num_reqs, geo.block_size, geo.window, geo.ring_len)


def smallest_first(role: KernelRole) -> list[tuple[str, tuple]]:
    """The role's variants, smallest geometry first."""
    return sorted(role.variants(), key=lambda v: _size(v[1]))


@dataclass
class PairCase:
    """One variant of one role, both versions over the same symbolic inputs."""

    role: KernelRole
    """Head's record (base's too, within one generation)."""
    label: str
    base: KernelCase
    head: KernelCase
    guaranteed: list
    optional: list
    parts: list[Part]
    base_role: KernelRole

    @property
    def padding(self) -> bool:
        """Whether the pair is of padding programs (row ``num_reqs <= batch < max_num_reqs``)."""
        return self.head.padding


def _facts(cases: list[KernelCase]) -> list[Fact]:
    out, seen = [], set()
    for c in cases:
        for name, term in c.assumptions:
            key = (name, lift(term).get_id())
            if key not in seen:
                seen.add(key)
                out.append((name, term))
    return out


def equality_parts(base: KernelCase, head: KernelCase) -> list[Part]:
    """Per buffer either version writes: at an arbitrary cell inside it, the
    two final values agree."""
    written = dict.fromkeys([w.buffer for w in base.mem.writes] + [w.buffer for w in head.mem.writes])
    parts = []
    for b in written:
        shape = head.mem.shapes[b]
        cell = tuple(named_int(f"cell_{b}_{d}") for d in range(len(shape)))
        inside = z3.And(*[z3.And(lift(i) >= 0, lift(i) < lift(n)) for i, n in zip(cell, shape)])
        x, y = base.mem.final(b, cell), head.mem.final(b, cell)
        parts.append(Part(b, z3.Implies(inside, lift(x) == lift(y)), ("", 0), head.mem.program,
                          {"cell": cell, "base": x, "head": y}))
    return parts


def pair_case(base: ModuleType, head: ModuleType, role: KernelRole, label: str, params: tuple,
              head_role: KernelRole | None = None, head_params: tuple | None = None,
              padding: bool = False) -> PairCase:
    """Both versions' programs of one variant (an ``Unsupported`` construct
    propagates); ``head_role``: head's record of the role when head is of
    another generation (its case of the same variant label); ``padding``:
    their padding programs (both records must have them), each beside its
    version's row program (:func:`padding_beside`)."""
    theirs = params if head_params is None else head_params
    b = kernel_case(base, role, label, params)
    h = kernel_case(head, head_role or role, label, theirs)
    rows = [b, h]
    if padding:
        b, h = padding_beside(base, role, label, params, b), padding_beside(head, head_role or role, label, theirs, h)
    facts = _facts(rows + [b, h] if padding else rows)
    if padding:  # the row program p is one of the padding program's launch
        facts.append((env.BATCH_IN_LAUNCH.name, lift(rows[1].row[1] == h.row[1])))
    kept = [f for f in facts if guaranteed(f[0])]
    optional = [f for f in facts if not guaranteed(f[0])]
    return PairCase(head_role or role, label, b, h, kept, optional, equality_parts(b, h), role)


def padding_beside(module: ModuleType, role: KernelRole, label: str, params: tuple, row: KernelCase) -> KernelCase:
    """A padding program (``q``) of ``module``'s kernel of ``role`` beside its
    row program ``row`` (``p``), over ``row``'s arrays and sizes: the pair's
    facts keep ``p``'s too, so a distinguishing launch's real row is one of the
    caller contract (a padding program's own assume nothing of the rows), and
    its replay judges what the padding program changes."""
    found = role.jit(module)
    assert found is not None and role.padding is not None, f"{role.name}: no padding programs in {module.__name__}"
    return role.padding(found[1], label, params, row)


