"""Where the tests find the reference material (test data, read at run time,
never copied): ``$REPLAYSSM_CORPUS``, default ``../shared/reference`` beside
the repository (the vLLM versions, the reference page, the host code)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("REPLAYSSM_CORPUS") or Path(__file__).resolve().parents[1].parent / "shared" / "reference")
REFERENCE_PAGE = ROOT / "vllm-replayssm_utils.txt"
VERSIONS = ROOT / "vllm-versions"
needs_corpus = pytest.mark.skipif(not ROOT.is_dir(), reason=f"the corpus root {ROOT} is not here "
                                  "(set REPLAYSSM_CORPUS to the folder holding vllm-versions/)")
