"""A target's kernels read from its source, without running the target.

The kernel proofs and the kernel diff read a ``@triton.jit`` function's source
and resolve the names it uses (helpers, constants) in its module. Importing
the target for that would run its top-level code in the process that decides
the verdict (issue 27: a target may end that process, or replace a library
function). :func:`source_module` builds the module from the file's syntax
tree instead, keeping only what defines kernels and cannot act:

* imports of ``triton``, ``torch``, ``numpy``, the ``vllm`` names the stub
  provides (:mod:`replayssm.base.vllm_stub`) and the standard library's
  modules this process has imported already (importing another could act:
  ``antigravity`` starts a browser, ``this`` prints);
* function definitions, with the decorators that are Triton's
  (``triton.jit``, ``triton.autotune(...)``, ``triton.heuristics(...)``);
  another decorator is left off; a parameter's default that is no constant
  becomes None, an annotation that is no name or attribute is left off
  (defaults and annotations are evaluated when the ``def`` runs);
* assignments of constants to names: literals, names, attributes,
  arithmetic, tuples, and ``tl.constexpr(...)`` of those.

Everything else at the top level (calls, classes, ``if``, ``try``, loops,
assignments to attributes or items: ``tl.cdiv = ...``, ``os.environ[...] =
...``) is left out. What is kept is checked as it runs, since a name may be
bound to anything (``from os import _exit as constexpr``): each call must be
one of Triton's (:data:`TRITON_CALLS`, by identity), a bare decorator must be
``triton.jit``, and arithmetic takes numbers, strings, bytes and tuples only,
within :data:`MAX_BITS` bits and :data:`MAX_LENGTH` items (``2 ** 10 ** 10``
would not end); a statement that fails a check is left out (a decorator, left
off; a default, None). So nothing of the target runs but Triton's decorators
on its own functions. The functions keep the file's name and line numbers, so
their source and errors point into the file.
"""

from __future__ import annotations

import ast
import operator
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

TRITON_ROOTS = frozenset({"triton", "torch", "numpy", "vllm", "__future__"})
"""Packages a target's source may import here whether or not they are loaded (none of them the target's own)."""

ALLOWED_ROOTS = TRITON_ROOTS | frozenset(sys.stdlib_module_names)
"""Modules a target's source may import here (the standard library's only when loaded already)."""

TRITON_DECORATORS = frozenset({"jit", "autotune", "heuristics", "Config"})

MAX_BITS = 4096
"""The largest integer (in bits) the kept arithmetic computes or takes."""

MAX_LENGTH = 1 << 16
"""The longest string, bytes or tuple the kept arithmetic makes."""

CHECKED = "__replayssm_checked__"
"""The name the kept code's calls, decorators and arithmetic go through (:class:`_Checks`)."""

_COUNTER = iter(range(1 << 62))


class Refused(Exception):
    """A kept statement would do what the source reading does not run (a call
    other than Triton's, arithmetic past the bounds): it is left out."""


def triton_calls() -> frozenset[int]:
    """The ids of the callables the kept code may call: Triton's decorators,
    ``triton.Config`` and ``tl.constexpr``."""
    import triton
    import triton.language as tl

    return frozenset(id(f) for f in (triton.jit, triton.autotune, triton.heuristics, triton.Config, tl.constexpr))


def _root(name: str | None) -> str:
    return (name or "").split(".")[0]


def _is_import_kept(node: ast.stmt) -> bool:
    """An import of an allowed package, or of standard modules already loaded
    (so importing them runs nothing; ``from M import x`` only of what ``M`` has)."""
    if isinstance(node, ast.Import):
        return all(_root(a.name) in TRITON_ROOTS or (_root(a.name) in ALLOWED_ROOTS and a.name in sys.modules)
                   for a in node.names)
    if isinstance(node, ast.ImportFrom):
        if node.level != 0 or _root(node.module) not in ALLOWED_ROOTS:
            return False
        if _root(node.module) in TRITON_ROOTS:
            return True
        loaded = sys.modules.get(node.module or "")
        return loaded is not None and all(a.name == "*" or hasattr(loaded, a.name) for a in node.names)
    return False


