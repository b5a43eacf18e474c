"""``--html FILE``: one self-contained page a reviewer reads, for ``review``, ``prove`` and ``fuzz``.

The page is built from the data the command already writes (the ``--json``
document) and the traces of its findings, drawn as data: inline CSS, inline
SVG ring diagrams, one small inline script (it counts the findings into the
header); no URL is loaded. Its parts:

- the verdict table (per version, obligation or campaign);
- per finding (a review's kernel findings too: a kernel obligation failed
  with a counterexample that replays, at the kernel line it names): the
  property (or obligation, or fuzz kind) that broke and where (file, line,
  kernel), its message, the distinguishing input of a
  proved difference, the replay command, and the lifecycle timeline: per
  step the rows, and per slot its trackers (``ring_start``,
  ``num_committed``) and what its bytes stand for (checkpoint and ring
  rows), each slot as a ring diagram; for a review trace, each cell the step
  wrote with its writer (``written_by``: a kernel's store line, FlashInfer as
  modelled, the host) as a tooltip and a numbered footnote under the step;
- per version the caller assumptions it relies on, with their provenance
  (``spec.provenance``: guaranteed, not guaranteed, contradicted, and the
  evidence).

Timelines are passed in by the command: a review trace's
(:func:`replayssm.review.timeline.timeline`), a system trace's
(:func:`replayssm.verify.traces.timeline`) or a fuzz launch trace (its
``actions`` and ``states``, read as they are).
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

from replayssm.base.escape import printable
from replayssm.base.reports import replay_command, write_text

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1200px;color:#1c1e21;
background:#fff;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;margin:8px 0;font-size:13px;max-width:100%}th,td{border:1px solid #d0d4d9;
padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word}th{background:#f2f4f7}
.status-finding,.status-failed,.status-regression{color:#b00020;font-weight:600}
.status-pass,.status-passed,.status-proved{color:#1b7f3b;font-weight:600}
.status-coverage-shortfall,.status-interrupted,.status-coverage,.status-latent,.status-not-guaranteed{color:#a15c00;font-weight:600}
.status-guaranteed{color:#1b7f3b}.status-contradicted{color:#b00020;font-weight:600}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f6f8fa;border-radius:4px}
code{padding:1px 4px;overflow-wrap:anywhere}pre{padding:8px;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}
section.finding{border:1px solid #e3b7bd;border-left:5px solid #b00020;border-radius:6px;padding:8px 16px;
margin:16px 0;background:#fffafa}
.where{font-weight:600}.muted{color:#666}.step{border-top:1px dashed #ccc;padding:6px 0}
.step.broke{background:#fff0f0}.rings{display:flex;flex-wrap:wrap;gap:8px}
figure{margin:0;text-align:center;font-size:11px}figcaption{max-width:190px}
.legend span{display:inline-block;width:12px;height:12px;border:1px solid #888;vertical-align:middle;margin:0 4px}
figure.broke{outline:3px solid #b00020;border-radius:6px;background:#fff0f0}figure.broke figcaption{color:#b00020;
font-weight:600}mark.changed{background:#ffe08a;padding:0 2px}table.slots td,table.slots th{font-size:12px;padding:2px 6px}
sup.by{color:#555;font-size:9px;margin-left:1px}.written-by{font-size:12px;margin:2px 0 6px}
.written-by ol{margin:0;padding-left:28px}.written-by code{overflow-wrap:anywhere}
"""

SCRIPT = """
document.addEventListener('DOMContentLoaded', function () {
  var n = document.querySelectorAll('section.finding, td.cell-finding').length;
  var out = document.getElementById('finding-count');
  if (out) { out.textContent = n + (n === 1 ? ' finding' : ' findings') + ' on this page'; }
});
"""

COMMITTED, HELD, EMPTY = "#3d7fd6", "#cfe0f5", "#f4f4f4"


def _e(x: Any) -> str:
    return escape(printable(str(x)), quote=True)  # no control, separator or bidirectional override shown raw


def token(t: Any) -> str | None:
    """A ring row's or checkpoint's ``(stream, position)`` as the text
    diagrams write it (stream 0 ``a``, 1 ``b``): ``a3``; None stays None."""
    if t is None:
        return None
    if isinstance(t, str):
        return t
    stream, pos = t
    return f"{'ab'[stream] if 0 <= stream < 2 else stream}{pos}"


