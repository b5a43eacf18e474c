"""The hazard matrix of a worker-side version (generations A-D, the reference API): ``review FILE --matrix``.

The dimensions the version's host branches on (:func:`dimensions`):

- **cache mode** ``none``/``align``/``all``: the host maps it to
  ``MATERIALIZE_PREFIXES`` (``review/host_modes.py``, read from its source)
  and launches it as its generation's launch contract says; the scheduler
  sizes the block table and cuts prefill chunks per mode;
- **speculative tokens** ``0``/``k``: the kernels take the ring length
  ``R = W + 1 + k`` and decode rows of up to ``1 + k`` tokens (``0``: the
  fuzzed geometries with ``R = W + 1``; ``k``: those whose decode rows may be
  longer than one token);
- **Mamba cache groups** ``1``/``2``: the host launches per cache group, or
  one model-wide grid over the groups;
- **model runner** ``V1``/``V2``: V1 passes per-row query lengths and pre-step
  computed counts, V2 cumulative offsets, post-step counts and an index
  mapping (vLLM's tests name the two launches ``v1`` and ``v2``);
- **async scheduling** is collapsed: these hosts read no such setting (the
  runner's per-step inputs are outside the corpus).

Each cell gets the kernel findings whose counterexample lies in it (the
version's kernel proofs, run once; one whose launch cannot be read, a proof
that relies on a launch clause vLLM does not guarantee (latent), and one
neither proved nor replayed as a finding (a coverage shortfall) in every
cell), one lifecycle campaign of its systems and one probe per caller
assumption vLLM does not guarantee (each ``N`` examples, seeded:
:data:`EXAMPLES` by default). A failure is judged as ``review`` judges it
(``review/verdicts.py``): one whose impact nobody reads (``review/impact.py``)
is said in the cell's detail, a finding only with ``--strict``; a probe not
finished, or a lifecycle campaign cut by ``--budget`` or with no system to
draw, is a ``coverage shortfall``. No corpus host refuses any of these
configurations, so no cell is ``not accepted``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from replayssm.base.reports import replay_command
from replayssm.fuzz.caller_shapes import GEOMETRIES
from replayssm.spec.geometry import CACHE_MODES, Conventions, Geometry, check_cache_mode
from replayssm.spec.provenance import T1, VERSIONS_README, Citation, cite

from .matrix import FINDING, LATENT, PASS, SHORTFALL, MatrixCell, Dimension, Matrix, cells_of

if TYPE_CHECKING:
    from .campaign import Version
    from .impact import Impact

EXAMPLES = 4
"""Examples per campaign of each cell by default (``--matrix N`` sets N)."""

RUNNERS = {"V1": (False, False, False), "V2": (True, True, True)}
"""Each model runner's conventions: (``QUERY_METADATA_IS_CUMULATIVE``, ``NUM_COMPUTED_IS_POST_STEP``,
``HAS_IDX_MAPPING``), as vLLM's tests launch them under the ids ``v1`` and ``v2``."""

RUNNER_EVIDENCE = (
    cite(T1, 'ids=["v1", "v2"]', "vLLM's test names its two launches of the kernels v1 and v2"),
    cite(T1, "QUERY_METADATA_IS_CUMULATIVE=post_step,",
         "the v2 launch passes cumulative query offsets, post-step counts and an index mapping"),
)
ASYNC_EVIDENCE = (cite(VERSIONS_README, "The model runner code that computes the per-step inputs",
                       "the runner code that computes the kernels' inputs (where async scheduling acts) is not in "
                       "the corpus"),)


def _longest_decode(g: Geometry) -> int:
    return min(g.ring_len - g.window, g.window, g.block_size)


SPECULATIVE = {"0": tuple(dict.fromkeys(replace(g, ring_len=g.window + 1) for g in GEOMETRIES)),
               "k": tuple(g for g in GEOMETRIES if _longest_decode(g) > 1)}
"""Each speculative-token value's geometries: ``R = W + 1`` (decode rows of one token), and the fuzzed
geometries whose decode rows may hold ``1 + k`` tokens, ``k >= 1``."""


