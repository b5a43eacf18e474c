"""Count ``Any`` in the annotations of the project's modules.

    python3 scripts/count_any.py            # the total
    python3 scripts/count_any.py review/    # the total, then the count under each prefix given
    python3 scripts/count_any.py --vocab    # the same for the vocabulary's Value and Cond (Any to mypy)

An ``Any`` counts where it is part of an annotation: a parameter's, a return's
or an annotated assignment's (``x: Any``, ``dict[str, Any]``, ``typing.Any``);
the tests are left out. ``docs/architecture.md`` records the count before and
after each change that types a layer. ``--vocab`` counts the spec vocabulary's
``Value`` and ``Cond`` instead: aliases of ``Any`` for a value that any
interpreter may see, so a change that names a value so is seen.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "base", "verify", "fuzz", "review", "replayssm", "impl", "scripts", "benchmarks")


ANY = ("Any",)
VOCAB = ("Value", "Cond")


def _any(annotation: ast.expr | None, names: tuple[str, ...] = ANY) -> int:
    if annotation is None:
        return 0
    return sum((isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
               for n in ast.walk(annotation))


def count(path: Path, names: tuple[str, ...] = ANY) -> int:
    """The ``Any`` (or other ``names``) in one module's annotations."""
    n = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            n += sum(_any(arg.annotation, names) for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                     if arg is not None)
            n += _any(node.returns, names)
        elif isinstance(node, ast.AnnAssign):
            n += _any(node.annotation, names)
    return n


def counts(root: Path = ROOT, names: tuple[str, ...] = ANY) -> dict[str, int]:
    """Each module's count, by its path from ``root``."""
    return {str(p.relative_to(root)): count(p, names) for package in PACKAGES
            for p in sorted((root / package).rglob("*.py"))}


if __name__ == "__main__":
    args = sys.argv[1:]
    per_module = counts(names=VOCAB if "--vocab" in args else ANY)
    print(sum(per_module.values()))
    for prefix in (a for a in args if a != "--vocab"):
        print(prefix, sum(n for path, n in per_module.items() if path.startswith(prefix)))
