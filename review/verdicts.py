"""A review's verdicts and what is written of them: the verdict table, the
``--json`` document (schema :data:`REPORT_SCHEMA`), the ``--junit`` test
cases (one per campaign, probe and comparison: :func:`junit_cases`) and,
after an interrupt, what was and was not reviewed."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from replayssm.base.escape import one_line
from replayssm.base.interrupts import Interrupted
from replayssm.base.reports import JunitCase, replay_command, write_json, write_junit, write_reports

from .impact import Impact
from .verdict_parts import (
    KERNEL_PROOF,
    PROBE,
    ContractNote,
    Counterexample,
    Difference,
    KernelFinding,
    LatentReliance,
    ProbeOutcome,
    ReviewParts,
    kernel_findings,
)

REPORT_SCHEMA = "replayssm-review/2"
"""The ``schema`` of the ``--json`` report: bumped when a field changes meaning
(2: the ``latent`` status and list, each probe's ``outcome`` and provenance,
``base_assumptions``, a difference's ``assumption``)."""

LIFECYCLE = "lifecycle campaign"
KERNEL_PROOFS = "kernel proofs"
DIFFERENTIAL = "against the base (differential)"
"""The parts of a version's review besides its probes (``probe without NAME``),
as :attr:`Verdict.unfinished` and the JUnit test cases name them."""

UNREAD = "held where read (deviates where nobody reads)"
"""A property broken only where no consumer reads (its impact, ``review/impact.py``): a note."""

SUITE = "replayssm-verify review"
"""The JUnit test suite's name."""


@dataclass(frozen=True)
class Verdict:
    """One version's review, built once from its parts (:func:`build_verdict`)."""

    label: str
    source: str
    api: str
    summary: str
    properties: dict[str, str] = field(default_factory=dict)
    findings: tuple[Counterexample, ...] = ()
    """The lifecycle campaign's counterexample, then each probe's that stays with its assumption restored."""
    probes: tuple[ProbeOutcome, ...] = ()
    """Each probe's outcome, in the order they ran (the JSON's ``assumptions``)."""
    base_probes: tuple[ProbeOutcome, ...] = ()
    """With a base: base's probes of the assumptions vLLM does not guarantee."""
    kernel_proofs: dict | None = None
    kernel_findings: tuple[KernelFinding, ...] = ()
    campaign: dict = field(default_factory=dict)
    differences: tuple[Difference, ...] = ()
    coverage_shortfall: tuple[str, ...] = ()
    notes: tuple[ContractNote, ...] = ()
    """Deviations no consumer reads (a launch clause says so): the ``note`` verdict."""
    strict: bool = False
    """``--strict``: a note counts as a finding."""
    unfinished: tuple[str, ...] = ()
    """The parts of the review not done (an interrupt): :data:`LIFECYCLE`,
    ``probe without NAME``, :data:`DIFFERENTIAL`."""
    locations: dict | None = None
    """Where its kernels are in its source and which lines differ from the base (:mod:`.locations`)."""

    @property
    def latent(self) -> list[LatentReliance]:
        """The probes whose counterexample needs an assumption vLLM does not guarantee (kind
        :data:`PROBE`), then the kernel obligations proved only under a launch clause vLLM does not
        guarantee (kind :data:`KERNEL_PROOF`; no trace: the proof without the clause names the clause,
        :func:`.kernel_proofs.kernel_proofs`)."""
        return [*(LatentReliance(PROBE, p.name, p.property, p.message, p.trace,
                                 replay_command(str(p.trace), self.source), p.summary.get("impact"))
                  for p in self.probes if p.outcome == "latent"),
                *(LatentReliance(KERNEL_PROOF, clause, r["obligation"],
                                 f"kernel obligation {r['obligation']} is proved only under the launch clause {clause}, "
                                 f"which vLLM does not guarantee: without it the proof fails")
                  for r in _kernel_results(self.kernel_proofs) for clause in r.get("relies_on", ()))]

    @property
    def kernel_proofs_undecided(self) -> list[str]:
        """Kernel obligations neither proved nor shown failing on the real kernel (an unknown
        proof; a failure whose counterexample has no small launch, does not replay, or was not
        replayed): a coverage shortfall."""
        from .kernel_proofs import REPLAYED_FINDINGS

        return [f"kernel obligation {r['obligation']} " + (
                    f"{r['status']}: not decided by the prover" if r["status"] != "failed" else
                    f"failed ({r['case']}: {r['violated']}) but its counterexample "
                    + (f"{r['replayed']} on the real kernel" if "replayed" in r else "was not replayed")
                    + ": not decided")
                for r in _kernel_results(self.kernel_proofs)
                if r["status"] != "proved" and r.get("replayed") not in REPLAYED_FINDINGS]

    @property
    def shortfall(self) -> list[str]:
        """Every coverage shortfall: the campaign's, the probes not finished, the kernel obligations undecided."""
        return [*self.coverage_shortfall, *self.probes_not_finished, *self.kernel_proofs_undecided]

    @property
    def probes_not_finished(self) -> list[str]:
        """Probes of assumptions vLLM does not guarantee that ran out of time: a coverage shortfall."""
        return [f"probe without {p.name} not finished: {p.why}" for p in self.probes
                if p.outcome == "not finished" and not p.guaranteed]

    @property
    def status(self) -> str:
        """``finding`` (a property broken inside the contract, a kernel
        obligation failed with a counterexample that replays; a regression counts),
        ``interrupted``, ``latent`` (a property broken only when vLLM breaks an
        assumption it does not guarantee), ``coverage shortfall`` (too few
        request-steps, a required scenario missed, a probe of an unguaranteed
        assumption not finished), ``note`` (every property held; a deviation
        no consumer reads: a finding with :attr:`strict`) or ``pass``."""
        if (self.findings or self.kernel_findings or any(d.kind == "regression" for d in self.differences)
                or (self.strict and self.notes)):
            return "finding"
        if self.unfinished:
            return "interrupted"
        if self.latent:
            return "latent"
        if self.shortfall:
            return "coverage shortfall"
        return "note" if self.notes else "pass"


def _kernel_results(kernel_proofs: dict | None) -> list[dict]:
    """The per-obligation results of a kernel-proofs document (none where no kernel applies)."""
    return list((kernel_proofs or {}).get("results", ()))


def build_verdict(label: str, source: str, api: str, summary: str, parts: ReviewParts,
                  planned: Sequence[str] = (), locations: dict | None = None, strict: bool = False) -> Verdict:
    """The verdict of one version from its ``parts`` (:class:`ReviewParts`):
    its properties are the lifecycle campaign's, each broken by a finding
    (the campaign's, a probe's that stays with the assumption restored, or
    the fault at import; one per property, the first found) marked broken;
    the parts of ``planned`` not in
    ``parts.done`` are unfinished."""
    life = parts.lifecycle
    found = [*([parts.fault] if parts.fault else []), *(life.counterexamples if life else ()),
             *(p.independent for p in parts.probes if p.independent is not None)]
    unread = [f for f in found if f.impact is not None and not f.impact.read]
    found = [f for f in found if f not in unread]
    findings = [f for n, f in enumerate(found) if f.property not in {g.property for g in found[:n]}]
    properties = dict(life.properties) if life else {}
    properties.update({f.property: "broken" for f in findings})
    properties.update({f.property: UNREAD for f in unread if f.property not in {g.property for g in findings}})
    kernel = kernel_findings(parts.kernel_proofs)
    unread_kernel = [k for k in kernel if k.impact is not None and not k.impact.read]
    notes = (*(life.notes if life else ()), *(_unread(f.property, f.message, f.trace, f.replay, f.impact)
                                              for f in unread),
             *(_unread(k.property, k.message, k.trace, k.replay, k.impact) for k in unread_kernel))
    return Verdict(label, source, api, summary, properties=properties, findings=tuple(findings),
                   probes=tuple(parts.probes), base_probes=tuple(parts.base_probes),
                   kernel_proofs=parts.kernel_proofs,
                   kernel_findings=tuple(k for k in kernel if k not in unread_kernel),
                   campaign={**(life.campaign if life else {}), **parts.timings},
                   differences=tuple(parts.differences), coverage_shortfall=life.coverage_shortfall if life else (),
                   notes=notes, strict=strict, unfinished=tuple(p for p in planned if p not in parts.done),
                   locations=locations)


def _unread(prop: str, message: str, trace: str | None, replay: str | None, impact: Impact | None) -> ContractNote:
    """A property broken where no consumer reads (its impact says whose): a note, a finding with ``--strict``."""
    assert impact is not None
    return ContractNote(f"{prop}: {impact.whose}, nobody reads it", f"{message} ({impact.sentence})", trace or "",
                        replay or "")


def verdict_json(v: Verdict) -> dict:
    """One version's verdict as the ``--json`` report holds it; each finding,
    kernel finding and difference carries the source line it is reported at
    (``location``)."""
    from .locations import locate, locate_kernel_finding

    def located(entries: list[dict], follow_change: bool = True) -> list[dict]:
        return [{**e, "location": locate(v.locations, e, follow_change)} if e.get("kind") != "neutral" else e
                for e in entries]

    return {"version": v.label, "source": v.source, "api": v.api, "generation": v.summary, "status": v.status,
            "properties": v.properties, "findings": located([f.as_json() for f in v.findings]),
            "kernel_findings": [{**k, "location": locate_kernel_finding(v.locations, k, v.source)}
                                for k in (f.as_json() for f in v.kernel_findings)],
            "latent": located([x.as_json() for x in v.latent], follow_change=False),
            "assumptions": {p.name: p.summary for p in v.probes},
            "base_assumptions": {p.name: p.summary for p in v.base_probes}, "kernel_proofs": v.kernel_proofs,
            "campaign": v.campaign, "differences": located([d.as_json() for d in v.differences]),
            "coverage_shortfall": v.shortfall,
            "notes": [n.as_json() for n in v.notes], "unfinished": list(v.unfinished),
            "locations": v.locations}


CLOCK_FIELDS = ("seconds", "cpu_seconds", "total_seconds", "differential_seconds", "budget_seconds")
"""The fields of a verdict the clock decides (every other one the seed and the options decide)."""


def timeless(verdicts: list[dict], traces: str) -> list[dict]:
    """A ``--json`` report's ``verdicts`` without what the clock decides (the fields ending in
    :data:`CLOCK_FIELDS`) and with the ``--traces`` folder ``traces`` named ``TRACES``: two reviews
    with the same seed and options give equal results."""
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.endswith(CLOCK_FIELDS)}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x.replace(traces, "TRACES") if isinstance(x, str) else x

    return strip(verdicts)  # type: ignore[return-value]


