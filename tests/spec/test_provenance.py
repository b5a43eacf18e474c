"""Every caller assumption and model choice has checkable provenance (spec/provenance.py,
spec/contract.py), and the checks have teeth: a guarantee without evidence, a snippet
that is not in its file and a cited file that does not exist each fail."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from replayssm.spec import assumptions, binding, contract, model_choices, release_caller
from replayssm.spec.generations import contract as generations_contract
from replayssm.spec.provenance import (
    CORPUS, FLASHINFER, FLASHINFER_SOURCE_SETTING, GUARANTEED, Citation, Provenance, cite, citation_problems,
    contradicted, flashinfer_source_root, guaranteed, not_guaranteed, provenance_problems,
)


@pytest.mark.corpus
def test_every_record_has_provenance_whose_corpus_citations_hold() -> None:
    assert contract.problems() == []


def test_flashinfer_citations_hold_in_a_flashinfer_source_tree() -> None:
    """Run where FlashInfer's source is (the GPU machine's bundle: scripts/gpu_tests.sh; or
    ``pip download --no-deps flashinfer-python``, unpacked, named by $REPLAYSSM_FLASHINFER_SRC)."""
    if flashinfer_source_root() is None:
        pytest.skip(f"no FlashInfer source here (set {FLASHINFER_SOURCE_SETTING} to an unpacked flashinfer-python, "
                    "or install it)")
    assert contract.problems(check_roots=(FLASHINFER,)) == []


def test_records_are_named_once() -> None:
    names = [r.name for r in [*assumptions.ALL, *binding.ALL, *model_choices.ALL, *release_caller.ALL,
                              *generations_contract.ALL]]
    assert len(names) == len(set(names)) == len(contract.RECORDS)


def test_every_hypothesis_prove_lists_is_a_record_or_the_proofs_own() -> None:
    from replayssm.verify.catalog import obligations

    names = set()
    for ob in obligations(None):
        first = next(iter(ob.build()), None)
        names |= {n for n, _ in first.assumptions} if first is not None else set()
    unrecorded = {n for n in names if contract.classify(n) == contract.UNRECORDED}
    assert not unrecorded, (f"{sorted(unrecorded)}: give each a record with provenance (an Assumption in "
                            "spec/assumptions.py or a ModelChoice in spec/model_choices.py), or, if it is the "
                            "proof's own structure, an entry of spec/contract.PROOF_HYPOTHESES")


def test_prove_list_shows_each_hypothesis_with_its_provenance(capsys: pytest.CaptureFixture) -> None:
    from replayssm.cli import main

    assert main(["prove", "--list", "--only", "postprocess.memory_safety"]) == 0
    out = capsys.readouterr().out
    assert "by provenance:" in out
    lines = {line.strip().split(": ", 1)[0]: line.strip().split(": ", 1)[1].split(", ") for line in out.splitlines()
             if line.startswith("      ")}
    assert {"guaranteed", "not guaranteed"} <= lines.keys()
    for status, names in lines.items():
        if status != "the proof's own":
            assert all(contract.classify(n) == status for n in names), (status, names)
    assert "slot_in_capacity" in lines["guaranteed"] and "positions_in_model" in lines["guaranteed"]
    assert "int32_sizes" in lines["not guaranteed"]
    assert contract.classify("model_fits_table") in lines and "model_fits_table" in lines[contract.classify("model_fits_table")]


# -- teeth ---------------------------------------------------------------------------------------------------


@pytest.fixture()
def tiny_corpus(tmp_path: Path) -> dict[str, Path | None]:
    (tmp_path / "page.txt").write_text("the kernel resets the live slot\n")
    return {CORPUS: tmp_path, FLASHINFER: None}


def _record(p: Provenance) -> dict:
    return {"planted": replace(assumptions.ROW_NONEMPTY, provenance=p)}


def test_a_guarantee_without_evidence_fails(tiny_corpus: dict) -> None:
    planted = _record(guaranteed())
    assert contract.problems(planted, tiny_corpus) == ["planted: guaranteed without evidence"]
    # and in the real records: an assumption marked guaranteed with its evidence removed
    bare = {a.name: replace(a, provenance=Provenance(GUARANTEED)) for a in assumptions.ALL[:1]}
    assert contract.problems(bare) == [f"{assumptions.ALL[0].name}: guaranteed without evidence"]


def test_a_snippet_not_in_its_file_fails(tiny_corpus: dict) -> None:
    planted = _record(guaranteed(cite("page.txt", "the kernel resets every slot", "a claim the file does not make")))
    [problem] = contract.problems(planted, tiny_corpus)
    assert "does not occur in the file" in problem
    # the same file and a snippet it holds pass
    assert contract.problems(_record(guaranteed(cite("page.txt", "resets the live slot", "it does"))), tiny_corpus) == []


def test_a_cited_file_that_does_not_exist_fails(tiny_corpus: dict) -> None:
    planted = _record(guaranteed(cite("versions/Z9.py", "anything", "a version the corpus lacks")))
    [problem] = contract.problems(planted, tiny_corpus)
    assert "no such file" in problem


def test_the_real_records_fail_against_a_corpus_without_their_files(tiny_corpus: dict) -> None:
    found = contract.problems(roots=tiny_corpus)
    assert any("no such file" in p for p in found) and all(
        "no such file" in p or "snippet" in p or "built in by" in p for p in found)


def test_other_malformed_provenance_fails(tiny_corpus: dict) -> None:
    assert provenance_problems("x", contradicted("it differs"), tiny_corpus) == ["x: contradicted without evidence"]
    assert provenance_problems("x", not_guaranteed(""), tiny_corpus) == ["x: not guaranteed without a reason"]
    long = cite("page.txt", "x" * 200, "a copied passage")
    assert any("at most" in p for p in citation_problems(long, tiny_corpus))
    assert any("does not say" in p for p in citation_problems(cite("page.txt", "live slot", " "), tiny_corpus))
    fi = Citation("flashinfer/x.py", "y", "z", FLASHINFER)
    assert citation_problems(fi, tiny_corpus) == ["flashinfer:flashinfer/x.py: no flashinfer root here to check it against"]
    with pytest.raises(ValueError, match="status must be one of"):
        Provenance("probably")


def test_a_model_choice_built_in_by_a_missing_file_fails(tiny_corpus: dict) -> None:
    planted = {"planted": replace(model_choices.NULL_BLOCK_IS_PAD,
                                  provenance=guaranteed(cite("page.txt", "live slot", "ok")),
                                  built_in=("spec/no_such_module.py",))}
    assert contract.problems(planted, tiny_corpus) == [
        "planted: built in by spec/no_such_module.py, which is not a file of the repository"]