def _host_line(source: str, pattern: str) -> Citation | None:
    """The first line of the version's host code matching ``pattern``, as a citation of the file."""
    try:
        lines = Path(source).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    hit = next((line.strip() for line in lines if re.search(pattern, line)), None)
    if hit is None:
        return None
    from replayssm.spec import corpus

    try:
        rel = str(Path(source).resolve().relative_to(corpus.root().resolve()))
    except ValueError:
        rel = source
    return cite(rel, hit[:120], "the version's host code")


def dimensions(v: Version) -> list[Dimension]:
    """The serving options and whether ``v``'s host branches on each (see the module docstring)."""
    from .host_modes import describe, version_publishing_modes

    publishing = version_publishing_modes(v.source)
    mode_line = _host_line(v.source, r"\bmaterialize_prefixes\s*=\s*(?!=)")
    group_line = _host_line(v.source, r"for gid, .* in grouped")
    ks = sorted({_longest_decode(g) - 1 for g in SPECULATIVE["k"]})
    return [
        Dimension("cache mode", "mode", CACHE_MODES, True,
                  f"the host {describe(publishing)}; the scheduler sizes the block table per mode",
                  (mode_line,) if mode_line else ()),
        Dimension("speculative tokens", "spec", ("0", "k"), True,
                  f"the kernels take R = W + 1 + k ring rows and decode rows of 1 + k tokens (k = "
                  f"{ks[0]}-{ks[-1]} here)"),
        Dimension("async scheduling", "async", ("off/on",), False,
                  "the host reads no async setting; the runner's inputs under it are outside the corpus",
                  ASYNC_EVIDENCE),
        Dimension("cache groups", "groups", ("1", "2"), True,
                  f"API {v.api.name} launches " + ("one model-wide grid over the groups" if v.api.name == "D"
                                                   else "per cache group"), (group_line,) if group_line else ()),
        Dimension("runner", "runner", tuple(RUNNERS), True,
                  "V1 passes query lengths and pre-step counts, V2 cumulative offsets, post-step counts and an "
                  "index mapping", RUNNER_EVIDENCE),
    ]


def launched_in(v: Version, mode: str) -> Callable[[Conventions], bool]:
    """Whether ``v``'s host launches a constexpr combination in cache ``mode``: the flag its map gives the
    mode, the live columns its launch contract pins there, and flags that can serve the mode at all."""
    from .host_modes import version_publishing_modes

    publishing = version_publishing_modes(v.source)
    pins = [m.live_col_is_zero for m in v.api.contract.modes if m.mode == mode]

    def launched(conv: Conventions) -> bool:
        try:
            check_cache_mode(mode, conv)
        except ValueError:
            return False
        if publishing is not None and conv.materialize_prefixes != (mode in publishing):
            return False
        return not pins or pins[0] is None or conv.live_col_is_zero == pins[0]
    return launched


@dataclass(frozen=True)
class Space:
    """The systems of one cell: the conventions, geometries, cache mode and group count its campaigns draw."""

    where: Callable[[Conventions], bool]
    geometries: tuple[Geometry, ...]
    cache_mode: str
    groups: int


def space(v: Version, config: dict[str, str]) -> Space:
    """The systems of the cell ``config``."""
    runner, mode = RUNNERS[config["runner"]], launched_in(v, config["cache mode"])
    return Space(lambda c: (c.cumulative, c.post_step, c.has_idx_mapping) == runner and mode(c),
                 SPECULATIVE[config["speculative tokens"]], config["cache mode"], int(config["cache groups"]))