def _counterexample(finding: dict) -> str:
    """A finding or difference as a JUnit failure text: what broke, its trace and
    how to replay it, and the trace's system and caller schedule."""
    from .campaign import describe_schedule

    if "kernel_diff" in finding or finding.get("evidence") == "proved":  # a kernel launch, not a caller schedule
        return "\n".join([finding["message"], *(f"{k}: {finding[k]}" for k in ("trace", "replay") if k in finding)])
    if finding.get("trace") is None:  # a fault at import: its words and the target's output are the evidence
        return finding["message"]
    try:
        schedule = describe_schedule(finding["trace"])
    except (OSError, ValueError, KeyError) as e:
        schedule = [f"(the trace cannot be read: {e})"]
    return "\n".join([finding["message"], f"trace: {finding['trace']}", f"replay: {finding['replay']}", *schedule])


def _probe_case(v: Verdict, name: str, r: ProbeOutcome | None) -> JunitCase:
    """A probe's test case: failed by a latent reliance or a finding that does not
    depend on the assumption (with the counterexample); relying on a guarantee or
    no counterexample passes; an error when a probe of an unguaranteed assumption
    did not finish; skipped when it did not run."""
    case = f"{v.label}: probe without {name}"
    if r is None:
        return JunitCase(case, 0.0, "interrupted before it ran", "skipped")
    seconds = r.seconds
    if r.outcome == "latent":
        latent = next(x for x in v.latent if x.kind == PROBE and x.assumption == name)
        return JunitCase(case, seconds, f"latent: relies on {name}, which vLLM does not guarantee\n"
                         + _counterexample(latent.as_json()))
    if r.outcome == "finding":
        own = [r.independent] if r.independent is not None else []
        return JunitCase(case, seconds, "\n\n".join(_counterexample(f.as_json()) for f in own))
    if r.outcome == "not finished":
        return JunitCase(case, seconds, r.why, "skipped" if r.guaranteed else "error")
    if r.outcome in ("not probed", "interrupted"):
        return JunitCase(case, seconds, r.why, "skipped")
    return JunitCase(case, seconds)