def ring_svg(ring_len: int, ring_start: int, committed: int, rows: list[str | None], center: str,
             caption: str, changed: frozenset[int] = frozenset(), broke: bool = False) -> str:
    """One slot's ring as an SVG figure: ``ring_len`` sectors clockwise from
    the top, the ``committed`` rows from ``ring_start`` filled dark, other
    rows holding a token light, the rest blank; a marker at ``ring_start``;
    ``center`` (the checkpoint) in the middle; the rows in ``changed`` (the
    step wrote them) outlined; ``broke``: the slot a finding names, framed red."""
    size, outer, inner = 180, 80, 52
    c = size / 2
    cells = {(ring_start + j) % ring_len for j in range(max(0, min(committed, ring_len)))} if ring_len else set()

    def at(r: float, a: float) -> str:
        return f"{c + r * math.cos(a):.1f},{c + r * math.sin(a):.1f}"

    parts = [f'<svg class="ring" width="{size}" height="{size}" '
             f'viewBox="0 0 {size} {size}" role="img"><title>{_e(caption)}</title>']
    for i in range(ring_len):
        a0 = 2 * math.pi * i / ring_len - math.pi / 2
        a1 = a0 + 2 * math.pi / ring_len
        label = rows[i] if i < len(rows) else None
        fill = COMMITTED if i in cells else HELD if label is not None else EMPTY
        big = 1 if a1 - a0 > math.pi else 0
        parts.append(f'<path class="row{" committed" if i in cells else ""}" d="M{at(outer, a0)} A{outer},{outer} 0 '
                     f'{big} 1 {at(outer, a1)} L{at(inner, a1)} A{inner},{inner} 0 {big} 0 {at(inner, a0)} Z" '
                     f'fill="{fill}" stroke="{"#e08a00" if i in changed else "#777"}" '
                     f'stroke-width="{2.5 if i in changed else 0.6}"><title>row {i}: {_e(label or "garbage")}'
                     f'{" (committed)" if i in cells else ""}{" (written this step)" if i in changed else ""}'
                     f'</title></path>')
        if label is not None:
            mid = (a0 + a1) / 2
            parts.append(f'<text x="{c + (outer + inner) / 2 * math.cos(mid):.1f}" '
                         f'y="{c + (outer + inner) / 2 * math.sin(mid) + 2.5:.1f}" font-size="7" text-anchor="middle" '
                         f'fill="{"#fff" if i in cells else "#123"}">{_e(label)}</text>')
    if ring_len and 0 <= ring_start < ring_len:
        a = 2 * math.pi * ring_start / ring_len - math.pi / 2
        parts.append(f'<polygon class="ring-start" points="{at(outer + 9, a - 0.06)} {at(outer + 9, a + 0.06)} '
                     f'{at(outer + 1, a)}" fill="#b00020"><title>ring_start {ring_start}</title></polygon>')
    parts.append(f'<text x="{c}" y="{c - 4}" font-size="10" text-anchor="middle">{_e(center)}</text>'
                 f'<text x="{c}" y="{c + 10}" font-size="9" text-anchor="middle" fill="#555">'
                 f'rs={ring_start} nc={committed}</text></svg>')
    frame = ' class="broke"' if broke else ""
    return f'<figure{frame}>{"".join(parts)}<figcaption>{_e(caption)}</figcaption></figure>'


LEGEND = (f'<p class="legend muted">Ring rows clockwise from the top, row 0 first: <span style="background:'
          f'{COMMITTED}"></span>committed (replayed on the checkpoint) <span style="background:{HELD}"></span>'
          f'holds a token, not committed <span style="background:{EMPTY}"></span>garbage; rows outlined '
          f'<span style="border:2px solid #e08a00"></span>were written in that step, and <mark class="changed">'
          f'marked</mark> cells changed; a cell\'s small number names what wrote it in that step (a kernel\'s '
          f'store line; FlashInfer as modelled here, for a materialize with the kernel lines that wrote its plan '
          f'row; or the host), listed under the step\'s table; the red marker is '
          f'<code>ring_start</code>; a slot framed red is the one the finding names, as it broke; tokens are '
          f'&lt;stream&gt;&lt;position&gt; (stream 0 is a, 1 is b); the centre is the checkpoint.</p>')


