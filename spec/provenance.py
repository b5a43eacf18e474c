"""Provenance: what in vLLM (or FlashInfer) guarantees a caller assumption or a model choice.

Every named record of the caller contract (``spec.assumptions.Assumption``,
``spec.model_choices.ModelChoice``) carries a :class:`Provenance`:

- ``guaranteed``: vLLM (or FlashInfer) promises it; the evidence says where;
- ``not guaranteed``: nothing we hold shows vLLM promises it; ``reason``
  says what in vLLM would have to promise it (a kernel that relies on it is
  latent, not correct);
- ``contradicted``: the evidence shows vLLM does otherwise; ``reason`` says
  what must change in the model (until it does, results under it are suspect).

Evidence is a tuple of :class:`Citation`: a file under an evidence root (the
corpus, ``spec.corpus.root()``, or a FlashInfer source tree,
:func:`flashinfer_source_root`), a short
snippet that must occur in that file verbatim, and a sentence in our own
words of what it shows. :func:`citation_problems` and
:func:`provenance_problems` check them mechanically, so a citation whose file
is gone or whose snippet no longer occurs fails a test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import corpus

GUARANTEED = "guaranteed"
NOT_GUARANTEED = "not guaranteed"
CONTRADICTED = "contradicted"
STATUSES = (GUARANTEED, NOT_GUARANTEED, CONTRADICTED)

CORPUS = "corpus"
FLASHINFER = "flashinfer"
ROOTS = (CORPUS, FLASHINFER)

# The evidence files under the corpus root that the records cite.
PAGE = "vllm-replayssm_utils.txt"
HOST = "vllm-host/replayssm_utils_3431299a.py"
HOST_README = "vllm-host/README.md"
T6 = "vllm-host/T6_block_copy_test.py"
VERSIONS_README = "vllm-versions/README.md"
A1, A3, A4, C1, D1, D3 = (f"vllm-versions/{v}.py" for v in ("A1", "A3", "A4", "C1", "D1", "D3"))
T1, T2, T3, T4, T5 = (f"vllm-versions/T{i}_test.py" for i in range(1, 6))

MAX_SNIPPET = 120
"""The longest snippet a citation may quote: evidence is pointed at, not copied."""


@dataclass(frozen=True)
class Citation:
    """``snippet`` occurs verbatim in ``file`` (a path under the evidence root
    ``root``); ``shows`` says, in our words, what that passage shows."""

    file: str
    snippet: str
    shows: str
    root: str = CORPUS

    def __post_init__(self) -> None:
        if self.root not in ROOTS:
            raise ValueError(f"root must be one of {ROOTS}, got {self.root!r}")

    def where(self) -> str:
        """The cited file as a reader finds it: ``corpus:PATH`` or ``flashinfer:PATH``."""
        return f"{self.root}:{self.file}"


@dataclass(frozen=True)
class Provenance:
    """A record's status, its evidence, and (unless guaranteed) the reason."""

    status: str
    evidence: tuple[Citation, ...] = ()
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def is_guaranteed(self) -> bool:
        return self.status == GUARANTEED


def guaranteed(*evidence: Citation) -> Provenance:
    """vLLM promises it; ``evidence`` shows where."""
    return Provenance(GUARANTEED, tuple(evidence))


def not_guaranteed(reason: str, *evidence: Citation) -> Provenance:
    """No evidence that vLLM promises it: ``reason`` says what would have to."""
    return Provenance(NOT_GUARANTEED, tuple(evidence), reason)


def contradicted(reason: str, *evidence: Citation) -> Provenance:
    """``evidence`` shows vLLM does otherwise; ``reason`` says what the model must change."""
    return Provenance(CONTRADICTED, tuple(evidence), reason)


def cite(file: str, snippet: str, shows: str) -> Citation:
    """A citation of a file under the corpus root."""
    return Citation(file, snippet, shows)


def cite_flashinfer(file: str, snippet: str, shows: str) -> Citation:
    """A citation of a file of FlashInfer's source (``flashinfer/...``)."""
    return Citation(file, snippet, shows, FLASHINFER)


