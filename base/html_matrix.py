"""``review --matrix --html FILE``: the hazard matrix as one self-contained page.

Built from the matrix's ``--json`` document (``review/matrix.py``,
``replayssm-review-matrix/1``): the verdict per serving configuration as a
grid (the first kept dimensions down, the last two across, so it stays within
1,400 px), each cell coloured by its status (every status of ``review/matrix.py``'s
``STATUSES`` has its colour) with its one-sentence reason, the
trace and replay command behind it, or the check that refuses it with its
citation; then the dimensions the version does not branch on, and why.
"""

from __future__ import annotations

from typing import Any

from .html_report import _e, _status, page

MATRIX_STYLE = """
table.matrix td{max-width:300px;font-size:12px}td.cell-finding{background:#fdecee}td.cell-latent{background:#fff4e0}
td.cell-pass{background:#eef8f0}td.cell-coverage-shortfall{background:#fffbe6}
td.cell-not-accepted-by-vLLM{background:#f2f2f2;color:#555}
td.cell code{word-break:break-all}
"""


def _cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "<td>-</td>"
    status = c["status"]
    parts = [_status(status), f"<div>{_e(c.get('detail', ''))}</div>"]
    if c.get("replay"):
        parts.append(f"<div>next: <code>{_e(c['replay'][0])}</code></div>")
    for r in c.get("refused_by", []):
        parts.append(f'<div class="muted">refused by <code>{_e(r["file"])}</code>: {_e(r["snippet"])}</div>')
    if c.get("not_finished"):
        parts.append(f'<div class="muted">probes not finished: {_e(", ".join(c["not_finished"]))}</div>')
    return f'<td class="cell cell-{_e(status.replace(" ", "-"))}">{"".join(parts)}</td>'


def matrix_html(doc: dict[str, Any]) -> str:
    """The matrix section: the grid of cells, then the collapsed dimensions."""
    kept = [d for d in doc["dimensions"] if d["kept"]]
    across, down = kept[-2:], kept[:-2]
    cells = {tuple(c["config"][d["name"]] for d in kept): c for c in doc["cells"]}

    def combos(dims: list[dict[str, Any]]) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = [()]
        for d in dims:
            out = [o + (v,) for o in out for v in d["values"]]
        return out

    cols = combos(across)
    head = "".join(f"<th>{_e(d['name'])}</th>" for d in down) + "".join(
        "<th>" + _e(", ".join(f"{d['name']} {v}" for d, v in zip(across, col))) + "</th>" for col in cols)
    rows = []
    for row in combos(down):
        rows.append("<tr>" + "".join(f"<th>{_e(v)}</th>" for v in row)
                    + "".join(_cell(cells.get(row + col)) for col in cols) + "</tr>")
    counts = ", ".join(f"{n} {s}" for s, n in doc.get("counts", {}).items() if n)
    body = (f"<h2>Hazard matrix of {_e(doc['version'])}: {_status(doc['status'])}</h2>"
            f"<p>API {_e(doc['api'])}; seed {_e(doc['seed'])}, {_e(doc['examples'])} {_e(doc.get('unit', 'examples'))} per campaign; "
            f"{_e(counts)}</p><style>{MATRIX_STYLE}</style>"
            f'<table class="matrix"><tr>{head}</tr>{"".join(rows)}</table>')
    collapsed = [d for d in doc["dimensions"] if not d["kept"]]
    if collapsed:
        body += "<h3>Dimensions the version does not branch on (one column)</h3><ul>" + "".join(
            f"<li><b>{_e(d['name'])}</b>: {_e(d['why'])}"
            + "".join(f'<br><code>{_e(c["file"])}</code>: {_e(c["snippet"])}' for c in d["evidence"]) + "</li>"
            for d in collapsed) + "</ul>"
    body += "<h3>Why each dimension is kept</h3><ul>" + "".join(
        f"<li><b>{_e(d['name'])}</b> ({_e(', '.join(d['values']))}): {_e(d['why'])}"
        + "".join(f'<br><code>{_e(c["file"])}</code>: {_e(c["snippet"])}' for c in d["evidence"]) + "</li>"
        for d in kept) + "</ul>"
    body += "".join(f'<p class="muted">{_e(n)}</p>' for n in doc.get("notes", []))
    return body


def matrix_page(doc: dict[str, Any]) -> str:
    """A whole page holding only the matrix (``review --matrix --html``)."""
    return page(f"replayssm-verify review --matrix: {doc['version']}", _status(doc["status"]), matrix_html(doc))