# ---------------------------------------------------------------- timelines


def _mark(value: Any, changed: bool) -> str:
    return f'<mark class="changed">{_e(value)}</mark>' if changed else _e(value)


def writer_label(writer: dict) -> str:
    """Who wrote a cell, in one line: ``A1.py:239 in _kernel: tl.store(...)``, or ``host: what``."""
    if "host" in writer:
        return f"host: {writer['host']}"
    if "flashinfer" in writer:
        plan = "; its plan row written by " + ", ".join(f"{p['file']}:{p['line']} ({p['buffer']})"
                                                        for p in writer["plan"]) if writer.get("plan") else ""
        return f"FlashInfer (modelled): {writer['flashinfer']}{plan}"
    text = f": {writer['text']}" if writer.get("text") else ""
    return f"{writer.get('file')}:{writer.get('line')} in {writer.get('function')}{text}"


class _Writers:
    """One step's footnotes: each writer of a cell numbered once, in the order cited."""

    def __init__(self) -> None:
        self.cited: dict[str, tuple[int, dict]] = {}

    def cell(self, value: Any, changed: bool, writer: dict | None) -> str:
        """A table cell's value, marked when it changed, with its writer as a tooltip and a footnote number."""
        if writer is None:
            return _mark(value, changed)
        label = writer_label(writer)
        n = self.cited.setdefault(label, (len(self.cited) + 1, writer))[0]
        tag = "mark" if changed else "span"
        return (f'<{tag} class="{"changed " if changed else ""}written" title="written by {_e(label)}">{_e(value)}'
                f'<sup class="by">{n}</sup></{tag}>')

    def html(self) -> str:
        """The step's footnote list (each writer's file:line, function and line text; '' when none)."""
        if not self.cited:
            return ""
        items = []
        for label, (n, w) in self.cited.items():
            if "host" in w:
                items.append(f'<li value="{n}">host: {_e(w["host"])}</li>')
            elif "flashinfer" in w:
                plan = "; its plan row written by " + ", ".join(
                    f'<b>{_e(p["file"])}:{_e(p["line"])}</b> ({_e(p["buffer"])})'
                    + (f': <code>{_e(p["text"])}</code>' if p.get("text") else "") for p in w["plan"]) \
                    if w.get("plan") else ""
                items.append(f'<li value="{n}">FlashInfer (modelled): {_e(w["flashinfer"])}{plan}</li>')
            else:
                text = f': <code>{_e(w["text"])}</code>' if w.get("text") else ""
                items.append(f'<li value="{n}"><b>{_e(w.get("file"))}:{_e(w.get("line"))}</b> in '
                             f'<code>{_e(w.get("function"))}</code>{text}</li>')
        return f'<div class="written-by"><span class="muted">written by:</span><ol>{"".join(items)}</ol></div>'


