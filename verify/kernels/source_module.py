"""A target's kernels read from its source, without running the target.

The kernel proofs and the kernel diff read a ``@triton.jit`` function's source
and resolve the names it uses (helpers, constants) in its module. Importing
the target for that would run its top-level code in the process that decides
the verdict (issue 27: a target may end that process, or replace a library
function). :func:`source_module` builds the module from the file's syntax
tree instead, keeping only what defines kernels and cannot act:

* imports of the standard library, ``triton``, ``torch``, ``numpy`` and the
  ``vllm`` names the stub provides (:mod:`replayssm.base.vllm_stub`);
* function definitions, with the decorators that are Triton's
  (``triton.jit``, ``triton.autotune(...)``, ``triton.heuristics(...)``);
  another decorator is left off;
* assignments of constants: literals, names, attributes, arithmetic, tuples,
  and ``tl.constexpr(...)`` of those.

Everything else at the top level (calls, classes, ``if``, ``try``, loops) is
left out, so nothing of the target runs but Triton's decorator on its own
functions. The functions keep the file's name and line numbers, so their
source and errors point into the file.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import ModuleType

ALLOWED_ROOTS = frozenset({"triton", "torch", "numpy", "vllm", "__future__"}) | frozenset(sys.stdlib_module_names)
"""Modules a target's source may import here (none of them the target's own)."""

TRITON_DECORATORS = frozenset({"jit", "autotune", "heuristics", "Config"})

_COUNTER = iter(range(1 << 62))


def _root(name: str | None) -> str:
    return (name or "").split(".")[0]


def _is_import_kept(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(_root(a.name) in ALLOWED_ROOTS for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and _root(node.module) in ALLOWED_ROOTS
    return False


def _is_constant(expr: ast.expr) -> bool:
    """A value that only names, reads and computes (``tl.constexpr`` calls included)."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Call):
            func = n.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name != "constexpr":
                return False
        elif not isinstance(n, (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List,
                                ast.operator, ast.unaryop, ast.expr_context, ast.keyword)):
            return False
    return True


def _is_triton_decorator(expr: ast.expr) -> bool:
    """``triton.jit``, ``jit``, ``triton.autotune(configs=[triton.Config(...)], ...)`` and the like."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Call):
            func = n.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in TRITON_DECORATORS:
                return False
        elif isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    head = expr.func if isinstance(expr, ast.Call) else expr
    name = head.attr if isinstance(head, ast.Attribute) else head.id if isinstance(head, ast.Name) else ""
    return name in TRITON_DECORATORS


def kept_statements(tree: ast.Module) -> ast.Module:
    """The statements of ``tree`` that :func:`source_module` runs (see the module docstring)."""
    body: list[ast.stmt] = []
    for node in tree.body:
        if _is_import_kept(node):
            body.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.decorator_list = [d for d in node.decorator_list if _is_triton_decorator(d)]
            body.append(node)
        elif isinstance(node, ast.Assign) and _is_constant(node.value):
            body.append(node)
        elif isinstance(node, ast.AnnAssign) and node.value is not None and _is_constant(node.value):
            node.annotation = ast.Constant(None)  # an annotation is evaluated at the top level: not run
            body.append(node)
    return ast.Module(body=body, type_ignores=[])


def source_module(path: str | Path, label: str = "--impl") -> ModuleType:
    """The module of the ``.py`` file at ``path`` as its kernels' definitions
    alone (:func:`kept_statements`), its other top-level code not run; a
    ``ValueError`` naming the file when it cannot be read or parsed."""
    from replayssm.base import vllm_stub

    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{label} file {str(path)!r} cannot be read as Python source: {e}") from None
    try:
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError) as e:
        raise ValueError(f"{label} file {str(path)!r} does not parse: {e}") from None
    name = f"replayssm_kernel_source_{next(_COUNTER)}"
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # Triton's jit looks its function's module up
    code = compile(kept_statements(tree), str(path), "exec")
    try:
        with vllm_stub.injected():
            exec(code, module.__dict__)  # noqa: S102 - imports, definitions and constants only (see above)
    except Exception as e:  # noqa: BLE001 - an import the stub lacks, a constant naming a left-out value
        del sys.modules[name]
        raise ValueError(f"{label} file {str(path)!r}: its kernels' definitions cannot be read alone: "
                         f"{type(e).__name__}: {e}") from None
    return module


def module_file(name: str, label: str = "--impl") -> Path:
    """The source file of the module or file ``name``, found without importing it
    (a ``.txt`` documentation page is rebuilt as a module first)."""
    import importlib.util
    import tempfile

    if name.endswith(".py"):
        if not Path(name).is_file():
            raise ValueError(f"{label} file {name!r} does not exist")
        return Path(name)
    if name.endswith(".txt"):
        from replayssm.base.reference_page import module_source

        page = Path(name)
        if not page.is_file():
            raise ValueError(f"{label} file {name!r} does not exist")
        out = Path(tempfile.mkdtemp(prefix="replayssm-kernels-")) / f"{page.stem.replace('-', '_')}_kernels.py"
        try:
            out.write_text(module_source(page.read_text()))
        except (UnicodeDecodeError, SyntaxError, ValueError, IndexError, KeyError) as e:
            raise ValueError(f"{label} file {name!r} is not a documentation page of the module's source: "
                             f"{type(e).__name__}: {e}") from None
        return out
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as e:
        raise ValueError(f"{label} module {name!r} cannot be found: {e}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ValueError(f"{label} module {name!r} has no Python source file")
    return Path(spec.origin)


def kernel_module(name: str, label: str = "--impl") -> ModuleType:
    """A target's kernels for the proofs: ours (a ``replayssm.`` module) imported
    as any module of this package is; any other target read from its source
    alone (:func:`source_module`), never imported."""
    import importlib

    if name.startswith("replayssm."):
        try:
            return importlib.import_module(name)
        except ImportError as e:
            raise ValueError(f"{label} module {name!r} cannot be imported: {e}") from None
    return source_module(module_file(name, label), label)
