"""The packages' layering, read from the source: every import (at the top of a
module or inside a function) goes down the DAG below, and no two packages
import each other, however indirectly.

The layers, bottom to top (``docs/architecture.md`` draws them):

- ``spec`` -- the one spec, and vLLM's launch-API generations as data
  (``spec/generations/``: each one's launches and kernel roles, read by
  verify's kernel proofs, ``prove --kernels`` and ``review``); imports nothing of ours;
- ``impl`` -- our kernels, a target like any other: its importers are tests,
  the fuzz harness (its pointer tables, the torch materialize backend), the
  kernel proofs (its source) and ``base`` (a docs page rebuilt with its table
  names);
- ``base`` -- trace files, loading a target, exit codes and report files,
  interrupts;
- ``verify`` and ``fuzz`` -- two ways of judging a kernel, side by side;
- ``review`` -- real vLLM versions, judged with fuzz's callers and verify's
  kernel proofs;
- ``replayssm`` -- the command line.

The judge never imports the code under review: only ``base/targets.py`` and
``base/target_host.py`` load a target, in the target's own process
(:data:`TARGET_LOADERS`; :func:`target_imports`).

Across the layers, fuzz's callers are used as they are: review and the
lockstep runner pass their decisions in as a policy
(``fuzz/caller_policy.py``), and no module derives from ``Callers`` or
patches its private hooks (:func:`callers_overrides`).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PACKAGES = ("spec", "impl", "base", "verify", "fuzz", "review", "replayssm")
"""The top-level folders, each installed as ``replayssm.<folder>`` (``replayssm/`` as ``replayssm``)."""

MAY_IMPORT = {
    "spec": set(),
    "impl": set(),
    "base": {"spec", "impl"},
    "verify": {"spec", "base", "impl"},
    "fuzz": {"spec", "base", "impl"},
    "review": {"spec", "base", "verify", "fuzz"},
    "replayssm": {"spec", "base", "verify", "fuzz", "review"},
}
"""The layering as data: which packages each package may import."""


@dataclass(frozen=True)
class Import:
    """One import of one of our packages by another."""

    path: str
    line: int
    module: str
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} imports {self.module} ({self.imported})"


def _module_name(root: Path, path: Path) -> tuple[str, str]:
    """The dotted name a file is installed as, and its package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    package = parts[0]
    return ".".join(["replayssm", *([] if package == "replayssm" else [package]), *parts[1:]]), package


