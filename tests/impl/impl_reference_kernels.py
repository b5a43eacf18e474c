"""Load the reference design's Triton kernels from its documentation page.

The reference (``vllm-replayssm_utils.txt``, vLLM's docs page for
``vllm.v1.worker.replayssm_utils``) prints each kernel's source under a
``@triton.jit`` line. This module cuts those blocks out and compiles them into
a throw-away module, for differential tests against ``replayssm.impl``.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from replayssm.spec import corpus

KERNELS = ("mamba_state_copy_boundary", "_postprocess_replayssm_kernel",
           "_compact_replayssm_requests_kernel", "_reset_new_replayssm_slots_kernel")


def _blocks(lines: list[str]) -> list[str]:
    """Source blocks that start at a column-0 ``@triton.jit`` and end at prose."""
    blocks = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("@triton.jit"):
            i += 1
            continue
        block = [lines[i]]
        i += 1
        while i < len(lines):
            line = lines[i]
            prose = line and not line[0].isspace() and not line.startswith(("def ", ")", "@"))
            if prose:
                break
            block.append(line)
            i += 1
        blocks.append("\n".join(block).rstrip() + "\n")
    return blocks


def load() -> ModuleType:
    """The reference kernels as a module, cut from the corpus's reference page
    (raises FileNotFoundError without it: a test calling this carries the ``corpus`` marker)."""
    lines = corpus.reference_page().read_text().splitlines()
    source = "import triton\nimport triton.language as tl\n\n\n" + "\n\n".join(_blocks(lines))
    # Triton's JIT reads the function source from a real file.
    path = Path(tempfile.mkdtemp()) / "replayssm_reference_kernels.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("replayssm_reference_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    missing = [name for name in KERNELS if not hasattr(module, name)]
    if missing:
        raise RuntimeError(f"reference page lacks kernels {missing}")
    return module
