"""``review --base``: the behavioural differences between base and head.

:func:`differences` yields each :class:`~replayssm.review.verdict_parts.Difference`
as it is found: the kernel roles both versions have, compared by proof
(:mod:`.kernel_diff`); head's findings replayed on base (a regression where
base passes); the changes of reliance on assumptions vLLM does not guarantee
(:func:`reliance`, base's probes yielded to ``base_probes``); base's own
campaign's findings replayed on head (a fix where head passes); then a
campaign of both on shared caller schedules, each distinct difference kept. It
ends with the count of request-steps where both conform (neutral), also when
interrupted (then the count so far; a difference its campaign was shrinking
is noted as first seen).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from replayssm.base.interrupts import Interrupted
from replayssm.base.reports import replay_command

if TYPE_CHECKING:
    from .campaign import Version

from .probe_runs import CAMPAIGN_SHARE, probe_outcomes
from .verdict_parts import Counterexample, Difference, ProbeOutcome


def differences(base: Version, head: Version, args: argparse.Namespace, traces: Path, out: TextIO,
                head_findings: Sequence[Counterexample], head_probes: Sequence[ProbeOutcome],
                base_probes: Callable[[ProbeOutcome], None]) -> Iterator[Difference]:
    """Each difference between ``base`` and ``head`` (module docstring), the
    same kind of the same property (and assumption) once; ``head_findings``
    and ``head_probes``: head's review so far; each of base's probes is
    passed to ``base_probes`` as it ends. Each campaign runs ``--examples``
    examples, ``--budget`` its watchdog."""
    from .campaign import campaign, replay
    from .kernel_diff import kernel_differences

    seen: set = set()

    def sampled(kind: str, prop: str | None, message: str, trace: str,
                assumption: str | None = None, both: bool = False) -> Iterator[Difference]:
        if (kind, prop, assumption) in seen:
            return
        seen.add((kind, prop, assumption))
        print(f"  {kind}: {message} ({trace})", file=out, flush=True)
        yield Difference(kind, "sampled", message, prop, assumption, trace,
                         replay_command(trace, base.source if kind == "fix" else head.source, recorded=both))

    neutral_steps = 0
    try:
        yield from (Difference.from_kernel_diff(e) for e in kernel_differences(base, head, traces, out))
        for c in head_findings:
            if c.trace is not None and replay(c.trace, [base], args.device)[0]:
                yield from sampled("regression", c.property, f"head breaks {c.message}; base does not", c.trace)
        for kind, name, prop, message, trace in reliance(base, head, args, traces, out, head_probes, base_probes):
            yield from sampled(kind, prop, message, trace, assumption=name)
        start = time.perf_counter()
        own = campaign((base,), budget=args.budget / 2, seed=args.seed, out_dir=traces, tag=f"{base.label}-base",
                       device=args.device, examples=args.examples, progress=out)
        for failure in own.failures:
            if replay(failure.trace, [head], args.device)[0]:
                yield from sampled("fix", failure.prop, f"base breaks {failure.message}; head does not", failure.trace)
        try:
            both = campaign((base, head), budget=max(args.budget - (time.perf_counter() - start), 1.0),
                            seed=args.seed + 7919, out_dir=traces, tag=f"{base.label}-vs-{head.label}-0",
                            device=args.device, examples=args.examples, progress=out)
        except Interrupted as e:
            if e.partial is not None:
                neutral_steps += e.partial.tally.request_steps
                for f in e.partial.failures:
                    yield from sampled(f.kind, f.prop, f.message if f.shrunk else
                                       f"{f.message} (as first seen: interrupted while shrinking)", f.trace,
                                       both=True)
            raise
        neutral_steps += both.tally.request_steps
        for f in both.failures:
            yield from sampled(f.kind, f.prop, f.message, f.trace, both=True)
    finally:
        yield Difference("neutral", "sampled", "request-steps on which base and head both conform",
                         request_steps=neutral_steps)


def reliance(base: Version, head: Version, args: argparse.Namespace, traces: Path, out: TextIO,
             head_probes: Sequence[ProbeOutcome], base_probes: Callable[[ProbeOutcome], None]
             ) -> Iterator[tuple[str, str, str | None, str, str]]:
    """Base's probes of the assumptions vLLM does not guarantee (each passed to
    ``base_probes``, in the probes' own share of the budget), then each change
    of reliance as ``(kind, assumption, property, message, trace)``: a fix
    (head stops relying) or a regression (head starts): :func:`.probes.reliance_changes`."""
    from .probes import reliance_changes

    ran = []
    for p in probe_outcomes(base, args, traces, out, only_latent_able=True, quiet_label=False,
                            deadline=time.perf_counter() + args.budget * (1 - CAMPAIGN_SHARE)):
        ran.append(p)
        base_probes(p)
    summaries = {p.name: p.summary for p in ran}
    for change in reliance_changes(base, head, summaries, {p.name: p.summary for p in head_probes}, args.device):
        yield change.kind, change.name, change.relying["property"], change.message, change.relying["trace"]
