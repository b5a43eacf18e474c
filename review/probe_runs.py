"""Running a version's probes for its review, each outcome as it ends.

:func:`probe_outcomes` runs every probe of :mod:`.probes` on one version in
its share of the time left (:func:`.probes.share`) and yields each
:class:`~replayssm.review.verdict_parts.ProbeOutcome` as it ends; a probe's
finding that stays with its assumption restored is the outcome's
``independent`` counterexample. Cut short by an interrupt, it yields the
probe that was running as ``interrupted`` (with the counterexample it had
seen, if any) before the interrupt passes on.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from replayssm.base.interrupts import Interrupted

if TYPE_CHECKING:
    from .campaign import Version

from .verdict_parts import Counterexample, ProbeOutcome

CAMPAIGN_SHARE = 0.4
"""The share of ``--budget`` a version's lifecycle campaign gets; its probes share
the rest (what the campaign left of the budget: :func:`.probes.share`), and so
do base's probes with ``--base``."""


def probe_outcomes(v: Version, args: argparse.Namespace, traces: Path, out: TextIO, *, deadline: float,
                   only_latent_able: bool = False, known: frozenset[str] = frozenset(),
                   quiet_label: bool = True) -> Iterator[ProbeOutcome]:
    """Each probe of ``v`` (``only_latent_able``: those of assumptions vLLM does
    not guarantee), the unguaranteed ones first, each with ``--examples``
    examples and its share of the time left until ``deadline`` (a
    ``time.perf_counter()`` value) as its watchdog; ``known``: the properties
    the version breaks with every assumption kept (a probe looks for the
    others). Each is said on ``out`` as it ends (prefixed with the version's
    label unless ``quiet_label``)."""
    from .impact import with_impact
    from .probes import not_probed, probes, run_probe, share

    planned = sorted((p for p in probes() if not (only_latent_able and p.guaranteed)), key=lambda p: p.guaranteed)
    for n, probe in enumerate(planned):
        budget = share(probe, planned[n:], deadline - time.perf_counter())
        try:
            summary, result, independent = run_probe(probe, v, budget=budget, seed=args.seed, out_dir=traces,
                                                     device=args.device, examples=args.examples, known=known)
        except Interrupted as e:
            cut = not_probed(probe, "interrupted before it finished", "interrupted")
            if e.partial is not None and e.partial.trace is not None:
                cut.update(property=e.partial.prop, trace=e.partial.trace)
            yield ProbeOutcome(probe.name, cut)
            raise
        own = None
        if independent:  # what the schedule breaks with the assumption restored on its rows
            own = with_impact(Counterexample.of(independent.prop, independent.message, independent.trace, v.source,
                                                shrunk=False), v, args.device)
        elif summary.get("relied_on") and result.trace is not None:  # what goes wrong when vLLM breaks it
            relied = with_impact(Counterexample.of(str(result.prop), str(result.failure), result.trace, v.source,
                                                   shrunk=False), v, args.device)
            summary["impact"] = relied.impact.as_json() if relied.impact else None
        said = {"latent": f"LATENT: relied on ({result.prop}, {result.trace})",
                "relies on a guarantee": f"relied on a guarantee ({result.prop}, {result.trace})",
                "finding": f"a finding that does not depend on it ({independent.trace if independent else ''})",
                "not finished": f"not finished ({summary.get('why')})"}.get(summary["outcome"], summary["outcome"])
        print(f"  {'' if quiet_label else v.label + ' '}probe without {probe.name}: {said}", file=out, flush=True)
        yield ProbeOutcome(probe.name, summary, own)