def _kernel_system(trace: dict[str, Any]) -> tuple[Conventions, Geometry, int, bool]:
    """A kernel-proof counterexample's system: conventions, geometry, groups, and whether a decode row of
    more than one token is in its launch (then only the speculative cells hold it)."""
    p = trace["params"]
    conv, geo = Conventions(**p["conventions"]), Geometry(**p["geometry"])
    long_decode = False
    for a in trace.get("actions", ()):
        picks = a.get("picks", {})
        if "query_metadata" not in picks:
            continue
        meta, n = picks["query_metadata"], picks.get("num_reqs", 0)
        lens = [meta[i + 1] - meta[i] for i in range(min(n, len(meta) - 1))] if conv.cumulative else meta[:n]
        flags = picks.get("is_prefilling", [True] * n)
        long_decode |= any(q > 1 and not f for q, f in zip(lens, flags))
    return conv, geo, len(p.get("layers_per_group", [1])), long_decode


def place_failure(cell: MatrixCell, strict: bool, what: str, impact: dict[str, Any] | None, trace: str | None,
          replay: str | None) -> None:
    """One failure in ``cell``, as ``review`` judges it: a finding, or (its ``impact`` read by nobody,
    without ``strict``) a deviation said in the cell's detail that leaves its status as it is."""
    if impact is not None and not impact["read"] and not strict:
        cell.worsen(PASS, f"{what}: {impact['whose']}, nobody reads it", trace, replay)
    else:
        cell.worsen(FINDING, what, trace, replay)


def place_kernel_findings(v: Version, cells: list[MatrixCell], findings: list[dict[str, Any]],
                          strict: bool = False) -> None:
    """Each kernel finding (the review's ``kernel_findings``, :func:`place_failure`d) in every cell whose host
    launches its variant: its mode and runner by its conventions, its group count or more, and both
    speculative values unless a decode row of its launch is longer than one token; one whose launch
    cannot be read in every cell (where it lies is unknown, so it may lie in any)."""
    import json

    for f in findings:
        what = f"kernel proof {f['property'].split('@')[0]}: {f['violated']}"
        try:
            conv, _, groups, long_decode = _kernel_system(json.loads(Path(f["trace"]).read_text()))
        except (OSError, KeyError, TypeError, ValueError) as e:
            for c in cells:
                place_failure(c, strict,
                              f"{what} (its launch cannot be read: {type(e).__name__}; in every configuration)",
                      f.get("impact"), f.get("trace"), f.get("replay"))
            continue
        for c in cells:
            s = space(v, c.config)
            if s.where(conv) and s.groups >= groups and not (long_decode and c.config["speculative tokens"] == "0"):
                place_failure(c, strict, what, f.get("impact"), f["trace"], f["replay"])


def place_unproved(cells: list[MatrixCell], proofs: dict[str, Any] | None) -> None:
    """Each kernel obligation that neither proved outright nor gave a finding, in every cell (where its
    variant lies is not known): one proved only under a launch clause vLLM does not guarantee
    (``relies_on``) is ``latent``; one ``unknown``, or failed with a counterexample the real kernel did
    not show (``not reproduced``, ``no small launch``), a ``coverage shortfall``: neither a proof nor a
    finding, never a pass."""
    from .kernel_proofs import REPLAYED_FINDINGS

    for r in (proofs or {}).get("results", ()):
        name = r["obligation"].split("@")[0]
        if r.get("relies_on"):
            status, said = LATENT, (f"kernel proof {name} relies on {', '.join(r['relies_on'])} (a launch clause "
                                    "vLLM does not guarantee; in every configuration)")
        elif r["status"] == "proved" or r.get("replayed") in REPLAYED_FINDINGS:
            continue
        else:
            status, said = SHORTFALL, (f"kernel proof {name} {r['status']}" + (f", {r['replayed']} on the real "
                                       "kernel" if r.get("replayed") else "") + " (in every configuration)")
        for c in cells:
            c.worsen(status, said)


def _impact(trace: str, v: Version, device: str) -> dict[str, Any] | None:
    """A lifecycle failure's impact as ``review`` derives it (:func:`.impact.with_impact`; None: not derived)."""
    from .impact import with_impact
    from .verdict_parts import Counterexample

    found: Impact | None = with_impact(Counterexample.of("", "", trace, v.source, shrunk=False), v, device).impact
    return found.as_json() if found is not None else None