def junit_cases(verdicts: list[Verdict], not_reviewed: Sequence[str] = ()) -> list[JunitCase]:
    """Per version: its lifecycle campaign (failed by a finding, an error for a
    coverage shortfall), its kernel proofs where any apply (failed by each
    kernel finding, with its counterexample's trace and replay), one case per assumption probe (:func:`_probe_case`)
    and, with a base, the comparison (failed by each regression, of a property
    or of reliance). After an interrupt, a part not finished is ``skipped`` with
    what it had done, unless it already failed, and each version not reviewed
    is one skipped case."""
    cases = []
    for v in verdicts:
        from_probes = [p.independent for p in v.probes]
        failure = "\n\n".join([*(_counterexample(f.as_json()) for f in v.findings if f not in from_probes),
                                *(f"note ({n.clause}), a finding with --strict: {n.message}\ntrace: {n.trace}"
                                  for n in v.notes if v.strict)]) or None
        kind = "failure"
        if failure is None and LIFECYCLE in v.unfinished:
            failure, kind = f"interrupted after {v.campaign.get('request_steps', 0)} request-steps", "skipped"
        elif failure is None and v.coverage_shortfall:
            failure, kind = "coverage shortfall: " + "; ".join(v.coverage_shortfall), "error"
        cases.append(JunitCase(f"{v.label}: {LIFECYCLE}", v.campaign.get("seconds", 0.0), failure, kind))
        kp = v.kernel_proofs or {}
        if kp.get("applies"):
            failure = "\n\n".join([*(_counterexample(f.as_json()) for f in v.kernel_findings),
                                    *(f"latent: {x.message}" for x in v.latent if x.kind == KERNEL_PROOF)]) or None
            undecided = "; ".join(v.kernel_proofs_undecided)
            cases.append(JunitCase(f"{v.label}: {KERNEL_PROOFS}", kp.get("seconds", 0.0),
                                   failure or (f"coverage shortfall: {undecided}" if undecided else None),
                                   "failure" if failure or not undecided else "error"))
        ran = {p.name: p for p in v.probes}
        probes = [*ran, *(p.removeprefix("probe without ") for p in v.unfinished
                          if p.startswith("probe without ") and p.removeprefix("probe without ") not in ran)]
        cases += [_probe_case(v, name, ran.get(name)) for name in probes]
        if v.differences or DIFFERENTIAL in v.unfinished:
            regressions = [d for d in v.differences if d.kind == "regression"]
            failure, kind = "\n\n".join(_counterexample(d.as_json()) for d in regressions) or None, "failure"
            if failure is None and DIFFERENTIAL in v.unfinished:
                failure, kind = "interrupted before the comparison finished", "skipped"
            cases.append(JunitCase(f"{v.label}: {DIFFERENTIAL}", v.campaign.get("differential_seconds", 0.0),
                                   failure, kind))
    cases += [JunitCase(f"{label}: not reviewed", 0.0, "interrupted before this version was reviewed", "skipped")
              for label in not_reviewed]
    return cases


