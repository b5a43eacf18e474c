"""The hazard matrix of a released vLLM (generation P, 0.33.0): ``review --vllm PATH --matrix``.

Dimensions, from 0.33.0's own code (``spec/release_caller.py``'s records, cited into ``vllm-0.33.0/``):

- **cache mode** ``none``/``align``/``all``: the validator refuses prefix
  caching (``align``) with FlashInfer ReplaySSM, and ``all`` is no mode of
  0.33.0 (``MambaCacheMode``): refused;
- **speculative tokens** ``0``/``3`` (vLLM's default window, ``W = 16``, with
  three draft tokens: ``T = 4``, ``R = 20``): speculative decoding needs
  FlashInfer and mode none; with it the host commits the previous pass's
  accepted counts, without it the trackers advance by one token;
- **async scheduling** ``off``/``on``: with speculative decoding the commit
  reads the accepted counts by batch row, and with async scheduling they may
  arrive in the previous pass's row order (vLLM #53912: the probe of
  ``p_async_accepted_reach_next_step_by_row``, not guaranteed): such a cell
  failing is ``latent``;
- **model runner** ``V1``/``V2``: the validator refuses Triton ReplaySSM
  under V2;
- **Mamba cache groups** collapsed: each group has its own trackers, which no
  other group shares, so two groups run the one-group lifecycle twice.

A cell is ``not accepted by vLLM`` when the validator refuses it on both
backends (each refusing rule cited). An accepted FlashInfer configuration
runs the released lifecycle campaign (``review/release_campaign.py``: the
version's tracker kernels in their own process, judged against the spec and
the refinement) and takes the tracker-kernel proofs of the roles it launches;
a Triton one keeps no trackers, and its decode cursor, computed by the host
from CPU counts, is the spec's proof ``release.triton_cursor.refinement``.
A proof that fails is a finding; one that ends ``unknown`` (a tracker kernel
the evaluator cannot read, a solver that gives up) is a ``coverage
shortfall`` of the cells that launch its role, never a pass nor a finding.
The cursor's proof is of 0.33.0's host as the spec models it, so it speaks for
the vLLM under review only where that vLLM's own files hold the evidence of
the caller records it assumes (:data:`TRITON_ASSUMES`, their citations read
in its tree, :func:`missing_evidence`); where they do not, a Triton cell is a
``coverage shortfall`` naming the citation.
Identical runs are made once.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from replayssm.base.reports import replay_command
from replayssm.spec import release_caller as caller
from replayssm.spec.assumption_record import Assumption
from replayssm.spec.provenance import CORPUS, RELEASE, RELEASE_CACHE, RELEASE_SSU, Citation, citation_problems, cite
from replayssm.spec.release_trackers import ReleaseGeometry

from .matrix import FINDING, LATENT, PASS, REFUSED, SHORTFALL, MatrixCell, Dimension, Matrix, cells_of
from .release_campaign import Run, campaign
from .vllm_locator import Located

SPECULATIVE = {"0": ReleaseGeometry(16, 1, 17), "3": ReleaseGeometry(16, 4, 20)}
"""Each speculative value's geometry: vLLM's default window ``W = 16`` (``replayssm_buffer_len``)."""

ALL_MODE = cite(RELEASE_CACHE, 'MambaCacheMode = Literal["align", "none"]', "0.33.0 has no all mode")

TRITON_CURSOR = "release.triton_cursor.refinement"
"""The spec's proof of the Triton decode cursor (``verify/release_proofs.py``)."""

ASYNC = caller.ASYNC_ACCEPTED_ORDERED

TRITON_ASSUMES = (caller.TRITON_EXACT_LENGTHS, caller.DECODE_BASE_AT_ADMISSION)
"""The caller records the Triton cursor's proof takes as hypotheses (``verify/release_proofs.triton_claims``)."""


