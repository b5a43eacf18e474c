"""Teeth of the row-blocked kernel's obligations (``kernel.blocked.*``).

Each planted one-line change to a copy of ``impl/kernels_blocked.py`` is
caught by the obligation it names, in the named variant (proving that one
case keeps the test fast; the obligation proves every variant in ``prove``),
and its counterexample replays on the real (mutated) blocked kernel under
Triton's interpreter. The correct kernel shows no failure on the same trace.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from replayssm.impl import kernels_blocked
from replayssm.verify.kernels.obligations import kernel_claim, properties, register, variants
from replayssm.verify.kernels.registry import BLOCKED
from replayssm.verify.kernels.playback import playback
from replayssm.verify.kernels.report import explain
from replayssm.verify.obligation import REGISTRY, Obligation, prove

from kernel_mutants import Mutant

BLOCKED_FILE = Path(kernels_blocked.__file__)


ROWS_ALIGN = "block2 odd len/pre/nomap/align/live"
ROWS_ALIGN_MAP = "block2 unit len/pre/map/align/live"
ROWS_NONE = "block2 odd len/post/nomap/none/live"
WIDE_NONE = "block128 vllm len/pre/nomap/none/live"
WORK_LIST = "work list odd len/pre/nomap/align/live"

MUTANTS = [
    Mutant("prefill reset one column past the row",
           "col_hi = tl.maximum(tl.cdiv(pos_after, MAMBA_BLOCK_SIZE) - 1, 0)",
           "col_hi = tl.maximum(tl.cdiv(pos_after, MAMBA_BLOCK_SIZE), 0)", "memory_safety", case=ROWS_ALIGN),
    Mutant("reset loop one short", "tl.max(span, axis=0))", "tl.max(span, axis=0) - 1)", "equivalence",
           case=ROWS_ALIGN_MAP),
    Mutant("reset loop to the narrowest row", "tl.max(span, axis=0))", "tl.min(span, axis=0))", "equivalence",
           case=ROWS_ALIGN_MAP),
    Mutant("padding rows write layer slots", "tl.store(layer_src + entry, src_value, mask=real)",
           "tl.store(layer_src + entry, src_value, mask=launched)", "equivalence", case=ROWS_ALIGN_MAP),
    Mutant("live update not masked to decode rows", "committed_new, mask=decode)",
           "committed_new, mask=real & has_live)", "equivalence", case=ROWS_NONE),
    Mutant("every lane reads the first row's table", "table_rows = table + rows * stride",
           "table_rows = table + first_row * stride", "equivalence", case=ROWS_NONE),
    Mutant("the plan written by every group", "if group == 0:\n            tl.store(plan_ring_start",
           "if group >= 0:\n            tl.store(plan_ring_start", "conflicts", case=ROWS_ALIGN_MAP),
    Mutant("lanes read the live slot shifted by their lane", "start_prev = tl.load(ring_start_of + live_slot, mask=decode, other=0)",
           "start_prev = tl.load(ring_start_of + live_slot + rows - first_row, mask=decode, other=0)",
           "memory_safety", case=ROWS_NONE),
    Mutant("work list stored one past the list", "inside = rows < MAX_NUM_REQS", "inside = rows <= MAX_NUM_REQS",
           "memory_safety", case=WORK_LIST),
    Mutant("work list pads from one past the count", "(rows >= total)", "(rows > total)", "equivalence", case=WORK_LIST),
    Mutant("work list drops prefill copies", "(~is_prefill | (live_col != target_col))", "~is_prefill",
           "equivalence", case=WORK_LIST),
    Mutant("reset start through an overflowing product", "col_lo = pos_before // MAMBA_BLOCK_SIZE",
           "col_lo = pos_before * 2147483647 // 2147483647 // MAMBA_BLOCK_SIZE", "int32", case=ROWS_ALIGN),
]

WIDE_MUTANTS = [
    Mutant("lanes past the second do nothing", "rows = first_row + tl.arange(0, ROWS_PER_PROGRAM)\n        launched = rows < num_reqs",
           "rows = first_row + tl.arange(0, ROWS_PER_PROGRAM)\n        launched = (rows < num_reqs) & (rows - first_row < 2)",
           "equivalence", case=WIDE_NONE),
    Mutant("lanes past the second read the next row's block-table row", "table_rows = table + rows * stride",
           "table_rows = table + (rows + (rows - first_row) // 2) * stride", "equivalence", case=WIDE_NONE),
]
"""Planted bugs that only lanes past the second of a block have: every lane
of the kernel-level launch's 2-row blocks is right, so its proofs (the 2-lane
proofs that once stood, by an argument, for the 128 deployed rows) pass; the
sampled lanes of the deployed 128-row blocks catch them."""


def load_mutant(m: Mutant, folder: Path) -> tuple[object, Path]:
    """A copy of the blocked kernels with ``m`` planted, imported from its own file."""
    source = BLOCKED_FILE.read_text()
    assert source.count(m.old) == 1, f"{m.name}: the snippet occurs {source.count(m.old)} times"
    stem = "mutant_blocked_" + "".join(c if c.isalnum() else "_" for c in m.name)
    path = folder / f"{stem}.py"
    path.write_text(source.replace(m.old, m.new).replace("from .kernels import", "from replayssm.impl.kernels import"))
    spec = importlib.util.spec_from_file_location(stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[stem] = module
    spec.loader.exec_module(module)
    return module, path


@pytest.mark.parametrize("mutant", MUTANTS + WIDE_MUTANTS, ids=[m.name for m in MUTANTS + WIDE_MUTANTS])
def test_planted_bug_is_caught_and_replays(mutant, tmp_path):
    module, path = load_mutant(mutant, tmp_path)
    label = path.stem
    register(module, label)
    name = f"kernel.blocked.{mutant.caught_by}@{label}"
    claim = kernel_claim(module, "blocked", mutant.caught_by, mutant.case).claim
    result = prove(Obligation(name, "blocked", "", lambda: [claim]))
    assert result.status == "failed", f"{mutant.name}: {name} {result.status}"
    finding = explain(name, mutant.case, str(path))
    assert finding.trace is not None, finding.text
    seen = playback(finding.trace, module)
    assert seen.reproduces(mutant.caught_by), f"{mutant.name}: not reproduced\n{finding.text}\n{seen.report()}"
    assert not seen.spec_fault, f"{mutant.name}: the example lies outside the spec's domain\n{finding.text}"
    assert not playback(finding.trace, kernels_blocked).reproduces(mutant.caught_by), \
        f"{mutant.name}: the correct kernel fails the same trace"


def test_every_blocked_obligation_has_a_planted_bug_and_every_variant_a_case():
    assert sorted(set(properties(BLOCKED)) - {m.caught_by for m in MUTANTS}) == []
    labels = [label for label, _ in variants("blocked")]
    assert {m.case for m in MUTANTS} <= set(labels)
    assert len(labels) == 2 * len(variants("postprocess")) + 16


@pytest.mark.parametrize("mutant", WIDE_MUTANTS, ids=[m.name for m in WIDE_MUTANTS])
def test_a_bug_of_the_wide_lanes_passes_the_two_row_blocks(mutant, tmp_path):
    """The same planted bug, in the same flags and geometry with 2 rows per program: proved."""
    module, path = load_mutant(mutant, tmp_path)
    register(module, path.stem)
    narrow = mutant.case.replace("block128", "block2")
    claim = kernel_claim(module, "blocked", mutant.caught_by, narrow).claim
    result = prove(Obligation(f"kernel.blocked.{mutant.caught_by}@{path.stem}", "blocked", "", lambda: [claim]))
    assert result.status == "proved", f"{mutant.name}: {result.status} {result.detail}"


def test_plain_prove_fails_a_bug_planted_in_the_shipped_kernel(tmp_path, monkeypatch):
    """Plain ``prove``'s own obligation (``kernel.blocked.memory_safety``, no
    ``--impl``) is about the kernel ``replayssm.impl.kernels_blocked`` holds:
    with a planted bug in its place the whole obligation fails (at its first
    variant), with the variant named."""
    import replayssm.verify.catalog  # noqa: F401  (plain prove's obligations)
    from replayssm.verify.kernels import blocked, obligations

    mutant = next(m for m in MUTANTS if m.name == "lanes read the live slot shifted by their lane")
    module, _ = load_mutant(mutant, tmp_path)
    monkeypatch.setattr(kernels_blocked, blocked.KERNEL, getattr(module, blocked.KERNEL))
    monkeypatch.setattr(obligations, "_CASES", {})  # no case of the correct kernel built before
    result = prove(REGISTRY[f"kernel.blocked.{mutant.caught_by}"])
    assert result.status == "failed", f"{mutant.name}: {result.status} {result.detail}"
    assert result.counterexample["case"] == variants("blocked")[0][0]
