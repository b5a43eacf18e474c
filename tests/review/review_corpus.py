"""The corpus of real vLLM versions (test data in ../shared, read at run time) and
:func:`unmodified`, which turns a corpus file back into the shape of the file in a
vLLM checkout: its stand-ins replaced by the ``from vllm... import`` lines they
stand for (as the file's own comments name them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "vllm-versions"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/reference/vllm-versions")
VERSIONS = ["A1", "A2", "A3", "A4", "A5", "B1", "B2", "B3", "C1", "C2", "D1", "D2", "D3"]
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="the vLLM corpus (../shared) is not here")


def version_path(label: str) -> Path:
    return CORPUS / f"{label}.py"


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