def _review_steps(steps: list[dict]) -> list[str]:
    """A review timeline step by step: the rows; per slot its trackers, checkpoint and ring rows, each cell the
    step changed marked (against the slot as last drawn) and outlined on its ring; the slot a finding names
    (``broke``) drawn as it broke, framed."""
    seen: dict[tuple[int, int, int], tuple[Any, Any, Any, list]] = {}
    out = []
    for step in steps:
        rings, rows = [], []
        writers = _Writers()
        for s in step["slots"]:
            for layer in s["layers"]:
                key = (s["group"], s["slot"], layer["layer"])
                now = (s["ring_start"], s["committed"], layer["checkpoint"], list(layer["rows"]))
                was = seen.get(key)
                seen[key] = now
                diff = [was is None or was[i] != now[i] for i in range(3)]
                changed = frozenset(i for i, r in enumerate(now[3]) if was is None and r is not None
                                    or was is not None and (i >= len(was[3]) or was[3][i] != r))
                rings.append(ring_svg(s["ring_len"], s["ring_start"], s["committed"],
                                      [token(r) for r in layer["rows"]], f"ckpt {token(layer['checkpoint']) or 'none'}",
                                      ("as it broke: " if s.get("broke") else "")
                                      + f"group {s['group']} slot {s['slot']} layer {layer['layer']}: trackers "
                                      f"({s['ring_start']}, {s['committed']})" + (f"; {s['note']}" if s.get("note") else ""),
                                      changed, bool(s.get("broke"))))
                by = s.get("written_by") or {}
                rows.append(f"<tr><td>{'<b>broke</b> ' if s.get('broke') else ''}g{s['group']} slot {s['slot']} "
                            f"L{layer['layer']}</td><td>{writers.cell(s['ring_start'], diff[0], by.get('ring_start'))}"
                            f"</td><td>{writers.cell(s['committed'], diff[1], by.get('committed'))}</td>")
                wrote = layer.get("written_by") or {}
                rows_by = {int(i): w for i, w in (wrote.get("rows") or {}).items()}
                ring_rows = [writers.cell(f"{i}: {token(now[3][i]) or chr(8212)}", False, rows_by.get(i))
                             for i in sorted(changed | set(rows_by))]
                checkpoint = writers.cell(token(layer['checkpoint']) or 'none', diff[2], wrote.get('checkpoint'))
                rows.append(f"<td>{checkpoint}</td><td>{', '.join(ring_rows) or '-'}</td></tr>")
        table = ('<table class="slots"><tr><th>slot</th><th>ring_start</th><th>num_committed</th><th>checkpoint</th>'
                 f'<th>ring rows written</th></tr>{"".join(rows)}</table>') if rows else ""
        culprits = dict.fromkeys(writer_label(w) for s in step["slots"] if s.get("broke")
                                 for w in (s.get("written_by") or {}).values())
        by = f'<br>the broken slot was written by {_e("; ".join(culprits))}' if culprits else ""
        broke = f'<p class="status-finding">broke: {_e(step["finding"])}{by}</p>' if step.get("finding") else ""
        out.append(f'<div class="step{" broke" if broke else ""}"><b>step {step["step"]}</b>: {_e(step["rows"])}'
                   f'{broke}{table}{writers.html()}<div class="rings">{"".join(rings)}</div></div>')
    return out


def _system_step(step: dict) -> str:
    head = "initial state" if step["action"] is None else f"{step['action']} {step['picks']}"
    notes = "".join(f'<p class="status-finding">{_e(what)}: {_e(", ".join(step[key]))}</p>'
                    for what, key in (("failed checks", "failed"), ("broken invariants", "broken"),
                                      ("replay differs in", "differs")) if step[key])
    reqs = "; ".join(f"req {r['req']}: stream {r['stream']} N={r['N']} live col {r['live_col']}"
                     for r in step["requests"] if r["active"]) or "no active request"
    rings = [ring_svg(v["ring_len"], v["ring_start"], v["committed"], v["rows"],
                      f"ckpt {token(v['checkpoint']) or 'garbage'}",
                      f"group {v['group']} slot {v['slot']}: ref {v['ref']}"
                      + (f", published {v['published']}" if v["published"] else "")) for v in step["slots"]]
    return (f'<div class="step{" broke" if notes else ""}"><b>step {step["step"]}</b>: {_e(head)}'
            f'<div class="muted">{_e(reqs)}</div>{notes}<div class="rings">{"".join(rings)}</div></div>')


def _launch_steps(trace: dict) -> list[str]:
    """A fuzz launch trace: per action, the slots whose trackers it changed (no tokens: the trace holds none)."""
    params = trace.get("params", {})
    ring_len = int(params.get("geometry", {}).get("ring_len", 0))
    before: dict = {}
    out = []
    for n, (action, state) in enumerate(zip(trace.get("actions", []), trace.get("states", []))):
        rings = []
        for g, (starts, counts) in enumerate(zip(state.get("ring_start", []), state.get("num_committed", []))):
            for s, pair in enumerate(zip(starts, counts)):
                if before.get((g, s), (0, 0)) != pair:
                    rings.append(ring_svg(ring_len, pair[0], pair[1], [None] * ring_len, "",
                                          f"group {g} slot {s}: trackers {pair}"))
                before[(g, s)] = pair
        caller = "; ".join(action.get("caller", []))
        out.append(f'<div class="step"><b>step {n}</b>: {_e(action.get("name"))}'
                   + (f' <span class="muted">[{_e(caller)}]</span>' if caller else "")
                   + f'<div class="rings">{"".join(rings)}</div></div>')
    return out


