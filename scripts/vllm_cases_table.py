"""Write the table of vLLM's own kernel tests as caller cases into docs/reviewing.md.

    python3 scripts/vllm_cases_table.py   # rewrites the block between the vllm-cases markers

Each row is one case of ``tests/review/vllm_cases.py`` with its three checks
(the caller model admits it, the spec predicts every asserted value, the
review harness reproduces it on the corpus version the test was written for);
then the tests of T1-T5 outside the kernels' caller model. The output is a
function of the tree and the corpus, so ``tests/review/test_vllm_cases.py``
regenerates it and compares it with the committed file.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reviewing.md"
BEGIN, END = "<!-- vllm-cases:begin (scripts/vllm_cases_table.py) -->", "<!-- vllm-cases:end -->"


def rewritten(text: str) -> str:
    """``text`` with the block between the markers replaced by the current table."""
    sys.path.insert(0, str(ROOT / "tests" / "review"))
    import vllm_cases

    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} lacks the markers {BEGIN} ... {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + "\n".join(vllm_cases.table()) + "\n" + END + tail


def main() -> int:
    DOC.write_text(rewritten(DOC.read_text()))
    print(DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
