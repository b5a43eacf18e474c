"""``review --html FILE``: the review's page for people, each bug once.

Built from the review's ``--json`` document and its findings' timelines
(``review/timeline.py``). Each bug is one card (:func:`bugs`): a version's
lifecycle finding and its kernel findings that name the same kernel and the
same kind of harm (:data:`FAMILY`: a memory finding of the lifecycle, a
kernel's ``memory_safety`` and ``frame`` failures) are the evidence of one
bug; each latent reliance, regression and fix is its own. A card says, in
this order:

1. the **impact** in vLLM's terms (the finding's ``impact``,
   ``review/impact.py``): whose state goes wrong, what the next forward pass
   computes from it, the input shape that reaches it;
2. the **next step**: the replay command, the smallest input (the failing
   step of the shrunk trace, or the kernel proof's one launch), and the
   assumption to check (a latent reliance's assumption with why vLLM does
   not guarantee it; for a finding, the assumptions its trace dropped, or
   none);
3. the **evidence**, each piece as it was found (where in the kernel source,
   the message, a proved difference's input, its replay command);
4. the **lifecycle, step by step** (``html_report.timeline_html``): the rows,
   each slot's trackers and ring rows with the cells that changed marked,
   each written cell naming what wrote it (a kernel's store line, FlashInfer
   as modelled, the host: ``review/store_lines.py``), and the slot that broke
   drawn as it broke, with the stores that wrote it.

The page fits 1,400 px: tables and code wrap inside the page's width.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .html_report import _distinction, _e, _source_line, _status, _table, assumptions_html, page, timeline_html

FAMILY = {"memory": "memory", "memory_safety": "memory", "frame": "memory", "conflicts": "memory",
          "refinement": "state", "canonical": "state", "forward": "state", "equivalence": "state"}
"""The kind of harm a property names: a lifecycle property and a kernel obligation of one family, in one
kernel, are evidence of one bug (a property not listed is its own family)."""

REVIEW_STYLE = """
section.finding .impact{font-size:15px;margin:4px 0 8px}section.finding .next{background:#f6f8fa;border-radius:6px;
padding:6px 12px;margin:8px 0}section.finding .next li{margin:3px 0}section.finding h4{margin:12px 0 4px}
.evidence{border-top:1px solid #eee;padding-top:4px}
"""


@dataclass
class Evidence:
    """One piece of a bug's evidence: its heading (what was found, how), the entry of the JSON document."""

    title: str
    entry: dict[str, Any]
    proved: bool = False


@dataclass
class Bug:
    """One card: the version, what kind of card (``finding``, ``latent``, ``regression``, ``fix``), the
    assumption a latent reliance names, and its evidence (lifecycle first)."""

    version: str
    kind: str
    evidence: list[Evidence] = field(default_factory=list)
    assumption: str | None = None

    @property
    def impact(self) -> dict[str, Any] | None:
        return next((e.entry["impact"] for e in self.evidence if e.entry.get("impact")), None)

    @property
    def traced(self) -> Evidence | None:
        """The evidence whose lifecycle trace the card draws (a campaign's, not a kernel proof's launch)."""
        return next((e for e in self.evidence if not e.proved and e.entry.get("trace")), None)


def _prop(entry: dict[str, Any]) -> str:
    """A finding's property, a kernel finding's without its role and target (``memory_safety``)."""
    p = str(entry.get("property", ""))
    return p.split("@")[0].rsplit(".", 1)[-1] if p.startswith("kernel.") else p


def bugs(verdict: dict[str, Any]) -> list[Bug]:
    """The version's bugs, each once (see the module docstring)."""
    label = verdict["version"]
    grouped: dict[tuple[str, str], Bug] = {}
    for f in verdict.get("findings", []):
        key = ((f.get("location") or {}).get("kernel", ""), FAMILY.get(_prop(f), _prop(f)))
        grouped.setdefault(key, Bug(label, "finding")).evidence.append(
            Evidence(f"{label}: {f.get('property')} broken (lifecycle campaign, sampled)", f))
    for k in verdict.get("kernel_findings", []):
        key = ((k.get("location") or {}).get("kernel", ""), FAMILY.get(_prop(k), _prop(k)))
        entry = {**k, "message": "\n\n".join(filter(None, (k.get("message"), k.get("explanation"))))}
        grouped.setdefault(key, Bug(label, "finding")).evidence.append(Evidence(
            f"{label}: {k['property']} failed (proved, {k.get('replayed')} on the real kernel)", entry, True))
    out = list(grouped.values())
    for x in verdict.get("latent", []):
        out.append(Bug(label, "latent", [Evidence(f"{label}: latent {x.get('property')}: relies on "
                                                  f"{x['assumption']}, which vLLM does not guarantee", x)],
                       x["assumption"]))
    for d in verdict.get("differences", []):
        if d.get("kind") in ("regression", "fix") or (d.get("kernel_diff") or {}).get("distinction"):
            out.append(Bug(label, str(d["kind"]), [Evidence(
                f"{label}: {d['kind']} ({d.get('evidence', 'sampled')}): {d.get('property')}", d,
                d.get("evidence") == "proved")], d.get("assumption")))
    return out


def _headline(bug: Bug) -> str:
    impact = bug.impact
    props = ", ".join(dict.fromkeys(_prop(e.entry) for e in bug.evidence))
    what = {"finding": f"{props} broken", "latent": f"latent: relies on {bug.assumption}",
            "regression": f"regression: {props}", "fix": f"fix: {props}"}.get(bug.kind, props)
    if impact is None:
        return f"{bug.version}: {what}"
    return f"{bug.version}: {impact['who']} ({impact['whose']}): {what}"


def _impact(bug: Bug) -> str:
    impact = bug.impact
    if impact is None:
        return '<p class="impact muted">Impact: not derived for this finding (its evidence below).</p>'
    read = "" if impact.get("read", True) else " <b>(nobody reads it: a deviation, not a bug)</b>"
    return (f'<p class="impact"><b>Impact:</b> {_e(impact["who"])} ({_e(impact["whose"])}){read}: '
            f'{_e(impact["next_pass"])}.<br><span class="muted">Reached by {_e(impact["shape"])}.</span></p>')


def _failing_step(timeline: dict[str, Any] | None) -> str | None:
    if not timeline or not timeline.get("steps"):
        return None
    steps = timeline["steps"]
    last = steps[-1]
    return f"step {last['step']} of a {len(steps)}-step schedule: {last['rows']}"


def _assumption_to_check(bug: Bug) -> str:
    from replayssm.spec import assumptions

    if bug.assumption:
        record = next((a for a in assumptions.ALL if a.name == bug.assumption), None)
        why = getattr(getattr(record, "provenance", None), "reason", "") or "see docs/assumptions.md"
        said = f": {record.statement}" if record is not None else ""
        return (f"<code>{_e(bug.assumption)}</code>{_e(said)}. vLLM does not promise it: {_e(why.rstrip('. '))}. "
                "Check whether the scheduler can break it; if it can, this is a bug, else ask for the promise.")
    where = next(((e.entry.get("location") or {}) for e in bug.evidence if e.proved), None) or \
        next(((e.entry.get("location") or {}) for e in bug.evidence), {})
    at = f" at <code>{_e(where.get('file'))}:{_e(where.get('line'))}</code>" if where else ""
    return f"none: it breaks with every caller assumption kept; read the kernel{at} with the input above."


def _next_step(bug: Bug, timelines: dict[str, dict]) -> str:
    replays = list(dict.fromkeys(e.entry["replay"] for e in bug.evidence if e.entry.get("replay")))
    traced = bug.traced
    smallest = _failing_step(timelines.get(traced.entry["trace"]) if traced else None)
    if smallest is None:
        proved = next((e for e in bug.evidence if e.proved), None)
        if proved is not None:
            smallest = f"one launch, the kernel proof's counterexample ({proved.entry.get('case', '')})"
    items = [f"<li><b>Reproduce:</b> " + " or ".join(f"<code>{_e(r)}</code>" for r in replays) + "</li>"
             if replays else ""]
    if smallest:
        items.append(f"<li><b>Smallest input:</b> {_e(smallest)}</li>")
    items.append(f"<li><b>Assumption to check:</b> {_assumption_to_check(bug)}</li>")
    return f'<div class="next"><b>Next step</b><ol>{"".join(items)}</ol></div>'


def _evidence(e: Evidence) -> str:
    where = e.entry.get("location") or {}
    at = (f'{_e(where.get("file"))}:{_e(where.get("line"))}' + (f' in <code>{_e(where["kernel"])}</code>'
                                                                 if where.get("kernel") else "")
          + (f' <span class="muted">({_e(where["why"])})</span>' if where.get("why") else "")) if where else "-"
    replay = f'<p>replay: <code>{_e(e.entry["replay"])}</code></p>' if e.entry.get("replay") else ""
    return (f'<div class="evidence"><h4>{_e(e.title)}</h4><p class="where">where: {at}</p>'
            f'{_source_line(where) if where else ""}<pre>{_e(e.entry.get("message", ""))}</pre>'
            f'{_distinction(e.entry)}{replay}</div>')


def bug_html(bug: Bug, timelines: dict[str, dict], shown: set[str]) -> str:
    """One bug's card (see the module docstring); ``shown``: the traces drawn above (each drawn once)."""
    traced = bug.traced
    trace = traced.entry["trace"] if traced else None
    if trace in shown:
        drawn = f'<p class="muted">Its lifecycle is drawn above ({_e(trace)}).</p>'
    else:
        drawn = timeline_html(timelines.get(trace or ""))
        if trace and drawn:
            shown.add(trace)
    return (f'<section class="finding"><h3>{_e(_headline(bug))}</h3>{_impact(bug)}{_next_step(bug, timelines)}'
            f'<h4>Evidence ({len(bug.evidence)})</h4>{"".join(_evidence(e) for e in bug.evidence)}{drawn}</section>')


def review_html(document: dict, timelines: dict[str, dict]) -> str:
    """A review's page from its ``--json`` document and its findings' timelines (by trace path)."""
    rows = []
    for v in document.get("verdicts", []):
        broken = [p for p, s in v.get("properties", {}).items() if s == "broken"]
        relied = [a for a, r in v.get("assumptions", {}).items() if r.get("relied_on") and r.get("outcome") != "latent"]
        latent = [x["assumption"] for x in v.get("latent", [])]
        rows.append([_e(v["version"]), _e(v.get("api")), _status(v["status"]),
                     _e(f"{len(v.get('properties', {})) - len(broken)}/{len(v.get('properties', {}))} held"
                        + (f"; broken: {', '.join(broken)}" if broken else "")),
                     _e(", ".join(latent) or "-"), _e(", ".join(relied) or "-"), _e(len(bugs(v)))])
    body = f"<style>{REVIEW_STYLE}</style><h2>Verdicts</h2>" + _table(
        ["version", "API", "verdict", "properties", "latent (not guaranteed)", "relies on (guaranteed)", "bugs"], rows)
    shown: set[str] = set()
    cards = [bug_html(b, timelines, shown) for v in document.get("verdicts", []) for b in bugs(v)]
    body += "<h2>Findings, each bug once</h2>" + ("".join(cards) or "<p>none</p>")
    for v in document.get("verdicts", []):
        notes = {}
        for probe, r in v.get("assumptions", {}).items():
            said = r.get("outcome") or ("relied on" if r.get("relied_on") else "not relied on"
                                        if r.get("relied_on") is False else r.get("why", "not probed"))
            for name in r.get("assumptions") or [probe]:
                notes[name] = f"probe {probe}: {said}" if probe != name else said
        body += f"<h2>Assumptions of {_e(v['version'])}</h2>" + assumptions_html(list(notes), notes)
    statuses = [v["status"] for v in document.get("verdicts", [])]
    return page("replayssm-verify review", f"{len(statuses)} version(s): "
                + ", ".join(_status(s) for s in statuses), body)