def missing_evidence(located: Located, records: tuple[Assumption, ...]) -> list[str]:
    """What of ``records``' citations into 0.33.0's ``vllm/`` tree the tree of ``located`` does not hold (its
    own files read, found from the reviewed file's place): where the spec's model of 0.33.0 may not
    describe this vLLM (empty: every citation holds here)."""
    rel = Path(RELEASE_SSU).relative_to(RELEASE)
    root = located.file.parents[len(rel.parts) - 1]
    problems = []
    for record in records:
        for c in record.provenance.evidence:
            if c.root == CORPUS and c.file.startswith(f"{RELEASE}/vllm/"):
                problems += citation_problems(replace(c, file=c.file.removeprefix(f"{RELEASE}/")),
                                              {CORPUS: root})
    return problems


def dimensions() -> list[Dimension]:
    """0.33.0's serving options and whether its host branches on each (see the module docstring)."""
    rules = {r.name: r.evidence for r in caller.VALIDATOR_RULES}
    return [
        Dimension("cache mode", "mode", ("none", "align", "all"), True,
                  "the validator refuses prefix caching with FlashInfer; all is no mode of 0.33.0",
                  (rules["flashinfer_without_prefix_caching"], ALL_MODE)),
        Dimension("speculative tokens", "spec", tuple(SPECULATIVE), True,
                  "with draft tokens the host commits the accepted counts a pass later (FlashInfer only)",
                  (rules["speculative_needs_flashinfer"], rules["speculative_without_prefix_caching"])),
        Dimension("async scheduling", "async", ("off", "on"), True,
                  "the commit reads accepted counts by batch row; with async scheduling they may come in the "
                  "previous pass's order (vLLM #53912)", ASYNC.provenance.evidence),
        Dimension("cache groups", "groups", ("1 or 2",), False,
                  "each cache group has its own trackers, shared by its layers only",
                  caller.TRACKERS_PER_GROUP.provenance.evidence[:2]),
        Dimension("runner", "runner", ("V1", "V2"), True, "the validator refuses Triton ReplaySSM under model runner V2",
                  (rules["triton_v1_runner_only"],)),
    ]


def _refusal(config: dict[str, str], backend: str) -> tuple[str, Citation] | None:
    """The check that refuses ``config`` on ``backend``, by name, and its citation (None: 0.33.0 runs it)."""
    if config["cache mode"] not in caller.CACHE_MODES:
        return "no_all_mode", ALL_MODE
    rule = caller.rejection(caller.ReleaseConfig(backend, int(config["speculative tokens"]), 16,
                                                 config["cache mode"], v2_runner=config["runner"] == "V2"))
    return None if rule is None else (rule.name, rule.evidence)


class Runs:
    """The release campaigns of one matrix, each (geometry, host order) run once, failing runs' traces saved."""

    def __init__(self, located: Located, passes: int, seed: int, traces: Path) -> None:
        self.located, self.passes, self.seed, self.traces = located, passes, seed, traces
        self.done: dict[tuple[str, str], tuple[Run, str | None]] = {}

    def run(self, spec: str, order: str) -> tuple[Run, str | None]:
        """The campaign of ``spec``'s geometry with the host ``order``, and its trace when it failed."""
        from .release_review import _save

        key = (spec, order)
        if key not in self.done:
            geo = SPECULATIVE[spec]
            run = campaign(str(self.located.file), geo, order, self.seed, self.passes)
            trace = _save(run, self.located, self.traces, f"matrix spec{spec} {order}") if run.finding else None
            self.done[key] = (run, trace)
        return self.done[key]


PROOF_STATUSES = {"proved": PASS, "failed": FINDING}
"""A proof's cell status by its result (any other result, ``unknown``: :data:`.matrix.SHORTFALL`)."""