def timeline_html(data: dict | None) -> str:
    """A finding's timeline, whichever kind of trace it came from ('' without one)."""
    if not data:
        return ""
    if "actions" in data and "states" in data and "layers_per_group" in data.get("params", {}):
        steps = _launch_steps(data)
    elif data.get("steps") and "slots" in data["steps"][0] and "action" in data["steps"][0]:
        steps = [_system_step(s) for s in data["steps"]]
    else:
        steps = _review_steps(data.get("steps", []))
    system = data.get("system") or data.get("params") or {}
    return (f'<h3>Lifecycle timeline</h3><p class="muted">{_e(_system_line(system))}</p>{LEGEND}'
            + "".join(steps))


def _system_line(system: dict) -> str:
    """The system a trace runs on, in one line (nested records as ``name=value``)."""
    def shown(v: Any) -> str:
        return " ".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v)

    return "; ".join(f"{k}: {shown(v)}" for k, v in system.items() if v not in (None, [], ""))


# ---------------------------------------------------------------- sections


def _status(s: str) -> str:
    return f'<span class="status-{_e(s.replace(" ", "-"))}">{_e(s)}</span>'


def _table(head: list[str], rows: list[list[str]]) -> str:
    return ("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</table>")


def _distinction(entry: dict) -> str:
    d = (entry.get("kernel_diff") or {}).get("distinction")
    if not d:
        return ""
    rows = [[_e(k), f"<code>{_e(v)}</code>"] for k, v in (("variant", d.get("variant")), ("launch", d.get("launch")),
                                                           ("inputs", d.get("inputs")), ("cells", d.get("cells")),
                                                           ("judgement", d.get("judgement")),
                                                           ("replayed on both kernels", d.get("replayed")))]
    return "<h3>Distinguishing input (proved difference)</h3>" + _table(["", ""], rows)


def _source_line(where: dict) -> str:
    """The text of the line a finding is located at, when its file is here."""
    try:
        text = Path(where["file"]).read_text().splitlines()[int(where["line"]) - 1]
    except (OSError, KeyError, IndexError, TypeError, ValueError):
        return ""
    return f'<pre class="source">{_e(where["line"])}: {_e(text.strip())}</pre>'


def finding_html(title: str, entry: dict, timeline: dict | None, shown: set[str] | None = None) -> str:
    """One finding's section: what broke and where (with the source line), the
    message, a proved difference's distinguishing input, the replay command
    and the timeline (once per trace: ``shown`` holds the traces drawn above)."""
    where = entry.get("location") or {}
    at = (f'{_e(where.get("file"))}:{_e(where.get("line"))}' + (f' in <code>{_e(where["kernel"])}</code>'
                                                                 if where.get("kernel") else "")
          + (f' <span class="muted">({_e(where["why"])})</span>' if where.get("why") else "")) if where else "-"
    replay = f'<p>replay: <code>{_e(entry["replay"])}</code></p>' if entry.get("replay") else ""
    trace = entry.get("trace")
    if shown is not None and trace in shown:
        drawn = f'<p class="muted">Its trace is drawn above ({_e(trace)}).</p>'
    else:
        drawn = timeline_html(timeline)
        if shown is not None and trace and timeline:
            shown.add(trace)
    return (f'<section class="finding"><h3>{_e(title)}</h3><p class="where">where: {at}</p>'
            f'{_source_line(where) if where else ""}<pre>{_e(entry.get("message", ""))}</pre>{_distinction(entry)}'
            f'{replay}{drawn}</section>')


def assumptions_html(names: list[str], notes: dict[str, str] | None = None) -> str:
    """The caller assumptions ``names`` with their statements and provenance
    (``notes``: what the run says of each, e.g. relied on)."""
    from replayssm.spec import assumptions

    known = {a.name: a for a in assumptions.ALL}
    rows = []
    for name in names:
        a = known.get(name)
        p = getattr(a, "provenance", None)
        evidence = "<br>".join(f"<code>{_e(c.where())}</code>: {_e(c.shows)}" for c in getattr(p, "evidence", ()))
        rows.append([f"<code>{_e(name)}</code>", _e((notes or {}).get(name, "")),
                     _e(a.statement if a is not None else "(not in spec/assumptions.py)"),
                     _status(p.status) if p is not None else "-",
                     _e(getattr(p, "reason", "")) + ("<br>" if getattr(p, "reason", "") and evidence else "") + evidence])
    return _table(["assumption", "this run", "statement", "provenance", "reason and evidence"], rows)


