"""Probes: each caller assumption dropped in a step shape where it matters.

A probe names where the counterexample of one dropped caller assumption
shows (caller, geometry, step shape); ``docs/assumptions.md`` holds the
verdicts and ``scripts/assumption_traces.py`` renders the traces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from replayssm.spec import assumptions as env
from replayssm.spec.geometry import Geometry
from replayssm.spec.vocab import conj, negate

from .obligation import Claim
from .system_proofs import preservation_claim
from .system_steps import CaseRow, StepCase, Transition, case_transition, context, decode_row, prefill_row
from .system_world import SYSTEM_GEOMETRY, world_params

PROBE_GEOMETRIES: dict[str, Geometry] = {
    "system": SYSTEM_GEOMETRY,
    "wide_block": Geometry(max_num_reqs=2, block_size=4, window=2, ring_len=4),
    "unit_block": Geometry(max_num_reqs=2, block_size=1, window=2, ring_len=4),
}
"""``wide_block`` has blocks longer than the ring's step room (bs > R - W), so
``decode_row_fits`` is not implied by ``decode_within_block``; ``unit_block``
has decode rows longer than a block (R - W > bs)."""


@dataclass(frozen=True)
class SystemProbe:
    """Where to look for the counterexample of a set of assumptions dropped
    together (usually one; several when they overlap, each implying what the
    step needs of the others)."""

    assumptions: tuple[str, ...]
    conv: str
    geometry: str
    case: StepCase
    model_blocks: int = 2
    fresh: tuple[int, ...] | None = None  # override fresh slot ids (per request)

    @property
    def name(self) -> str:
        """The dropped set, ``+``-joined (a single assumption's own name)."""
        return "+".join(self.assumptions)


def probe_transition(pr: SystemProbe) -> Transition:
    p = world_params(pr.conv, PROBE_GEOMETRIES[pr.geometry], model_blocks=pr.model_blocks)
    p = replace(p, num_slots=2 * p.num_cols + 3)
    return case_transition(p, pr.case, pr.fresh)


def probe_claim(pr: SystemProbe, drop: bool | tuple[str, ...] = True, cover_violation: bool = False) -> Claim:
    """The probe's step shape with its set dropped (``drop=True``), some
    members of it (a tuple), or nothing (``False``). With
    ``cover_violation`` the claim covers only states that violate a dropped
    assumption, so a proof says whether the drop removed anything
    (non-vacuous) or the kept assumptions imply the dropped ones (vacuous)."""
    t = probe_transition(pr)
    dropped = pr.assumptions if drop is True else tuple(drop or ())
    if set(dropped) - set(pr.assumptions):
        raise ValueError(f"{sorted(set(dropped) - set(pr.assumptions))} are not in the probe's set "
                         f"{list(pr.assumptions)}")
    cover = negate(conj(*[x for n, x in context().grouped(t.assumptions) if n in dropped])) if cover_violation else True
    return preservation_claim(t, f"{'+'.join(dropped) or 'nothing'} dropped: {pr.conv} {pr.geometry} {pr.case.label}",
                              dropped=dropped, cover=cover)


def _case(*rows: CaseRow) -> StepCase:
    return StepCase(tuple(rows))



PROBES: dict[str, SystemProbe] = {pr.name: pr for pr in [
    SystemProbe((env.LIVE_COL_IS_LAST_BLOCK.name,), "v2-align", "system", _case(decode_row(0, 0, 0))),
    SystemProbe((env.DECODE_ROW_FITS.name,), "v2-align", "wide_block", _case(decode_row(0, 1, 1))),
    SystemProbe((env.ACCEPTED_WITHIN_ROW.name,), "v2-align", "system", _case(decode_row(0, 0, 0))),
    SystemProbe((env.ROW_NONEMPTY.name,), "v2-align", "system", _case(prefill_row(0, 0, 0))),
    SystemProbe((env.DECODE_WITHIN_BLOCK.name,), "v2-align", "unit_block", _case(decode_row(0, 0, 2)), model_blocks=3),
    SystemProbe((env.PREFILL_CHUNK_ON_BOUNDARY.name,), "v2-align", "system", _case(prefill_row(0, 0, 1))),
    SystemProbe((env.FRESH_DISTINCT_DESTINATIONS.name,), "v2-align", "system",
          _case(prefill_row(1, -1, 0), prefill_row(0, -1, 0)), fresh=(5, 5)),
    SystemProbe((env.GROUPS_AGREE_ON_NULL.name,), "v2-align", "system", _case(decode_row(0, 0, 1))),
    SystemProbe((env.IS_PREFILLING_AGREES.name,), "v2-align", "system", _case(decode_row(0, 0, 0))),
    SystemProbe((env.FRESH_SLOT_IS_FREE.name,), "v2-align", "system", _case(prefill_row(0, -1, 0)), fresh=(3,)),
    SystemProbe((env.DECODE_ROW_FITS.name, env.ROW_NONEMPTY.name, env.ACCEPTED_WITHIN_ROW.name), "v2-align", "unit_block",
          _case(decode_row(0, 0, 0))),
]}
"""One probe per caller assumption the step relies on, and one per set of
overlapping assumptions needed only together: in ``unit_block`` (bs = 1) a
decode row that stays in block 0 has room for 0 tokens only, which each of
the three alone forbids (dropped one at a time the shape admits no state:
vacuous); dropped together, a 0-token decode breaks refinement
(docs/assumptions.md, "Needed jointly")."""
