"""The kernel obligations on our kernels and the reference design's, through
the API and the command line; playback separates a bug from a correct kernel."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.verify.kernels.obligations import properties, register
from replayssm.verify.kernels.registry import BLOCKED, COMPACTION, MIGRATION, REFERENCE
from replayssm.base.traces import load_trace
from replayssm.verify.kernels.playback import replay_kernel_trace
from replayssm.verify.obligation import REGISTRY, prove

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "impl"))
import impl_reference_kernels  # noqa: E402

from kernel_mutants import MUTANTS, load_mutant  # noqa: E402

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def test_ours_prove_every_obligation():
    import replayssm.verify.catalog  # noqa: F401  (plain prove includes ours)

    names = [n for n in REGISTRY if n.startswith("kernel.") and "@" not in n]
    assert len(names) == sum(len(properties(r)) for r in (*REFERENCE, BLOCKED)) == 19  # no padding programs
    # the row-blocked kernel's 80 variants (about 95 s of CPU) are proved in a
    # sample by test_kernel_blocked_proofs, in full by plain prove
    for name in (n for n in names if not n.startswith("kernel.blocked.")):
        r = prove(REGISTRY[name])
        assert r.status == "proved", (name, r.detail, r.counterexample)


@pytest.mark.corpus
def test_reference_kernels_prove_every_obligation():
    names = register(impl_reference_kernels.load(), "reference")
    assert len(names) == sum(len(properties(r)) for r in REFERENCE)
    for name in names:
        r = prove(REGISTRY[name])
        assert r.status == "proved", (name, r.detail, r.counterexample)


UNSUPPORTED = '''import triton
import triton.language as tl


@triton.jit
def _compact_replayssm_requests_kernel(plan_flush_count, active_request_indices, num_reqs,
                                       MAX_NUM_REQS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    n = num_reqs
    while n > 0:
        n = n - 1
    tl.store(active_request_indices, n)
'''


def test_an_unsupported_construct_fails_its_obligations_by_name_and_line(tmp_path):
    path = tmp_path / "odd_kernels.py"
    path.write_text(UNSUPPORTED)
    import importlib.util

    spec = importlib.util.spec_from_file_location("odd_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = register(module, "odd")
    assert names == [f"kernel.compaction.{p}@odd" for p in properties(COMPACTION)]
    r = prove(REGISTRY[names[0]])
    assert r.status == "failed"
    assert r.counterexample["violated"] == [f"supported construct: unsupported construct statement While at {path}:9"]


def test_cli_bad_input(capsys):
    assert main(["prove", "--impl", "x.py"]) == 2
    assert "needs --kernels" in capsys.readouterr().err
    assert main(["prove", "--kernels", "--impl", "/nonexistent/impl.py"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["prove", "--kernels", "--only", "no.such"]) == 2
    assert "matches no kernel obligation" in capsys.readouterr().err


def test_cli_proves_ours(capsys, tmp_path):
    out = tmp_path / "r.json"
    assert main(["prove", "--kernels", "--only", "migration.", "--jobs", "1", "--json", str(out)]) == 0
    assert [o["status"] for o in json.loads(out.read_text())["obligations"]] == ["proved"] * len(properties(MIGRATION))


@pytest.mark.skipif(not INTERPRETED, reason="playback runs under Triton's interpreter")
def test_cli_counterexample_is_a_trace_replay_reproduces_on_the_bug_only(capsys, tmp_path):
    mutant = next(m for m in MUTANTS if m.name == "prefill reset one column past the row")
    _, path = load_mutant(mutant, tmp_path)
    folder = tmp_path / "cx"
    status = main(["prove", "--kernels", "--impl", str(path), "--only", "postprocess.memory_safety", "--jobs", "1",
                   "--counterexamples", str(folder)])
    out = capsys.readouterr().out
    assert status == 1
    assert "kernel _postprocess_replayssm_kernel" in out and "programs: p: program_id" in out
    assert "read of block_table at" in out and "extent:" in out
    trace_file = folder / f"kernel.postprocess.memory_safety@{path.stem}.kernel-trace.json"
    assert trace_file.exists() and load_trace(trace_file).kind == "kernel"
    assert main(["replay", str(trace_file), "--recorded"]) == 1
    assert "failure reproduced: out of bounds" in capsys.readouterr().out
    ok, report = replay_kernel_trace(json.loads(trace_file.read_text()), "replayssm.impl.replayssm_utils")
    assert ok, report


def test_proof_cache_keeps_a_kernel_obligation_only_for_unchanged_kernel_source(tmp_path):
    """A whole proved obligation is kept under the kernel file's content too:
    editing the kernel must not leave a stale "proved" in the cache."""
    from replayssm.verify.proof_cache import ProofCache

    mutant = MUTANTS[0]
    module, path = load_mutant(mutant, tmp_path)
    name = register(module, "cachekey")[0]
    assert REGISTRY[name].sources == (str(path),)
    before = ProofCache(tmp_path / "cache").obligation_key(name)
    path.write_text(path.read_text() + "\n# edited\n")
    assert ProofCache(tmp_path / "cache").obligation_key(name) != before
