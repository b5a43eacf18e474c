"""Write the index of every module into docs/architecture.md.

    python3 scripts/module_index.py   # rewrites the block between the module-index markers

One line per module of the seven packages: its path and the first sentence of
its docstring (what it holds, in its own words). The output is a function of
the tree, so ``tests/test_architecture_doc.py`` regenerates it and compares it
with the committed file: a module added without its line, or a docstring
changed since, fails that test until this script is run again.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("spec", "base", "verify", "fuzz", "review", "replayssm", "impl")
"""In the order the document reads them: bottom up, the target last."""
BEGIN, END = "<!-- module-index:begin (scripts/module_index.py) -->", "<!-- module-index:end -->"


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first or "(the package)"


def index() -> list[str]:
    """The index's lines: a heading per package, a bullet per module."""
    lines: list[str] = []
    for package in PACKAGES:
        lines += ["", f"**`{package}/`**", ""]
        for path in sorted((ROOT / package).rglob("*.py")):
            lines.append(f"- `{path.relative_to(ROOT)}`: {summary(path)}")
    return lines[1:]


def rewritten(text: str) -> str:
    """``text`` with the block between the markers replaced by the current index."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} lacks the markers {BEGIN} ... {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + "\n".join(index()) + "\n" + END + tail


def main() -> int:
    DOC.write_text(rewritten(DOC.read_text()))
    print(DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