def evidence(v: Verdict) -> str:
    """How each claim of the verdict is known: the kernel obligations are
    proved (how many hold, each failure named with how its counterexample
    replayed), the lifecycle properties and the campaign's comparison with
    the base are sampled; each kernel role compared with the base is proved
    (equal, or its class)."""
    proved = [f"{str(d.property).removeprefix('kernel ')} {d.kind}" for d in v.differences if d.evidence == "proved"]
    parts = [kernel_evidence(v.kernel_proofs), "properties sampled"]
    if proved:
        parts.append(f"vs base proved: {', '.join(proved)}")
    if any(d.evidence == "sampled" for d in v.differences):
        parts.append("vs base sampled")
    return "; ".join(parts)


def kernel_evidence(kp: dict | None) -> str:
    """The kernel obligations' part of the evidence column."""
    if not kp or not kp.get("applies"):
        return "kernel obligations: none"
    res = kp["results"]
    failed = [f"{r['obligation'].removeprefix('kernel.').split('@')[0]} {r['status']}"
              + (f", {r['replayed']}" if "replayed" in r else "") for r in res if r["status"] != "proved"]
    return (f"kernel obligations proved {sum(r['status'] == 'proved' for r in res)}/{len(res)}"
            + (f" ({'; '.join(failed)})" if failed else ""))