def _flashinfer(cell: MatrixCell, runs: Runs, unproved: list[tuple[str, str, str]]) -> None:
    """An accepted FlashInfer configuration: its campaign (and with async scheduling and draft tokens, the
    run whose accepted counts come in the previous pass's row order), and the kernel proofs of its roles
    that did not prove (``(name, cell status, detail)``)."""
    spec, on = cell.config["speculative tokens"], cell.config["async scheduling"] == "on"
    run, trace = runs.run(spec, "current_rows")
    cell.examples += run.passes
    replay = replay_command(trace, str(runs.located.file)) if trace else None
    if run.finding:
        cell.worsen(FINDING, f"FlashInfer: {run.finding.message}", trace, replay)
    if on and spec != "0":
        run, trace = runs.run(spec, "previous_rows")
        cell.examples += run.passes
        if run.finding:
            cell.worsen(LATENT, f"FlashInfer relies on {ASYNC.name} (not guaranteed): {run.finding.message}",
                        trace, replay_command(str(trace), str(runs.located.file)))
    roles = ("commit", "reset") if spec != "0" else ("advance", "reset")
    for name, status, detail in unproved:
        if any(r in name for r in roles):
            cell.worsen(status, f"{name}: {detail}" if status == FINDING else f"{name} unknown: {detail}")
    if cell.status == PASS:
        cell.detail = (f"FlashInfer: {run.passes} passes held" + ("" if not on or spec == "0" else
                       ", also with the previous pass's row order") + ("; " + cell.detail if cell.detail else ""))


def release_matrix(located: Located, args: argparse.Namespace, passes: int, traces: Path, out: TextIO) -> Matrix:
    """The hazard matrix of the released vLLM ``located`` (see the module docstring)."""
    from replayssm.verify import release_proofs  # noqa: F401  (registers the release obligations)
    from replayssm.verify.runner import prove_named

    from .release_review import kernel_parts

    dims = dimensions()
    m = Matrix(located.version, str(located.file), located.generation, args.seed, passes, dims, cells=cells_of(dims),
               unit="forward passes")
    kernel = [(p.name, FINDING if p.status == "finding" else SHORTFALL, p.detail)
              for p in kernel_parts(located, out) if p.status != "pass"]  # a finding or unknown
    cursor = prove_named(TRITON_CURSOR)
    m.notes.append(f"tracker kernel proofs: {sum(k[1] == FINDING for k in kernel)} finding(s), "
                   f"{sum(k[1] == SHORTFALL for k in kernel)} unknown; the Triton cursor ({TRITON_CURSOR}) "
                   f"{cursor.status} in the spec; {passes} forward passes per campaign")
    gaps = missing_evidence(located, TRITON_ASSUMES)
    if gaps:
        m.notes.append(f"the Triton cursor's proof assumes {', '.join(r.name for r in TRITON_ASSUMES)}, whose "
                       f"evidence this vLLM does not hold: {'; '.join(gaps)}")
    runs = Runs(located, passes, args.seed, traces)
    for cell in m.cells:
        refused = {b: _refusal(cell.config, b) for b in ("flashinfer", "triton")}
        if all(refused.values()):
            rules = {b: r for b, r in refused.items() if r is not None}
            cell.status, cell.refused_by = REFUSED, list(dict.fromkeys(c for _, c in rules.values()))
            names = list(dict.fromkeys(name for name, _ in rules.values()))
            cell.detail = "; ".join(f"{' and '.join(b for b, r in rules.items() if r[0] == n)}: {n}" for n in names)
        else:
            if refused["flashinfer"] is None:
                _flashinfer(cell, runs, kernel)
            if refused["triton"] is None:
                status = PROOF_STATUSES.get(cursor.status, SHORTFALL)
                if status == PASS and gaps:
                    cell.worsen(SHORTFALL, f"Triton: its cursor proved in the spec of 0.33.0 ({TRITON_CURSOR}), "
                                f"but not shown to be this vLLM's: {gaps[0]}")
                else:
                    cell.worsen(status,
                                f"Triton: no trackers, its cursor {cursor.status} in the spec ({TRITON_CURSOR})")
        print(f"  {'  '.join(cell.config.values())}: {cell.status}", file=out, flush=True)
    return m
