"""``review --matrix``: one version's verdict per serving configuration it distinguishes.

A :class:`Matrix` is a version's :class:`Dimension` records (cache mode,
speculative tokens, async scheduling, Mamba cache groups, model runner), each
*kept* with its values when the version's host branches on it, or *collapsed*
to one column with the reason and its evidence, and one :class:`MatrixCell` per
combination of the kept values: ``pass``, ``finding``, ``latent``, ``coverage
shortfall`` (a part of its evidence did not finish: a probe out of time, a
campaign cut or with nothing to draw, a proof unknown; never a pass) or ``not
accepted by vLLM`` (the check that refuses it, cited into the corpus), with
the traces behind it. The cells are filled by :mod:`.matrix_corpus` (a
worker-side version: one lifecycle campaign and the probes of the assumptions
vLLM does not guarantee per cell) and :mod:`.matrix_release` (the released
0.33.0: its validator and its tracker campaigns). Every campaign is counted
(``--examples``) and seeded, so the matrix is the same on any machine.

This module holds the records and their three written forms: the text table
(:func:`text`, 120 columns; ``--wide`` prints each cell's full detail), the
Markdown table (:func:`markdown`) and the JSON document (:meth:`Matrix.document`,
schema :data:`SCHEMA`), which the HTML report (``base/html_report.py``) draws.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from replayssm.base.escape import one_line
from replayssm.spec.provenance import Citation

SCHEMA = "replayssm-review-matrix/1"
"""The ``schema`` of ``review --matrix --json``."""

PASS, FINDING, LATENT, SHORTFALL, REFUSED = "pass", "finding", "latent", "coverage shortfall", "not accepted by vLLM"
STATUSES = (FINDING, LATENT, SHORTFALL, PASS, REFUSED)
"""A cell's statuses, gravest first, in the review's order of verdicts (``coverage shortfall``: evidence
that did not finish, never a pass; a refused configuration never runs, so it is no verdict)."""

WIDTH = 120
"""The text table's width in columns."""


def where(c: Citation) -> str:
    """A citation as a reader finds it: ``corpus:PATH `SNIPPET```."""
    return f"{c.where()} `{c.snippet}`"


@dataclass(frozen=True)
class Dimension:
    """One serving option: its values, whether the version's host branches on it
    (``kept``; collapsed: one column, ``values[0]`` standing for all), why, and the evidence."""

    name: str
    short: str
    """Its column's heading in the text table."""
    values: tuple[str, ...]
    kept: bool
    why: str
    evidence: tuple[Citation, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "short": self.short, "values": list(self.values), "kept": self.kept, "why": self.why,
                "evidence": [{"file": c.where(), "snippet": c.snippet, "shows": c.shows} for c in self.evidence]}


@dataclass
class MatrixCell:
    """One serving configuration (the kept dimensions' values, by name) and its verdict:
    ``detail`` in one sentence, the traces and replay commands behind it, the
    citations of the check that refuses it (``not accepted by vLLM``), the
    probes that did not finish (each also a ``coverage shortfall`` in ``detail``),
    and the examples its campaigns ran."""

    config: dict[str, str]
    status: str = PASS
    detail: str = ""
    traces: list[str] = field(default_factory=list)
    replay: list[str] = field(default_factory=list)
    refused_by: list[Citation] = field(default_factory=list)
    not_finished: list[str] = field(default_factory=list)
    examples: int = 0

    def worsen(self, status: str, detail: str, trace: str | None = None, replay: str | None = None) -> None:
        """Record one piece of evidence: the cell takes the graver status; its detail leads with the gravest."""
        if STATUSES.index(status) < STATUSES.index(self.status):
            self.status = status
            self.detail = detail + ("; " + self.detail if self.detail else "")
        else:
            self.detail = (self.detail + "; " if self.detail else "") + detail
        if trace and trace not in self.traces:
            self.traces.append(trace)
        if replay and replay not in self.replay:
            self.replay.append(replay)

    def as_json(self) -> dict[str, Any]:
        return {"config": dict(self.config), "status": self.status, "detail": self.detail,
                "traces": list(self.traces), "replay": list(self.replay),
                "refused_by": [{"file": c.where(), "snippet": c.snippet, "shows": c.shows} for c in self.refused_by],
                "not_finished": list(self.not_finished), "examples": self.examples}


