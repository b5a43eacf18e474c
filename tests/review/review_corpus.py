"""The corpus of real vLLM versions (test data outside the repository, found through
``replayssm.spec.corpus``: ``$REPLAYSSM_CORPUS``, default ``../shared/reference``) and
:func:`unmodified`, which turns a corpus file back into the shape of the file in a
vLLM checkout: its stand-ins replaced by the ``from vllm... import`` lines they
stand for (as the file's own comments name them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replayssm.spec import corpus

VERSIONS = ["A1", "A2", "A3", "A4", "A5", "B1", "B2", "B3", "C1", "C2", "D1", "D2", "D3"]
needs_corpus = pytest.mark.corpus
"""The marker of a test that reads the corpus (skipped, with the reason, where it is absent)."""


def version_path(label: str) -> Path:
    return corpus.versions() / f"{label}.py"


def unmodified(label: str, out_dir: Path) -> Path:
    """Write ``label``'s file with ``from vllm...`` imports in place of its stand-ins."""
    text = version_path(label).read_text()
    head, rest = text.split("# ---- stand-ins", 1)
    stand_ins, body = rest.split("# =====", 1)
    body = "# =====" + body
    imports = []
    for m in re.finditer(r"# vLLM: `(from vllm[^`]*)`", stand_ins):
        imports.append(" ".join(m.group(1).replace("#", " ").split()))
    head = head.replace("import enum  # added for the enum stand-ins below\n", "")
    head = head.replace("import triton\nimport triton.language as tl\n", "from vllm.triton_utils import tl, triton\n")
    out = out_dir / "ssu_dispatch.py"
    out.write_text(head + "\n".join(imports) + "\n\n" + body)
    return out
