"""The row-blocked postprocess (``impl/kernels_blocked.py``): the shared worked
example under all 32 conventions, with one program holding every row and with
several partly masked row blocks (the compaction always in the same launch);
the single-row worked examples; planted bugs in copies of the kernel; the
spec-driven fuzz campaign at both levels; the latency benchmark's check."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest
import torch

import impl_builders
import test_impl_postprocess
from test_impl_postprocess import FLAGS, run_variant

from replayssm.impl import context_blocked
from replayssm.impl.context_blocked import RowBlockedModelContext

KERNELS = Path(context_blocked.__file__).with_name("kernels_blocked.py")


def blocked(rows: int, context: type = RowBlockedModelContext) -> type:
    """The blocked context class with ``rows`` rows per program."""
    return type(f"Rows{rows}", (context,), {"rows_per_program": rows})


@pytest.mark.parametrize("rows", [8, 2], ids=["rows8", "rows2"])
@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=5)),
                         ids=lambda f: "-".join(n for n, on in zip(FLAGS, f) if on) or "none")
def test_blocked_postprocess_all_variants(device: torch.device, monkeypatch: pytest.MonkeyPatch,
                                          rows: int, flags: tuple[bool, ...]) -> None:
    monkeypatch.setattr(impl_builders, "ReplaySSMModelContext", blocked(rows))
    run_variant(device, flags)


def test_rows_per_program_is_a_power_of_two() -> None:
    assert object.__new__(blocked(4)).rows_block == 4
    with pytest.raises(ValueError, match="rows_per_program: must be a power of two, got 3"):
        object.__new__(blocked(3)).rows_block
    with pytest.raises(ValueError, match="rows_per_program: must be an int in"):
        object.__new__(blocked(0)).rows_block


MUTANTS = {
    "compaction pads from one past the count": ("(rows >= total)", "(rows > total)"),
    "prefill reset skips the last column": ("tl.max(span, axis=0))", "tl.max(span, axis=0) - 1)"),
    "work list drops prefill copies": ("(~is_prefill | (live_col != target_col))", "~is_prefill"),
    "padding rows write layer slots": ("tl.store(layer_src + entry, src_value, mask=real)",
                                       "tl.store(layer_src + entry, src_value, mask=launched)"),
    "live update not masked to decode rows": ("committed_new, mask=decode)",
                                              "committed_new, mask=real & has_live)"),
}


def _mutant_context(tmp_path: Path, name: str) -> type:
    old, new = MUTANTS[name]
    source = KERNELS.read_text()
    assert source.count(old) == 1, old
    path = tmp_path / "mutant_kernels_blocked.py"
    path.write_text(source.replace(old, new).replace("from .kernels import", "from replayssm.impl.kernels import"))
    spec = importlib.util.spec_from_file_location(f"mutant_blocked_{abs(hash(name))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.postprocess_replayssm_blocked_kernel


SINGLE_ROW_EXAMPLES = [getattr(test_impl_postprocess, name) for name in dir(test_impl_postprocess)
                       if name.startswith("test_") and "teeth" not in name and "all_variants" not in name]


@pytest.mark.parametrize("example", SINGLE_ROW_EXAMPLES, ids=lambda f: f.__name__[5:])
def test_blocked_single_row_worked_examples(device: torch.device, monkeypatch: pytest.MonkeyPatch,
                                            example) -> None:
    monkeypatch.setattr(impl_builders, "ReplaySSMModelContext", blocked(1))
    example(device)


def _worked_examples(device: torch.device, monkeypatch: pytest.MonkeyPatch):
    """Every worked example on the blocked context, one callable at a time."""
    for rows in (8, 2):
        for flags in itertools.product([False, True], repeat=5):
            yield lambda rows=rows, flags=flags: (
                monkeypatch.setattr(impl_builders, "ReplaySSMModelContext", blocked(rows)),
                run_variant(device, flags))
    for example in SINGLE_ROW_EXAMPLES:
        yield lambda example=example: (
            monkeypatch.setattr(impl_builders, "ReplaySSMModelContext", blocked(1)), example(device))


def _caught(run) -> bool:
    try:
        run()
    except (AssertionError, ValueError):  # ValueError: the materialize backend rejects the plan
        return True
    return False


@pytest.mark.parametrize("name", list(MUTANTS))
def test_teeth_planted_bug_in_blocked_kernel_is_caught(device: torch.device, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(context_blocked, "postprocess_replayssm_blocked_kernel", _mutant_context(tmp_path, name))
    assert any(_caught(run) for run in _worked_examples(device, monkeypatch)), f"planted bug not caught: {name}"


@pytest.mark.parametrize("level", ["kernel", "context"])
def test_blocked_module_passes_a_fuzz_campaign(tmp_path: Path, level: str) -> None:
    from replayssm.fuzz.campaign import run_campaign
    from replayssm.fuzz.campaign_config import CampaignConfig

    config = CampaignConfig("replayssm.impl.replayssm_utils_blocked", "cpu", 64, 8, seed=5, jobs=1,
                            failures_dir=str(tmp_path), level=level)
    result = run_campaign(config, out=open(tmp_path / "log", "w"))
    assert not result["failures"], (tmp_path / "log").read_text()
    assert result["request_steps"] > 0


@pytest.mark.corpus  # the benchmark cuts the reference's kernels from the corpus's page
def test_latency_benchmark_variants_agree_with_the_reference(tmp_path: Path) -> None:
    """The latency benchmark's own check (every timed variant leaves the
    reference's buffers), interpreted on CPU, with one and with several row blocks."""
    import subprocess

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "latency.py"
    done = subprocess.run([sys.executable, "-P", str(script), "--check-only", "--device", "cpu",
                           "--rows", "3", "130", "--groups", "2", "--layers", "2", "--repeat", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("every variant equals the reference") == 4, done.stdout