@dataclass
class Matrix:
    """A version's hazard matrix (see the module docstring)."""

    version: str
    source: str
    api: str
    seed: int
    examples: int
    dimensions: list[Dimension]
    unit: str = "examples"
    """What ``examples`` counts per campaign (a released vLLM's campaigns count forward passes)."""
    cells: list[MatrixCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the matrix rests on beside its cells (the kernel proofs, the spec's proofs)."""

    @property
    def kept(self) -> list[Dimension]:
        return [d for d in self.dimensions if d.kept]

    @property
    def judged(self) -> list[MatrixCell]:
        """The cells of configurations vLLM accepts: those the matrix judged."""
        return [c for c in self.cells if c.status != REFUSED]

    @property
    def status(self) -> str:
        """The gravest status of a configuration vLLM accepts (``pass`` when every accepted one passes;
        ``coverage shortfall`` when a cell's evidence did not finish and none is graver, and when vLLM
        accepts none of them: nothing was judged, so nothing shows the version safe)."""
        return min((c.status for c in self.judged), key=STATUSES.index, default=SHORTFALL)

    @property
    def said(self) -> list[str]:
        """Its notes, and first, where no cell was judged, why its status is a ``coverage shortfall``."""
        nothing = [] if self.judged else [
            f"coverage shortfall: no configuration was judged (vLLM accepts none of the {len(self.cells)} "
            f"configurations), so nothing here shows the version safe in any of them"]
        return nothing + self.notes

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.cells) for s in STATUSES}

    def document(self) -> dict[str, Any]:
        """The ``--json`` document's body (``schema`` added by the writer)."""
        return {"version": self.version, "source": self.source, "api": self.api, "seed": self.seed,
                "examples": self.examples, "unit": self.unit, "status": self.status, "counts": self.counts(),
                "dimensions": [d.as_json() for d in self.dimensions], "cells": [c.as_json() for c in self.cells],
                "notes": self.said}


def cells_of(dimensions: list[Dimension]) -> list[MatrixCell]:
    """One empty cell per combination of the kept dimensions' values, in their order."""
    configs: list[dict[str, str]] = [{}]
    for d in dimensions:
        if d.kept:
            configs = [{**c, d.name: v} for c in configs for v in d.values]
    return [MatrixCell(c) for c in configs]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def text(m: Matrix, wide: bool = False) -> str:
    """The matrix as text: a header, the collapsed dimensions and why, one line per
    cell (within :data:`WIDTH` columns; ``wide``: each cell's full detail and
    traces beneath it), then every trace and replay command once. Each line is
    one line: a control character or newline (in a version's file name, so in
    its label and trace paths) is written escaped, so it cannot forge a row."""
    lines = [f"hazard matrix of {m.version} (API {m.api}, seed {m.seed}, {m.examples} {m.unit} per campaign): "
             f"{m.status}"]
    for d in m.dimensions:
        if not d.kept:
            lines.append(_fit(f"  {d.name}: one column ({d.why})", WIDTH) if not wide else f"  {d.name}: one column "
                         f"({d.why}; {', '.join(where(c) for c in d.evidence)})")
    names = [d.name for d in m.kept]
    widths = [max(len(d.short), *(len(c.config[d.name]) for c in m.cells)) for d in m.kept]
    status_w = max(len(s) for s in STATUSES)
    head = "  ".join(d.short.ljust(w) for d, w in zip(m.kept, widths)) + "  " + "verdict".ljust(status_w) + "  why"
    lines.append(head)
    for c in m.cells:
        row = "  ".join(c.config[n].ljust(w) for n, w in zip(names, widths)) + "  " + c.status.ljust(status_w) + "  "
        lines.append(row + c.detail if wide else _fit(row + c.detail, WIDTH))
        if wide:
            lines += [f"      trace {t}" for t in c.traces]
            lines += [f"      refused by {where(r)}" for r in c.refused_by]
    traces = list(dict.fromkeys(t for c in m.cells for t in c.traces))
    if traces and not wide:
        lines.append(f"traces ({len(traces)}, each cell's with --wide or in --json):")
        lines += [_fit(f"  {t}", WIDTH) for t in traces[:8]]
        if len(traces) > 8:
            lines.append(f"  ... {len(traces) - 8} more")
    for n in m.said:
        lines += textwrap.wrap(f"note: {n}", WIDTH, subsequent_indent="  ") if not wide else [f"note: {n}"]
    return "\n".join(one_line(line) for line in lines)


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown(m: Matrix) -> str:
    """The matrix as a Markdown section: the verdict, a table of the cells (the
    evidence of a refusal and the first replay command in the row), and the
    collapsed dimensions with their reasons."""
    names = [d.name for d in m.kept]
    out = [f"### Hazard matrix of `{_md(m.version)}`: **{m.status}**", "",
           f"API {m.api}; seed {m.seed}, {m.examples} {m.unit} per campaign; "
           + ", ".join(f"{n} {s}" for s, n in m.counts().items() if n), "",
           "| " + " | ".join(names) + " | verdict | why | next step |",
           "| " + " | ".join("---" for _ in names) + " | --- | --- | --- |"]
    for c in m.cells:
        step = (f"`{_md(c.replay[0])}`" if c.replay else
                "; ".join(f"`{_md(r.where())}`" for r in c.refused_by) or "")
        out.append("| " + " | ".join(c.config[n] for n in names) + f" | {c.status} | {_md(c.detail)} | {step} |")
    collapsed = [d for d in m.dimensions if not d.kept]
    if collapsed:
        out += ["", "Collapsed (the version does not branch on them):", ""]
        out += [f"- **{d.name}**: {_md(d.why)}" + (f" ({', '.join('`' + _md(c.where()) + '`' for c in d.evidence)})"
                                                    if d.evidence else "") for d in collapsed]
    if m.said:
        out += [""] + [f"- {_md(n)}" for n in m.said]
    return "\n".join(out) + "\n"