def print_table(verdicts: list[Verdict], out: TextIO | None, wide: bool = False) -> None:
    """The verdict table: version, API, properties, verdict, the assumptions
    relied on (latent: vLLM does not guarantee them; guaranteed: information),
    probes not finished, notes, evidence (proved or sampled, per claim), the
    findings' (kernel findings' too) and differences' traces, and each
    finding's impact. Every line within 120 columns: one row per version with
    the counts (cells wrap in their columns: :mod:`.text_table`), then the
    version's lists, one per line, wrapped. ``wide``: one line per version
    with every list in its column, as wide as they are."""
    rows = [("version", "API", "properties", "verdict", "latent (not guaranteed)", "relies on (guaranteed)",
             "probes not finished", "notes (nobody reads)", "evidence", "findings / traces")]
    for v in verdicts:
        held = [p for p, s in v.properties.items() if s != "broken"]
        broken = [p for p, s in v.properties.items() if s == "broken"]
        props = (f"{len(held)}/{len(v.properties)} held{' so far' if LIFECYCLE in v.unfinished else ''}"
                 + (f"; broken: {', '.join(broken)}" if broken else ""))
        outcomes = {p.name: p.outcome for p in v.probes}
        probed = any(o not in ("not probed", "interrupted") for o in outcomes.values())
        kernel_latent = [x.assumption for x in v.latent if x.kind == KERNEL_PROOF]
        latent = ", ".join([*(n for n, o in outcomes.items() if o == "latent"), *dict.fromkeys(kernel_latent)]) or (
            "-" if probed else "not probed")
        relied = ", ".join(n for n, o in outcomes.items() if o == "relies on a guarantee") or "-"
        unfinished = str(sum(o == "not finished" for o in outcomes.values())) if probed else "-"
        notes = ([f.trace + ("" if f.shrunk else " (unshrunk)") if f.trace else f.message.splitlines()[0]
                  for f in v.findings]
                 + [f"{k.property} (proved): {k.trace}" for k in v.kernel_findings]
                 + [f"latent: {x.trace}" for x in v.latent if x.kind == PROBE and x.trace]
                 + [f"{d.kind}{' of reliance on ' + d.assumption if d.assumption else ''} "
                    f"({d.evidence}): {d.trace}" for d in v.differences
                    if d.kind not in ("neutral", "equal") and "trace" in d.as_json()]
                 + [*v.coverage_shortfall, *v.kernel_proofs_undecided])
        unread = ", ".join(n.clause for n in v.notes) or "-"
        rows.append((v.label, v.api, props, v.status, latent, relied, unfinished, unread, evidence(v),
                     "; ".join(notes) or "-"))
    cells = [[one_line(c) for c in r] for r in rows]  # a newline in a file name cannot start a row
    if wide:
        widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]) - 1)]
        for r in cells:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1], file=out)
        for v in verdicts:
            for what, prop, impact in impacts(v):
                print(one_line(f"impact: {v.label} {what} ({prop}): {impact['sentence']}"), file=out)
        return
    from .text_table import layout, wrapped

    head = ["version", "API", "verdict", "properties", "latent", "relies on", "unfinished", "notes"]
    counts = [[r[0], r[1], r[3], r[2], *(str(len(x.split(", "))) if x not in ("-", "not probed") else x
                                       for x in (r[4], r[5])), r[6], str(len(v.notes))]
              for v, r in zip(verdicts, cells[1:])]
    lines = layout([head, *counts])
    for v, r in zip(verdicts, cells[1:]):
        lines += wrapped(f"{r[0]} latent (not guaranteed): {r[4]}", indent="") if r[4] not in ("-",) else []
        lines += wrapped(f"{r[0]} relies on (guaranteed): {r[5]}", indent="") if r[5] != "-" else []
        lines += wrapped(f"{r[0]} notes (nobody reads): {r[7]}", indent="") if r[7] != "-" else []
        lines += wrapped(f"{r[0]} evidence: {r[8]}", indent="")
        traces = [] if r[9] == "-" else r[9].split("; ")
        lines += [f"{r[0]} findings / traces ({len(traces)}):"] if traces else []
        for t in traces:
            lines += wrapped(t)
        for what, prop, impact in impacts(v):
            lines += wrapped(one_line(f"impact: {v.label} {what} ({prop}): {impact['sentence']}"), indent="")
    print("\n".join(lines), file=out)


