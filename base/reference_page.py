"""The reference module, rebuilt from its documentation page.

vLLM's docs page for ``vllm.v1.worker.replayssm_utils``
(``../shared/reference/vllm-replayssm_utils.txt``) prints the source of every
public definition and kernel after a ``Source code in ...`` line, and the
methods of ``ReplaySSMModelContext`` a second time on their own.
:func:`module_source` keeps each printed top-level definition once (the
class with its methods; the re-printed methods, whose first parameter is
``self``, are dropped) under a header with the module's imports, its vLLM
imports (served by the stub package) and the four module-local helpers the
page does not print. Those helpers are written here from how the page uses
them: a named tuple of the materialize call's eleven leading tables (its
fields those of ours, :mod:`replayssm.impl.replayssm_utils`), int64
tables of data addresses (as bare addresses, the way vLLM builds them, not
registered anywhere) and of slot strides, and the lazy FlashInfer import.
"""

from __future__ import annotations

import ast

from replayssm.impl.replayssm_utils import _ReplaySSMMaterializeTables

MARKER = "Source code in "

_TABLE_FIELDS = "".join(f"    {name}: torch.Tensor\n" for name in _ReplaySSMMaterializeTables._fields)
"""The materialize call's leading tables, in argument order: the fields of our named tuple."""

HEADER = '''
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

import torch

from vllm.model_executor.layers.mamba.abstract import MambaBase
from vllm.model_executor.models.utils import extract_layer_index
from vllm.triton_utils import tl, triton
from vllm.v1.attention.backends.utils import NULL_BLOCK_ID
from vllm.v1.kv_cache_interface import KVCacheConfig, MambaSpec


class _ReplaySSMMaterializeTables(NamedTuple):
''' + _TABLE_FIELDS + '''


def _cuda_i64_ptrs(tensors):
    return torch.tensor([_reinterpret_u64_as_i64(t.data_ptr()) for t in tensors], dtype=torch.int64,
                        device=tensors[0].device)


def _cuda_i64_slot_strides(tensors):
    return torch.tensor([t.stride(0) for t in tensors], dtype=torch.int64, device=tensors[0].device)


@cache
def _load_replayssm_materialize():
    from flashinfer.mamba.replayssm_materialize import replayssm_materialize

    return replayssm_materialize
'''


def _is_prose(line: str) -> bool:
    return bool(line) and not line[0].isspace() and not line.startswith(("def ", "class ", "@", ")"))


def printed_blocks(text: str) -> list[str]:
    """Each source listing of the page, from its ``Source code in`` line to the next prose line."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if not lines[i].startswith(MARKER):
            i += 1
            continue
        i += 1
        block: list[str] = []
        while i < len(lines) and not (block and _is_prose(lines[i])) and not lines[i].startswith(MARKER):
            block.append(lines[i])
            i += 1
        blocks.append("\n".join(block).strip("\n") + "\n")
    return blocks


def _is_method(block: str) -> bool:
    node = ast.parse(block).body[0]
    return isinstance(node, ast.FunctionDef) and bool(node.args.args) and node.args.args[0].arg == "self"


def module_source(text: str) -> str:
    """The page's definitions, each once, under :data:`HEADER`."""
    kept = [b for b in printed_blocks(text) if not _is_method(b)]
    return HEADER + "\n\n" + "\n\n".join(kept)