def page(title: str, summary: str, body: str) -> str:
    """The whole document: one file, nothing loaded from elsewhere."""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style>'
            f'<script>{SCRIPT}</script></head><body><h1>{_e(title)}</h1><p>{summary} · '
            f'<span id="finding-count"></span></p>{body}</body></html>')


# ---------------------------------------------------------------- per command


def prove_html(document: dict, timelines: dict[str, dict]) -> str:
    """A prove run's page from its ``--json`` report and the timelines of its counterexamples (by obligation)."""
    results = document.get("obligations", [])
    failed = [r for r in results if r.get("status") != "proved"]
    rows = [[f"<code>{_e(r['name'])}</code>", _status(r["status"]), _e(r.get("cases")), _e(r.get("seconds"))]
            for r in failed + [r for r in results if r.get("status") == "proved"]]
    body = "<h2>Obligations</h2>" + _table(["obligation", "status", "cases", "seconds"], rows)
    sections = []
    for r in failed:
        cx = r.get("counterexample") or {}
        message = "\n".join([*(cx.get("violated") or []), r.get("detail", "")]).strip() or r["status"]
        entry = {"message": message, "location": r.get("location"),
                 "replay": r.get("replay")}
        sections.append(finding_html(f"{r['name']} {r['status']}", entry, timelines.get(r["name"])))
    body += "<h2>Findings</h2>" + ("".join(sections) or "<p>none</p>")
    used = sorted({a for r in (failed or results) for a in r.get("assumptions", [])})
    body += ("<h2>Assumptions " + ("the failed obligations rest on" if failed else "the obligations rest on")
             + "</h2>" + assumptions_html(used, {a: "hypothesis" for a in used}))
    return page("replayssm-verify prove", f"{len(results) - len(failed)}/{len(results)} proved", body)


def fuzz_html(summary: dict, timelines: dict[str, dict]) -> str:
    """A fuzz campaign's page from its JSON summary and its findings' launch traces (by trace path)."""
    from replayssm.spec import assumptions

    c = summary.get("config", {})
    rows = [[_e(c.get("impl")), _e(c.get("level")), _e(c.get("seed")), _status(summary.get("status", "")),
             _e(summary.get("examples")), _e(summary.get("request_steps")), _e(len(summary.get("findings", [])))]]
    body = "<h2>Campaign</h2>" + _table(["implementation", "level", "seed", "verdict", "examples", "request-steps",
                                         "findings"], rows)
    if summary.get("missing_scenarios"):
        body += (f"<details><summary class='status-coverage'>{len(summary['missing_scenarios'])} scenario "
                 f"class(es) never reached</summary><p>{_e(', '.join(summary['missing_scenarios']))}</p></details>")
    sections = []
    for f in summary.get("findings", []):
        cells = "\n".join(f"{x['buffer']}{x['index']}: spec {x['spec']}, implementation {x['impl']}"
                          for x in f.get("cells", [])[:8])
        entry = {"message": f"{f.get('reason', '')}\n{cells}".strip(), "location": f.get("location"),
                 "replay": replay_command(f['trace']) if f.get("trace") else None}
        sections.append(finding_html(f"{f['kind']} in {f.get('kernel')}", entry, timelines.get(f.get("trace") or "")))
    body += "<h2>Findings</h2>" + ("".join(sections) or "<p>none</p>")
    dropped = c.get("drop")
    names = [a.name for a in assumptions.ALL]
    body += "<h2>Assumptions the callers keep</h2>" + assumptions_html(
        names, {n: "dropped for some requests" if n == dropped else "kept" for n in names})
    return page("replayssm-verify fuzz", _status(summary.get("status", "")), body)


def write_html(path: str, html: str) -> None:
    """Write the page (through a temporary file beside ``path``)."""
    write_text(path, html)