def _package_of(module: str) -> str | None:
    """The package of ours a dotted name falls in, None for a third-party one."""
    parts = module.split(".")
    if parts[0] != "replayssm":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "replayssm"


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement loads (``from replayssm import impl`` loads ``replayssm.impl``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[:len(anchor) - (node.level - 1)]
        source = ".".join(anchor + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source == "replayssm":  # the root package holds the others: each name is a package
        return [f"replayssm.{a.name}" for a in node.names]
    return [source]


def imports(root: Path) -> list[Import]:
    """Every import, anywhere in a module, of one of our packages by another, under ``root``."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module, importer = _module_name(root, path)
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for name in _imported(node, module, path.name == "__init__.py"):
                    imported = _package_of(name)
                    if imported is not None and imported != importer:
                        found.append(Import(str(path.relative_to(root)), node.lineno, name, importer, imported))
    return found


NOT_IMPORTED = {"review": ("replayssm.fuzz.containment",)}
"""Modules of a lower package that a package may not import although the
layering allows the package: review reads the caller assumptions (which rows
break one, ``--drop``'s choices, where a caller can break it) from their
records in ``spec/assumptions.py``, not from the fuzzer's containment."""


def forbidden_imports(root: Path) -> list[str]:
    """``path:line: module`` for each import of a module :data:`NOT_IMPORTED`
    names, in any form (``import a.b``, ``from a.b import x``, ``from a import b``,
    relative, inside a function)."""
    out = []
    for package, banned in NOT_IMPORTED.items():
        for path in sorted((root / package).rglob("*.py")):
            module, _ = _module_name(root, path)
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                loaded = _imported(node, module, path.name == "__init__.py")
                if isinstance(node, ast.ImportFrom):
                    loaded += [f"{source}.{a.name}" for source in list(loaded) for a in node.names]
                out += [f"{path.relative_to(root)}:{node.lineno}: {m}" for m in loaded if m in banned]
    return out


def upward(found: list[Import]) -> list[Import]:
    """The imports the layering does not allow."""
    return [i for i in found if i.imported not in MAY_IMPORT[i.importer]]


def cycles(found: list[Import]) -> list[list[str]]:
    """Each cycle of packages importing each other (as the packages around it)."""
    edges: dict[str, set[str]] = {}
    for i in found:
        edges.setdefault(i.importer, set()).add(i.imported)
    out = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == path[0]:
                out.append(path + [nxt])
            elif nxt not in path and nxt > path[0]:  # each cycle once, from its smallest package
                walk(nxt, path + [nxt])

    for start in sorted(edges):
        walk(start, [start])
    return out


def test_every_import_goes_down_the_layers() -> None:
    found = imports(REPO)
    assert len({i.importer for i in found}) >= 5, "the scan found too few imports: is it reading the tree?"
    bad = upward(found)
    assert not bad, "imports against the layering:\n" + "\n".join(map(str, bad))


def test_no_two_packages_import_each_other() -> None:
    assert cycles(imports(REPO)) == []


def test_the_layering_itself_is_a_dag() -> None:
    as_imports = [Import("", 0, b, a, b) for a, allowed in MAY_IMPORT.items() for b in allowed]
    assert cycles(as_imports) == []
    assert set(MAY_IMPORT) == set(PACKAGES)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
    return tmp_path


def test_a_planted_upward_import_is_reported(tmp_path: Path) -> None:
    """Teeth: lazy, relative and ``from replayssm import`` forms are all seen."""
    root = _tree(tmp_path, {
        "spec/__init__.py": "",
        "spec/vocab.py": "def f():\n    from replayssm.fuzz.campaign import run_campaign\n",
        "base/__init__.py": "",
        "base/traces.py": "from replayssm import review\n",
        "verify/__init__.py": "",
        "verify/kernels/__init__.py": "",
        "verify/kernels/x.py": "from ...fuzz import target\nfrom ..traces import explain\n",
        "fuzz/__init__.py": "",
        "fuzz/campaign.py": "import replayssm.spec.vocab\nfrom replayssm.base.traces import load_trace\n",
    })
    bad = {(i.path, i.module) for i in upward(imports(root))}
    assert bad == {("spec/vocab.py", "replayssm.fuzz.campaign"), ("base/traces.py", "replayssm.review"),
                   ("verify/kernels/x.py", "replayssm.fuzz")}, bad


def test_review_takes_no_assumption_data_from_fuzz() -> None:
    assert (REPO / "review" / "probes.py").is_file(), "is the scan reading the tree?"
    assert forbidden_imports(REPO) == []


def test_a_planted_import_of_assumption_data_from_fuzz_is_reported(tmp_path: Path) -> None:
    """Teeth: each form of importing ``fuzz/containment.py`` from review is seen; fuzz's own is not."""
    root = _tree(tmp_path, {
        "review/probes.py": "from replayssm.fuzz.containment import BREAKERS\n",
        "review/lifecycle.py": "def f():\n    from ..fuzz import containment\n",
        "review/x.py": "import replayssm.fuzz.containment as c\nfrom replayssm.fuzz.callers import Callers\n",
        "fuzz/callers.py": "from .containment import check_drop\n",
    })
    assert forbidden_imports(root) == ["review/lifecycle.py:2: replayssm.fuzz.containment",
                                       "review/probes.py:1: replayssm.fuzz.containment",
                                       "review/x.py:1: replayssm.fuzz.containment"]


def test_a_planted_cycle_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "verify/traces.py": "from replayssm.fuzz.trace_checks import check_format\n",
        "fuzz/system_traces.py": "def f():\n    from replayssm.review.target import load_version\n",
        "review/x.py": "import replayssm.verify.traces\n",
    })
    assert cycles(imports(root)) == [["fuzz", "review", "verify", "fuzz"]]


def callers_overrides(root: Path) -> list[str]:
    """Each class under ``root``'s packages that derives from the fuzz callers
    (``fuzz/callers.py`` ``Callers``), and each assignment to one of their
    private attributes: the decisions their users vary are a policy passed in
    (``fuzz/caller_policy.py``), not overridden hooks."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ClassDef) and any(
                        (b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "") == "Callers"
                        for b in node.bases):
                    found.append(f"{where}:{node.lineno}: class {node.name} derives from Callers")
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                    node, (ast.AnnAssign, ast.AugAssign)) else []
                for t in targets:
                    if (isinstance(t, ast.Attribute) and t.attr.startswith("_") and isinstance(t.value, ast.Name)
                            and t.value.id == "Callers"):
                        found.append(f"{where}:{node.lineno}: Callers.{t.attr} assigned")
    return found


def test_no_module_overrides_the_callers_hooks() -> None:
    assert (REPO / "fuzz" / "callers.py").read_text().count("class Callers") == 1, "is the scan reading the tree?"
    assert callers_overrides(REPO) == []


def test_a_planted_callers_subclass_is_reported(tmp_path: Path) -> None:
    """Teeth: a subclass by name or through its module, and a patched hook."""
    root = _tree(tmp_path, {
        "review/lifecycle.py": "from replayssm.fuzz.callers import Callers\nclass ReviewCallers(Callers):\n    pass\n",
        "fuzz/lockstep.py": "from . import callers\nclass LockstepCallers(callers.Callers):\n    pass\n",
        "fuzz/wide.py": "from .callers import Callers\nCallers._plan_row = None\nCallers.policy = None\n",
    })
    assert callers_overrides(root) == ["fuzz/lockstep.py:2: class LockstepCallers derives from Callers",
                                       "fuzz/wide.py:2: Callers._plan_row assigned",
                                       "review/lifecycle.py:2: class ReviewCallers derives from Callers"]


def test_verify_may_not_import_review(tmp_path: Path) -> None:
    """The kernel proofs take a generation's roles from ``spec/generations``,
    not from ``review``: an import of ``review`` from ``verify`` is refused
    (teeth: a planted one, lazy, as ``prove --kernels --impl`` once made, is reported)."""
    assert "review" not in MAY_IMPORT["verify"]
    root = _tree(tmp_path, {
        "verify/kernels/selection.py": "def roles():\n    from replayssm.review.kernel_proofs import target_roles\n",
        "verify/kernels/generation_roles.py": "from replayssm.spec.generations import detect\n",
    })
    assert [(i.path, i.module) for i in upward(imports(root))] == [
        ("verify/kernels/selection.py", "replayssm.review.kernel_proofs")]


TARGET_LOADERS = {
    "base/targets.py": "loads a target (a module, a file with the vLLM stub, a docs page): called by "
                       "base/target_host.py alone, in the target's own process",
    "base/target_host.py": "the target's own process: it imports the target and launches its kernels",
    "verify/kernels/source_module.py": "reads a target's kernels from its source; imports only our own "
                                       "kernels (a replayssm. module), as any module of this package",
    "fuzz/release_numeric_target.py": "is itself a target, named by fuzz/release_numeric.py and imported by "
                                      "base/target_host.py alone: it executes the released vLLM files there "
                                      "(tests/fuzz/test_release_numeric.py: no module imports it)",
}
"""The modules that may load code by name, and why: nowhere else does a
process of ours import, execute or load a module it is given (a target)."""

DYNAMIC_LOADS = frozenset({"import_module", "exec_module", "__import__", "run_path", "run_module",
                           "spec_from_file_location", "load_module", "exec"})
"""The calls that import or run code named at run time."""

LOADING_NAMES = frozenset({"load_target", "load_source", "load_docs_page"})
"""``base/targets.py``'s loaders: imported by the target's own process alone."""


def target_imports(root: Path) -> list[str]:
    """Each place under ``root``'s packages, outside :data:`TARGET_LOADERS`,
    that loads code by name (a call of :data:`DYNAMIC_LOADS`), imports
    ``base/targets.py``'s loaders, or imports ``vllm`` (the code under review)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            where = str(path.relative_to(root))
            if where in TARGET_LOADERS:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                    if name in DYNAMIC_LOADS:
                        found.append(f"{where}:{node.lineno}: calls {name}")
                elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("targets") and any(
                        a.name in LOADING_NAMES for a in node.names):
                    found.append(f"{where}:{node.lineno}: imports a target loader from {node.module}")
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    if any(n == "vllm" or n.startswith("vllm.") for n in names) and not node.level:
                        found.append(f"{where}:{node.lineno}: imports vllm")
    return found


def test_the_judge_never_imports_a_target() -> None:
    assert "importlib.import_module" in (REPO / "base" / "targets.py").read_text(), "is the scan reading the tree?"
    assert target_imports(REPO) == []


def test_a_planted_target_import_is_reported(tmp_path: Path) -> None:
    """Teeth: SARIF locating a module-named target by importing it (as it
    once did), a loader imported by a judge, a spec-file load, and vLLM itself."""
    root = _tree(tmp_path, {
        "base/sarif.py": "import importlib\ndef definition(t):\n    return importlib.import_module(t)\n",
        "base/targets.py": "import importlib\ndef load_target(n):\n    return importlib.import_module(n)\n",
        "review/command.py": "def load(n):\n    from replayssm.base.targets import load_target\n    return load_target(n)\n",
        "fuzz/worker.py": "import importlib.util as u\ns = u.spec_from_file_location('m', 'x.py')\n",
        "verify/kernels/x.py": "from vllm.v1.worker import replayssm_utils\n",
    })
    assert target_imports(root) == [
        "base/sarif.py:3: calls import_module",
        "verify/kernels/x.py:1: imports vllm",
        "fuzz/worker.py:2: calls spec_from_file_location",
        "review/command.py:2: imports a target loader from replayssm.base.targets",
    ]
