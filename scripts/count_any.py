"""Count ``Any`` in the annotations of the project's modules.

    python3 scripts/count_any.py            # the total
    python3 scripts/count_any.py review/    # the total, then the count under each prefix given

An ``Any`` counts where it is part of an annotation: a parameter's, a return's
or an annotated assignment's (``x: Any``, ``dict[str, Any]``, ``typing.Any``);
the tests are left out. ``docs/architecture.md`` records the count before and
after each change that types a layer.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "base", "verify", "fuzz", "review", "replayssm", "impl", "scripts", "benchmarks")


def _any(annotation: ast.expr | None) -> int:
    if annotation is None:
        return 0
    return sum((isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
               for n in ast.walk(annotation))


def count(path: Path) -> int:
    """The ``Any`` in one module's annotations."""
    n = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            n += sum(_any(arg.annotation) for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                     if arg is not None)
            n += _any(node.returns)
        elif isinstance(node, ast.AnnAssign):
            n += _any(node.annotation)
    return n


def counts(root: Path = ROOT) -> dict[str, int]:
    """Each module's count, by its path from ``root``."""
    return {str(p.relative_to(root)): count(p) for package in PACKAGES for p in sorted((root / package).rglob("*.py"))}


if __name__ == "__main__":
    per_module = counts()
    print(sum(per_module.values()))
    for prefix in sys.argv[1:]:
        print(prefix, sum(n for path, n in per_module.items() if path.startswith(prefix)))
