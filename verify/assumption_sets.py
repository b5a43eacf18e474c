"""Caller assumptions that are needed only jointly: dropped one by one, and as a set.

Two assumptions can overlap: each implies the part of the other that an
obligation needs, so dropping either alone proves, and only dropping both
gives a counterexample. A :class:`JointProbe` names such a set and the
obligation cases where it acts; :func:`drop_result` proves those cases with
some of the set removed from their named hypotheses, with the cover "a
dropped assumption is violated", so the verdict says which of three it is:

- ``failed`` with a counterexample: needed (the model breaks a goal part);
- ``proved``: redundant, non-vacuously (some admitted state violates a
  dropped assumption, and every goal part still holds);
- ``vacuous``: the kept assumptions imply the dropped ones (no admitted
  state violates them), so the drop removes nothing.

The verdicts are written up in docs/assumptions.md ("Needed jointly").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import z3

from replayssm.spec import assumptions as env

from . import catalog
from .obligation import Claim, Obligation, Result, prove
from .terms import lift


@dataclass(frozen=True)
class JointProbe:
    """A set of assumptions dropped together in the cases of one obligation
    whose label contains ``cases`` (all cases when empty)."""

    assumptions: tuple[str, ...]
    obligation: str
    cases: str = ""

    @property
    def name(self) -> str:
        return "+".join(self.assumptions)


JOINT_PROBES: list[JointProbe] = [
    JointProbe(env.TABLE_SHORT_BY_ONE.names, "postprocess.memory_safety", "/align/live"),
]
"""The sets measured to be needed jointly: each member dropped alone proves
(see :func:`drop_result`), the set dropped together gives a counterexample."""


def dropped_obligation(jp: JointProbe, dropped: tuple[str, ...]) -> Obligation:
    """``jp``'s obligation restricted to its cases, without the hypotheses
    named in ``dropped`` (each a member of ``jp``), covering states that
    violate one of them."""
    unknown = sorted(set(dropped) - set(jp.assumptions))
    if unknown:
        raise ValueError(f"{unknown} are not in the set {list(jp.assumptions)}")
    ob = catalog.REGISTRY[jp.obligation]

    def build() -> Iterator[Claim]:
        for c in ob.build():
            if jp.cases not in c.case:
                continue
            gone = [lift(x) for n, x in c.assumptions if n in dropped]
            kept = [(n, x) for n, x in c.assumptions if n not in dropped]
            if not gone:
                raise ValueError(f"{jp.obligation} {c.case} assumes none of {list(dropped)}")
            yield Claim(c.goal, kept, z3.Not(z3.And(*gone)), c.case, c.show, c.memories, strategy=c.strategy)

    return Obligation(f"{jp.obligation} without {'+'.join(dropped)}", ob.transition, ob.statement, build)


def drop_result(jp: JointProbe, dropped: tuple[str, ...]) -> tuple[str, Result]:
    """``(verdict, result)``: the verdict is ``failed`` (a counterexample),
    ``proved`` (non-vacuously) or ``vacuous`` (see the module docstring)."""
    r = prove(dropped_obligation(jp, dropped))
    if r.status == "failed" and r.counterexample is None and "vacuous" in r.detail:
        return "vacuous", r
    return r.status, r
