"""The caller contract by name: every caller assumption and model choice, with its provenance.

:data:`RECORDS` maps each name to its record (``spec.assumptions.ALL``, the
binding's ``spec.binding.ALL``, ``spec.model_choices.ALL``, the generations'
launch clauses ``spec.generations.contract.ALL``). A proof's named
hypotheses are either such a record or one of :data:`PROOF_HYPOTHESES`: the
proofs' own structure (definitions, invariants, guards), which is not a claim
about vLLM and so has no provenance. :func:`classify` says which.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Union

from . import assumptions, binding, model_choices, release_caller
from .assumptions import Assumption
from .generations import contract as launch_contracts
from .generations.contract import LaunchClause
from .model_choices import ModelChoice
from .provenance import CONTRADICTED, CORPUS, GUARANTEED, NOT_GUARANTEED, Provenance, provenance_problems

PROOF = "proof"
"""The class of a hypothesis that is the proofs' own structure."""
UNRECORDED = "unrecorded"
"""The class of a name that is neither a record nor a proof hypothesis."""

Record = Union[Assumption, ModelChoice, LaunchClause]

class _Records(Mapping[str, Record]):
    """The records by name, read from their registries when asked (a record
    added to ``spec.assumptions.ALL`` is one of them at once)."""

    def _now(self) -> dict[str, Record]:
        records: list[Record] = [*assumptions.ALL, *binding.ALL, *model_choices.ALL, *release_caller.ALL,
                                 *launch_contracts.ALL]
        return {r.name: r for r in records}

    def __getitem__(self, name: str) -> Record:
        return self._now()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


RECORDS: Mapping[str, Record] = _Records()
"""Every named record of the caller contract."""

PROOF_HYPOTHESES: dict[str, str] = {
    "definitions": "the Z3 names of a symbolic run's intermediate values equal what they name",
    "guard": "the action's guard: what the system model guarantees by construction (spec/system step_guard, "
             "admit_guard); its claims about vLLM are model choices",
    "selector": "the symbolic BMC's action selector picks one action per step",
    "pick domain": "each symbolic pick lies in its domain (spec/system/picks.py)",
    "bounded_domain": "the explicit BMC enumerates the bounded world of its parameters",
    "shape": "the symbolic state's entries are laid out in their shapes",
    "distinct_programs": "two programs of one launch differ in (batch row, group)",
    "rows_of_the_block": "the spec rows a program of the row-blocked kernel is proved against are its own "
                         "(batch row = block x rows per program + lane position, its group)",
    "rows_of_group_0": "the spec rows the row-blocked kernel's work-list program compacts are group 0's rows 0, 1, ...",
    "sampled_lanes": "the lanes a row block is proved at are distinct positions inside the block "
                     "(verify/kernels/contracts.LaneSample)",
    "release_launch": "a lane of a 0.33.0 tracker launch: its offset is >= 0, n_slots is the rows of "
                      "state_batch_indices, num_states the trackers' length (the host wrappers' arguments)",
    "release_ghost": "the ghost of a released slot: the pass FlashInfer ran and the count it accepted "
                     "(spec/release_ghost.py), not a claim about vLLM's host",
    "launch_facts": "the program ids of a launch of the row-blocked kernel: block >= 0, a row block below "
                    "num_reqs or the work-list program past it",
}
"""Hypothesis names of the proofs that are not caller facts, with what they say.
Names starting with one of :data:`INVARIANT_PREFIXES` are conjuncts of an
invariant, assumed of the pre-state."""

INVARIANT_PREFIXES = ("inv.", "inv(pre): ")

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The repository's root (the records' ``built_in`` files are relative to it)."""

STATUS_ORDER = (GUARANTEED, NOT_GUARANTEED, CONTRADICTED, PROOF, UNRECORDED)
"""The order in which :func:`by_status` lists its groups."""


def provenance_of(name: str) -> Provenance | None:
    """The provenance of record ``name``, or None when no record has that name."""
    record = RECORDS.get(name)
    return record.provenance if record is not None else None


def classify(name: str) -> str:
    """``name``'s provenance status (``guaranteed``, ``not guaranteed``,
    ``contradicted``), :data:`PROOF` for the proofs' own hypotheses, or
    :data:`UNRECORDED` for a name that is neither (a test keeps that set empty)."""
    p = provenance_of(name)
    if p is not None:
        return p.status
    if is_proof_hypothesis(name):
        return PROOF
    return UNRECORDED


def is_proof_hypothesis(name: str) -> bool:
    """``name`` is one of the proofs' own hypotheses (not a claim about vLLM)."""
    return name in PROOF_HYPOTHESES or name.startswith(INVARIANT_PREFIXES)


def by_status(names: list[str] | set[str]) -> list[tuple[str, list[str]]]:
    """``names`` grouped by :func:`classify`, in :data:`STATUS_ORDER`, each group sorted; empty groups left out."""
    groups: dict[str, list[str]] = {}
    for name in sorted(names):
        groups.setdefault(classify(name), []).append(name)
    return [(status, groups[status]) for status in STATUS_ORDER if status in groups]


def problems(records: Mapping[str, Record] | None = None, roots: dict | None = None,
             check_roots: tuple[str, ...] = (CORPUS,)) -> list[str]:
    """Every problem of the records' provenance (``spec.provenance.provenance_problems``;
    the citations of the roots in ``check_roots``) and every ``built_in`` file
    of a record that is not in the repository. ``records`` defaults to
    :data:`RECORDS`, ``roots`` to the evidence roots found here."""
    out = []
    for name, record in (RECORDS if records is None else records).items():
        out += provenance_problems(name, record.provenance, roots, check_roots)
        out += [f"{name}: built in by {w}, which is not a file of the repository"
                for w in record.built_in if not (REPO_ROOT / w).is_file()]
    return out