FLASHINFER_SOURCE_SETTING = "REPLAYSSM_FLASHINFER_SRC"
"""The environment variable naming a FlashInfer source tree (the folder that holds ``flashinfer/``)."""


def flashinfer_source_root() -> Path | None:
    """A FlashInfer source tree to check FlashInfer citations against:
    ``$REPLAYSSM_FLASHINFER_SRC`` if set, else the folder of an installed
    ``flashinfer`` package (found without importing it), else None."""
    named = os.environ.get(FLASHINFER_SOURCE_SETTING)
    if named:
        return Path(named)
    from importlib.util import find_spec

    try:
        spec = find_spec("flashinfer")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def evidence_root(root: str) -> Path | None:
    """The folder a citation's ``root`` names here, or None when there is none."""
    return corpus.root() if root == CORPUS else flashinfer_source_root()


def citation_problems(c: Citation, roots: dict[str, Path | None] | None = None) -> list[str]:
    """What is wrong with ``c``: an empty sentence, a snippet that is empty,
    too long or absent from its file, a file that does not exist. ``roots``
    maps each root name to its folder (default: :func:`evidence_root`)."""
    problems = []
    if not c.shows.strip():
        problems.append(f"{c.where()}: the citation does not say what it shows")
    if not c.snippet.strip():
        problems.append(f"{c.where()}: empty snippet")
    elif len(c.snippet) > MAX_SNIPPET:
        problems.append(f"{c.where()}: snippet of {len(c.snippet)} characters (at most {MAX_SNIPPET}: cite, do not copy)")
    folder = (roots or {}).get(c.root) if roots is not None else evidence_root(c.root)
    if folder is None:
        problems.append(f"{c.where()}: no {c.root} root here to check it against")
        return problems
    path = folder / c.file
    if not path.is_file():
        problems.append(f"{c.where()}: no such file under {folder}")
    elif c.snippet.strip() and c.snippet not in path.read_text(errors="replace"):
        problems.append(f"{c.where()}: snippet {c.snippet!r} does not occur in the file")
    return problems


def provenance_problems(name: str, p: Provenance, roots: dict[str, Path | None] | None = None,
                        check_roots: tuple[str, ...] = ROOTS) -> list[str]:
    """What is wrong with record ``name``'s provenance: a guarantee or a
    contradiction without evidence, a status other than guaranteed without a
    reason, and every problem of each citation whose root is in ``check_roots``."""
    problems = []
    if p.status in (GUARANTEED, CONTRADICTED) and not p.evidence:
        problems.append(f"{name}: {p.status} without evidence")
    if p.status != GUARANTEED and not p.reason.strip():
        problems.append(f"{name}: {p.status} without a reason")
    for c in p.evidence:
        if c.root in check_roots:
            problems += [f"{name}: {x}" for x in citation_problems(c, roots)]
    return problems

# The released vLLM 0.33.0's ReplaySSM files (``vllm-0.33.0/README.md``), as the wheel lays them out.
RELEASE = "vllm-0.33.0"
RELEASE_README = f"{RELEASE}/README.md"
RELEASE_SSU = f"{RELEASE}/vllm/model_executor/layers/mamba/ops/ssu_dispatch.py"
RELEASE_DECODE = f"{RELEASE}/vllm/model_executor/layers/mamba/ops/selective_state_update_replayssm_output_only.py"
RELEASE_MIXER = f"{RELEASE}/vllm/model_executor/layers/mamba/mamba_mixer2.py"
RELEASE_ATTN = f"{RELEASE}/vllm/v1/attention/backends/mamba_attn.py"
RELEASE_BATCH = f"{RELEASE}/vllm/v1/worker/gpu_input_batch.py"
RELEASE_MAMBA_UTILS = f"{RELEASE}/vllm/model_executor/layers/mamba/mamba_utils.py"
RELEASE_CACHE = f"{RELEASE}/vllm/config/cache.py"
RELEASE_VALIDATOR = f"{RELEASE}/vllm_config_validate_mamba_cached_kernel.py.txt"