def fill_cell(v: Version, cell: MatrixCell, args: argparse.Namespace, examples: int, traces: Path, out: TextIO) -> None:
    """Run ``cell``'s lifecycle campaign and its probes of the assumptions vLLM does not guarantee."""
    from .campaign import campaign
    from .probes import not_finished_why, probes, run_probe

    s = space(v, cell.config)
    tag = "-" + "-".join(cell.config.values())
    main = campaign((v,), budget=args.budget, seed=args.seed, out_dir=traces, tag=f"{v.label}{tag}",
                    device=args.device, examples=examples, where=s.where, geometries=s.geometries,
                    cache_mode=s.cache_mode, group_counts=(s.groups, s.groups))
    cell.examples += main.tally.examples
    strict = bool(args.strict)
    for f in main.failures:
        place_failure(cell, strict, f.message, _impact(f.trace, v, args.device), f.trace,
                      replay_command(f.trace, v.source))
    if main.tally.examples == 0:
        cell.worsen(SHORTFALL, "its lifecycle campaign drew no system: the host launches no variant here")
    elif main.cut:
        cell.worsen(SHORTFALL, f"its lifecycle campaign ran {main.tally.examples} of {examples} examples within "
                    "--budget")
    known = frozenset(f.prop for f in main.failures)
    for probe in (p for p in probes() if not p.guaranteed):
        reach = probe.reach
        if not any(reach.geometry(g) for g in s.geometries) or \
                not any(reach.conventions(c) and s.where(c) for c in Conventions.all()):
            continue  # its callers cannot break it in this configuration
        summary, result, independent = run_probe(
            probe, v, budget=args.budget, seed=args.seed, out_dir=traces, device=args.device, examples=examples,
            known=known, within=s.where, geometries=s.geometries, cache_mode=s.cache_mode,
            group_counts=(s.groups, s.groups), tag=tag)
        cell.examples += result.tally.examples
        outcome = summary["outcome"]
        if outcome == "latent":
            cell.worsen(LATENT, f"relies on {probe.name} (not guaranteed): without it {result.prop} breaks",
                        result.trace, replay_command(str(result.trace), v.source))
        elif outcome == "finding" and independent:
            place_failure(cell, strict, f"{independent.prop}: found without {probe.name}, stays with it kept",
                  _impact(independent.trace, v, args.device), independent.trace,
                  replay_command(independent.trace, v.source))
        elif outcome == "not finished":
            cell.not_finished.append(probe.name)
            cell.worsen(SHORTFALL, f"probe without {probe.name} not finished: its callers "
                        + not_finished_why(result, args.budget, "--matrix N"))
    if cell.status == PASS:
        cell.detail = f"every property held in {cell.examples} examples" + ("; " + cell.detail if cell.detail else "")
    line = "  ".join(cell.config.values())
    print(f"  {line}: {cell.status} ({cell.examples} examples)", file=out, flush=True)


def corpus_matrix(v: Version, args: argparse.Namespace, examples: int, traces: Path, out: TextIO) -> Matrix:
    """The hazard matrix of ``v`` (see the module docstring): its kernel proofs once, then every cell."""
    from .kernel_proofs import kernel_proofs
    from .kernel_proofs import summary as kernel_summary
    from .verdict_parts import kernel_findings

    dims = dimensions(v)
    m = Matrix(v.label, v.source, v.api.name, args.seed, examples, dims, cells=cells_of(dims))
    assert v.kernels is not None, "the matrix reads the version's kernels"
    proofs = kernel_proofs(v.kernels, v.api, v.source, traces, v.module)
    found = [k.as_json() for k in kernel_findings(proofs)]
    place_kernel_findings(v, m.cells, found, args.strict)
    place_unproved(m.cells, proofs)
    m.notes.append(f"kernel proofs of {v.label}: {kernel_summary(proofs)}; each finding placed in the cells whose "
                   "host launches its variant, a latent reliance or a proof neither proved nor replayed in every cell")
    for cell in m.cells:
        fill_cell(v, cell, args, examples, traces, out)
    return m
