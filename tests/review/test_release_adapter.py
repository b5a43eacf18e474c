"""Generation P's adapter (``spec/generations/gen_p.py``): detection, and its role records are what is proved.

P is a :class:`TrackerApi` beside the launch-API generations: its signature
matches 0.33.0's ``ssu_dispatch.py`` and no other version; ``review --vllm``'s
kernel proofs and ``--base`` diff take the kernels, parameters, constexprs and
caller clauses from its roles, so a role record that leaves out a clause the
kernel needs makes its proof fail (the record is read, not a copy of it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from replayssm.verify.kernels import tracker_proofs as rkp
from replayssm.spec import corpus
from replayssm.spec import release_caller as caller
from replayssm.spec.generations import GENERATIONS, TRACKER_GENERATIONS, GenerationError, detect, gen_p
from replayssm.verify.kernels.source_module import source_module
from review_corpus import VERSIONS, needs_corpus, version_path

from replayssm.verify.obligation import REGISTRY


@pytest.fixture(autouse=True)
def registry_as_it_was() -> Iterator[None]:
    """A ``prove --kernels --impl`` of a generation-P file registers its obligations in this process:
    they are taken out again, so that later tests see the catalog's obligations only."""
    before = dict(REGISTRY)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)

SSU = "vllm/model_executor/layers/mamba/ops/ssu_dispatch.py"


def release_module():  # type: ignore[no-untyped-def]
    return source_module(str(corpus.root() / "vllm-0.33.0" / SSU), "--vllm")


@needs_corpus
def test_p_matches_the_release_and_no_launch_api_does() -> None:
    module = release_module()
    assert gen_p.API in TRACKER_GENERATIONS and gen_p.API.matches(module)
    assert not any(api.matches(module) for api in GENERATIONS)
    with pytest.raises(GenerationError):
        detect(module)


@needs_corpus
@pytest.mark.parametrize("version", VERSIONS)
def test_p_matches_no_worker_side_version(version: str) -> None:
    assert not gen_p.API.matches(source_module(str(version_path(version)), "--impl"))


def test_the_roles_and_contract_are_the_adapters() -> None:
    assert rkp.ROLES is gen_p.API.roles
    assert [(r.transition, r.jit) for r in rkp.ROLES] == [
        ("commit", gen_p.COMMIT), ("reset", gen_p.UPDATE), ("advance", gen_p.UPDATE)]
    assert set(gen_p.API.contract.clauses) == set(caller.ALL)
    assert caller.ASYNC_ACCEPTED_ORDERED in gen_p.API.contract.unguaranteed()
    for role in rkp.ROLES:
        assert all(u.clause in gen_p.API.contract.clauses for u in role.clauses)
        assert {p.name for p in role.params} >= set(gen_p.API.signature.get(role.jit, ())) - {"RESET"}


@needs_corpus
def test_a_role_without_the_row_buffer_clause_fails_its_memory_safety(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit reads ``num_accepted_tokens`` and ``query_start_loc`` per lane: without
    ``p_row_buffers_cover_launch`` in its record, its loads may leave those tensors."""
    commit = rkp.ROLES[0]
    kept = tuple(u for u in commit.clauses if u.clause is not caller.ROWS_COVERED)
    assert len(kept) == len(commit.clauses) - 1
    monkeypatch.setattr(rkp, "ROLES", (replace(commit, clauses=kept),))
    proofs = {p.property: p.result for p in rkp.prove_kernels(release_module())}
    assert proofs["equivalence"].status == "proved"
    assert proofs["memory safety"].status == "failed", proofs["memory safety"]


@needs_corpus
def test_a_role_launched_with_the_wrong_constexpr_fails_its_equivalence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reset's record says its host passes ``RESET = True``; a record saying False proves the advance's
    code against the reset's program, which differs."""
    reset = rkp.ROLES[1]
    monkeypatch.setattr(rkp, "ROLES", (replace(reset, constexprs={**reset.constexprs, "RESET": False}),))
    proofs = {p.property: p.result for p in rkp.prove_kernels(release_module())}
    assert proofs["equivalence"].status == "failed"


def test_a_parameter_record_is_checked() -> None:
    from replayssm.spec.generations.tracker_api import STRIDE, Param

    with pytest.raises(ValueError, match="names the buffer"):
        Param("state_batch_indices_stride", STRIDE)
    with pytest.raises(ValueError, match="kind must be one of"):
        Param("n_slots", "int")


def test_the_campaigns_and_probes_are_the_adapters() -> None:
    from replayssm.review import release_review as rr

    contract = gen_p.API.contract
    assert rr.CAMPAIGNS == tuple((c.name, c.geometry) for c in contract.configurations)
    assert rr.PROBES == ((caller.ASYNC_ACCEPTED_ORDERED, "previous_rows", "mtp W16 T4 R20"),)


def test_a_probe_record_is_checked() -> None:
    """Only a clause of the contract that vLLM does not guarantee is probed, on one of its configurations."""
    from replayssm.spec.generations.tracker_api import ProbeUse

    contract = gen_p.API.contract
    with pytest.raises(ValueError, match="does not guarantee"):
        replace(contract, probes=(ProbeUse(caller.DISTINCT_SLOTS, "previous_rows", "mtp W16 T4 R20"),))
    with pytest.raises(ValueError, match="is not one of"):
        replace(contract, probes=(ProbeUse(caller.ASYNC_ACCEPTED_ORDERED, "previous_rows", "mtp W8"),))


@needs_corpus
def test_prove_kernels_impl_proves_the_adapters_roles(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``prove --kernels --impl ssu_dispatch.py`` proves P's roles; a planted commit (advancing by the
    written length) fails its equivalence there, with exit 1."""
    from replayssm.cli import main

    real = corpus.root() / "vllm-0.33.0" / SSU
    assert main(["prove", "--kernels", "--impl", str(real), "--no-cache",
                 "--counterexamples", str(tmp_path / "cx")]) == 0
    out = capsys.readouterr().out
    assert all(f"{r.name}.{p}@ssu_dispatch" in out for r in gen_p.API.roles for p in ("equivalence", "memory_safety"))
    planted = tmp_path / "ssu_dispatch.py"
    text = real.read_text()
    old = "accepted_since_checkpoint + accepted_from_previous_query,"
    assert text.count(old) == 1
    planted.write_text(text.replace(old, "accepted_since_checkpoint + previous_speculative_query_len,"))
    assert main(["prove", "--kernels", "--impl", str(planted), "--no-cache", "--only", "P.commit.equivalence",
                 "--counterexamples", str(tmp_path / "cx")]) == 1
    assert "kernel.P.commit.equivalence@ssu_dispatch" in capsys.readouterr().out
