"""Every test that reads the vLLM corpus says so (the ``corpus`` marker), and
goes through the one setting (``replayssm.spec.corpus``).

Three checks: no test or benchmark names the corpus's folder itself (only
``spec/corpus.py`` does); every test function that reaches a corpus reader
(directly or through a helper of its module) carries the marker, its module's
``pytestmark`` or a marked parameter; and, at run time, a test without the
marker sees no corpus, in this process and in a child.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.spec import corpus

REPO = Path(__file__).resolve().parents[1]

READERS = {"corpus", "version_path", "unmodified", "impl_reference_kernels", "reference_page", "page_file", "page_copy"}
"""Names through which a test reaches the corpus. (A child process that reads it,
a benchmark say, is caught at run time: it inherits the unmarked setting.)"""

HARD_CODED = ("shared/reference", "/work/shared", "vllm-versions", "vllm-replayssm_utils.txt", "REPLAYSSM_REFERENCE")
"""Spellings of the corpus's location that bypass the setting."""

MARKERS = {"corpus", "needs_corpus"}


def _names(node: ast.AST) -> set[str]:
    """The names and attributes used in ``node``."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.alias):
            out.add(n.asname or n.name.split(".")[-1])
    return out


def _marked(decorators: list[ast.expr]) -> bool:
    return any(_names(d) & MARKERS for d in decorators)


def unmarked_readers(source: str) -> list[str]:
    """The test functions of a test module's ``source`` that reach a corpus
    reader without the ``corpus`` marker (a module ``pytestmark`` with it
    covers them all; so does a marked ``pytest.param``, which marks its case)."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            if _names(node.value) & MARKERS:
                return []
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    reads: dict[str, bool] = {}

    def reaches(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name not in reads:
            used = _names(functions[name])
            reads[name] = bool(used & READERS) or any(
                reaches(f, seen | {name}) for f in used & functions.keys() if f not in seen and f != name)
        return reads[name]

    return [name for name, fn in functions.items()
            if name.startswith("test") and reaches(name) and not _marked(fn.decorator_list)]


def _test_files() -> list[Path]:
    return sorted(p for p in (REPO / "tests").rglob("*.py")
                  if p.name.startswith("test_") and p.resolve() != Path(__file__).resolve())


def test_every_corpus_reader_carries_the_marker() -> None:
    missing = {str(p.relative_to(REPO)): bad for p in _test_files() if (bad := unmarked_readers(p.read_text()))}
    assert not missing, f"tests reading the corpus without @pytest.mark.corpus: {missing}"


def hard_coded(source: str) -> list[str]:
    """The string literals of ``source`` (docstrings aside) that spell the
    corpus's location instead of asking ``replayssm.spec.corpus``."""
    tree = ast.parse(source)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings and any(s in n.value for s in HARD_CODED)] + re.findall(
        r"""["']shared["']\s*/\s*["']reference["']""", source)


def test_no_test_or_benchmark_names_the_corpus_folder_itself() -> None:
    files = [p for d in ("tests", "benchmarks") for p in (REPO / d).rglob("*.py")
             if p.resolve() != Path(__file__).resolve()]
    named = {str(p.relative_to(REPO)): bad for p in files if (bad := hard_coded(p.read_text()))}
    assert not named, f"these bypass REPLAYSSM_CORPUS (use replayssm.spec.corpus): {named}"
    assert hard_coded('"""In ../shared/reference."""\nPAGE = ROOT / "shared" / "reference"\n') == ['"shared" / "reference"']


def test_the_check_catches_an_unmarked_reader() -> None:
    """Teeth: a helper that reads a version, called by an unmarked test, is found;
    the marker, or a module-wide ``pytestmark``, clears it."""
    helper = "def _load():\n    return version_path('A1').read_text()\n\n"
    unmarked = helper + "def test_a():\n    assert _load()\n"
    assert unmarked_readers(unmarked) == ["test_a"]
    assert unmarked_readers(helper + "@needs_corpus\ndef test_a():\n    assert _load()\n") == []
    assert unmarked_readers("import pytest\npytestmark = pytest.mark.corpus\n" + unmarked) == []


def test_an_unmarked_test_sees_no_corpus_here_or_in_a_child() -> None:
    assert not corpus.present()
    assert "lacks the corpus marker" in str(corpus.root())
    child = subprocess.run([sys.executable, "-c", "from replayssm.spec import corpus; print(corpus.present())"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "False"


@pytest.mark.corpus
def test_a_marked_test_sees_the_corpus() -> None:
    assert corpus.present(), corpus.missing()
    assert (corpus.versions() / "A1.py").is_file()


def test_ci_without_the_corpus_stops_before_any_test(tmp_path: Path) -> None:
    """With CI=true and the corpus absent, pytest ends with a usage error naming the setting."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTEST_ADDOPTS"}
    env.update(CI="true", REPLAYSSM_CORPUS=str(tmp_path / "absent"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                           str(REPO / "tests" / "test_corpus_marker.py")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "CI=true but the vLLM corpus is not at" in done.stderr and "REPLAYSSM_CORPUS" in done.stderr