def _is_constant(expr: ast.expr) -> bool:
    """A value that only names, reads and computes (``tl.constexpr`` calls included)."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Call):
            func = n.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name != "constexpr":
                return False
        elif isinstance(n, ast.Attribute) and n.attr.startswith("__"):
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
        elif isinstance(n, ast.Attribute) and n.attr.startswith("__"):
            return False
        elif not isinstance(n, (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List,
                                ast.Dict, ast.Call, ast.operator, ast.unaryop, ast.expr_context, ast.keyword)):
            return False
    head = expr.func if isinstance(expr, ast.Call) else expr
    name = head.attr if isinstance(head, ast.Attribute) else head.id if isinstance(head, ast.Name) else ""
    return name in TRITON_DECORATORS


def _is_annotation(expr: ast.expr | None) -> bool:
    """An annotation that evaluating only reads: a name, an attribute of one, a string."""
    if expr is None or isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return True
    while isinstance(expr, ast.Attribute) and not expr.attr.startswith("__"):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _is_assigned_to_names(target: ast.expr) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_is_assigned_to_names(t) for t in target.elts)
    return isinstance(target, ast.Name)


def kept_statements(tree: ast.Module) -> ast.Module:
    """The statements of ``tree`` that :func:`source_module` runs (see the
    module docstring), as they are written: :func:`checked` adds the checks."""
    body: list[ast.stmt] = []
    for node in tree.body:
        if _is_import_kept(node):
            body.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.decorator_list = [d for d in node.decorator_list if _is_triton_decorator(d)]
            args = node.args
            args.defaults = [d if _is_constant(d) else ast.Constant(None) for d in args.defaults]
            args.kw_defaults = [d if d is None or _is_constant(d) else ast.Constant(None) for d in args.kw_defaults]
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None and not _is_annotation(a.annotation):
                    a.annotation = None
            if not _is_annotation(node.returns):
                node.returns = None
            body.append(node)
        elif isinstance(node, ast.Assign) and _is_constant(node.value) and all(map(_is_assigned_to_names,
                                                                                  node.targets)):
            body.append(node)
        elif isinstance(node, ast.AnnAssign) and node.value is not None and _is_constant(node.value) \
                and isinstance(node.target, ast.Name):
            node.annotation = ast.Constant(None)  # an annotation is evaluated at the top level: not run
            body.append(node)
    return ast.Module(body=body, type_ignores=[])


ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
              ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
"""The operators of the kept arithmetic, by node type."""

_OPERATORS = {type(op).__name__: fn for op, fn in ((t(), f) for t, f in ARITHMETIC.items())}


class _Checks:
    """What the kept code's calls, bare decorators and arithmetic go through
    (bound as :data:`CHECKED` in the module while it is built)."""

    def __init__(self) -> None:
        self.calls = triton_calls()
        import triton

        self.jit = triton.jit

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if id(fn) not in self.calls:
            raise Refused(f"a call of {getattr(fn, '__qualname__', type(fn).__name__)}")
        return fn(*args, **kwargs)

    def decorator(self, fn: Any) -> Any:
        if fn is not self.jit:
            raise Refused(f"the decorator {getattr(fn, '__qualname__', type(fn).__name__)}")
        return fn

    def binop(self, name: str, a: Any, b: Any) -> Any:
        def small(x: Any) -> bool:
            if isinstance(x, (bool, float)):
                return True
            if isinstance(x, int):
                return x.bit_length() <= MAX_BITS
            return isinstance(x, (str, bytes, tuple)) and len(x) <= MAX_LENGTH

        if not (small(a) and small(b)):
            raise Refused(f"arithmetic on {type(a).__name__} and {type(b).__name__} past the bounds")
        numbers = all(isinstance(x, (bool, int, float)) for x in (a, b))
        if name == "Pow" and numbers and isinstance(b, int) and abs(b) * max(abs(int(a)), 2).bit_length() > MAX_BITS:
            raise Refused(f"{a} ** {b} past {MAX_BITS} bits")
        if name == "LShift" and numbers and isinstance(b, int) and b + abs(int(a)).bit_length() > MAX_BITS:
            raise Refused(f"{a} << {b} past {MAX_BITS} bits")
        if name == "Mult" and not numbers and any(isinstance(x, int) and abs(x) > MAX_LENGTH for x in (a, b)):
            raise Refused(f"a sequence repeated past {MAX_LENGTH} items")
        out = _OPERATORS[name](a, b)
        if not small(out):
            raise Refused(f"a result past {MAX_BITS} bits or {MAX_LENGTH} items")
        return out


class _Checked(ast.NodeTransformer):
    """An expression with every call, bare decorator and arithmetic operation
    going through :class:`_Checks` (function bodies are not visited: they do
    not run here)."""

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        return ast.copy_location(ast.Call(_method("call"), [node.func, *node.args], node.keywords), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        return ast.copy_location(ast.Call(_method("binop"), [ast.Constant(type(node.op).__name__), node.left,
                                                             node.right], []), node)


def _method(name: str) -> ast.expr:
    return ast.Attribute(ast.Name(CHECKED, ast.Load()), name, ast.Load())


def _checked(expr: ast.expr) -> ast.expr:
    return _Checked().visit(expr)


def checked(node: ast.stmt) -> ast.stmt:
    """A kept statement with its evaluated parts checked (:class:`_Checked`):
    an assignment's value; a definition's decorators (a bare one must be
    ``triton.jit``), defaults and annotations."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        node.value = _checked(node.value)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node.decorator_list = [_checked(d) if isinstance(d, ast.Call) else
                               ast.copy_location(ast.Call(_method("decorator"), [d], []), d)
                               for d in node.decorator_list]
        node.args.defaults = [_checked(d) for d in node.args.defaults]
        node.args.kw_defaults = [d if d is None else _checked(d) for d in node.args.kw_defaults]
    return ast.fix_missing_locations(node)


