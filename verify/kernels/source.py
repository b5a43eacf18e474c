"""The Python source of a ``@triton.jit`` function, parsed with true line numbers."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from types import FunctionType
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

Jit: TypeAlias = "JITFunction | InterpretedFunction"
"""A ``@triton.jit`` function (under ``TRITON_INTERPRET=1`` an ``InterpretedFunction``)."""


class Unsupported(Exception):
    """A construct outside the supported subset, named with its file and line."""

    def __init__(self, construct: str, file: str, line: int) -> None:
        super().__init__(f"unsupported construct {construct} at {file}:{line}")
        self.construct, self.file, self.line = construct, file, line


@dataclass(frozen=True)
class Source:
    """A jit function's definition node, its file and its module globals."""

    name: str
    node: ast.FunctionDef
    file: str
    globals: dict


def is_jit(obj: object) -> bool:
    """A ``@triton.jit`` function: a ``JITFunction``, or under
    ``TRITON_INTERPRET=1`` an ``InterpretedFunction``."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(obj, (triton.runtime.jit.JITFunction, InterpretedFunction))


def python_function(jit: Jit | Callable[..., object]) -> FunctionType:
    """The plain Python function behind a JIT object."""
    fn = getattr(jit, "fn", jit)
    if not inspect.isfunction(fn):
        raise TypeError(f"{jit!r} is not a Triton JIT function")
    return fn


@lru_cache(maxsize=None)
def _parse(fn: FunctionType) -> tuple[ast.FunctionDef, str]:
    lines, first = inspect.getsourcelines(fn)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"{fn.__qualname__} does not start with a def")
    return node, inspect.getsourcefile(fn) or fn.__code__.co_filename


def source_of(jit: Jit | Callable[..., object]) -> Source:
    """The parsed definition of ``jit`` (a JIT object or its function)."""
    fn = python_function(jit)
    node, file = _parse(fn)
    return Source(fn.__name__, node, file, fn.__globals__)


def is_constexpr(arg: ast.arg) -> bool:
    """A parameter annotated ``tl.constexpr`` (or ``constexpr``)."""
    ann = arg.annotation
    return ann is not None and ast.unparse(ann).split(".")[-1] == "constexpr"