def impacts(v: Verdict) -> list[tuple[str, str, dict]]:
    """Each finding's, kernel finding's and latent reliance's impact (the JSON's ``impact``) as
    ``(what, property, impact)``, those whose impact is known."""
    out = [("finding", f.property, f.impact.as_json()) for f in v.findings if f.impact is not None]
    out += [("kernel finding", k.property, k.impact.as_json()) for k in v.kernel_findings if k.impact is not None]
    out += [(f"latent on {x.assumption}", str(x.property), x.impact) for x in v.latent if x.impact]
    return out


def interrupted_summary(e: Interrupted, verdicts: list[Verdict], not_reviewed: list[str]) -> str:
    """After an interrupt: how much was reviewed, each version's parts not
    finished, and the versions not reviewed."""
    whole = sum(not v.unfinished for v in verdicts)
    lines = [f"{e}: {whole} of {len(verdicts) + len(not_reviewed)} version(s) reviewed in full"]
    for v in verdicts:
        if v.unfinished:
            lines.append(f"  {v.label}: {v.campaign.get('request_steps', 0)} request-steps judged, "
                         f"{len(v.findings)} finding(s) so far; not finished: {', '.join(v.unfinished)}")
    if not_reviewed:
        lines.append(f"  not reviewed: {', '.join(not_reviewed)}")
    return "\n".join(lines)


def write_verdicts(args: argparse.Namespace, verdicts: list[Verdict], interrupted: bool,
                   not_reviewed: list[str], timelines: Callable[[dict], dict] = lambda document: {}) -> bool:
    """Write ``--json``, ``--junit``, ``--sarif`` and ``--html`` (each that was
    asked for; ``timelines`` replays the document's finding traces for the
    page). One that cannot be written (its folder removed during the review)
    is reported, naming the option, the others still written; returns whether
    every one was."""
    from replayssm.base.html_report import write_html
    from replayssm.base.html_review import review_html
    from replayssm.base.sarif import review_issues, write_sarif

    document = {"verdicts": [verdict_json(v) for v in verdicts], "interrupted": interrupted,
                "not_finished": [f"{v.label}: {p}" for v in verdicts for p in v.unfinished],
                "not_reviewed": not_reviewed}
    page = review_html(document, timelines(document)) if args.html else ""  # timelines run the versions: before
    return write_reports([  # write_reports ends their processes
        ("--json", args.json, lambda: write_json(args.json, REPORT_SCHEMA, document)),
        ("--junit", args.junit, lambda: write_junit(args.junit, SUITE, junit_cases(verdicts, not_reviewed),
                                                    interrupted)),
        ("--sarif", args.sarif, lambda: write_sarif(args.sarif, review_issues(document))),
        ("--html", args.html, lambda: write_html(args.html, page)),
    ], f"the table above lists every finding, its trace under --traces {args.traces}")