def _evaluated(expr: ast.expr, namespace: dict, path: str) -> ast.Name | None:
    """A checked expression evaluated ahead here, its value bound to a fresh
    name in ``namespace`` (that name returned); None when a check refuses it."""
    try:
        value = eval(compile(ast.Expression(expr), path, "eval"), namespace)  # noqa: S307 - checked (see above)
    except Refused:
        return None
    name = f"__replayssm_value_{next(_COUNTER)}__"
    namespace[name] = value
    return ast.copy_location(ast.Name(name, ast.Load()), expr)


def _without_refused(node: ast.stmt, namespace: dict, path: str) -> ast.stmt:
    """A definition less what its checks refuse, its decorators and defaults
    evaluated ahead here: a refused decorator left off, a refused default
    None; any other statement as it is (its checks run with it)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node
    decorators = [_evaluated(d, namespace, path) for d in node.decorator_list]
    node.decorator_list = [d for d in decorators if d is not None]
    none = ast.Constant(None)
    node.args.defaults = [_evaluated(d, namespace, path) or none for d in node.args.defaults]
    node.args.kw_defaults = [d if d is None else _evaluated(d, namespace, path) or none
                             for d in node.args.kw_defaults]
    return ast.fix_missing_locations(node)


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
    namespace = module.__dict__
    namespace[CHECKED] = _Checks()
    try:
        with vllm_stub.injected():
            for statement in kept_statements(tree).body:
                node = _without_refused(checked(statement), namespace, str(path))
                try:
                    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)  # noqa: S102 - checked
                except Refused:
                    continue  # the statement is left out
    except Exception as e:  # noqa: BLE001 - an import the stub lacks, a constant naming a left-out value
        del sys.modules[name]
        raise ValueError(f"{label} file {str(path)!r}: its kernels' definitions cannot be read alone: "
                         f"{type(e).__name__}: {e}") from None
    finally:
        namespace.pop(CHECKED, None)
    return module


def module_file(name: str, label: str = "--impl") -> Path:
    """The source file of the module or file ``name``, found without importing it
    (a ``.txt`` documentation page is rebuilt as a module first)."""
    import tempfile

    from replayssm.base.module_files import module_spec

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
        spec = module_spec(name)  # none of its packages imported: their __init__ would run here
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
