"""One name per concept: no class name is defined in two modules of the
packages, but vLLM's own names that the stand-ins mirror
(``scripts/class_names.py``: :data:`ALLOWED`, each with why)."""

from __future__ import annotations

from pathlib import Path

from script_modules import load


def test_no_class_name_is_defined_in_two_modules() -> None:
    names = load("class_names")
    assert names.shared() == {}, "class names defined in more than one module (python3 scripts/class_names.py)"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    names = load("class_names")
    for package in names.PACKAGES:
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def test_a_planted_duplicate_class_name_is_reported(tmp_path: Path) -> None:
    """Teeth: the same class name in two packages (and in two modules of one package) is caught."""
    names = load("class_names")
    root = _tree(tmp_path, {
        "verify/report.py": "class Finding:\n    pass\n",
        "fuzz/report.py": "from dataclasses import dataclass\n\n@dataclass\nclass Finding:\n    kind: str\n",
        "review/a.py": "class Probe:\n    pass\n",
        "review/sub/b.py": "class Probe(Exception):\n    pass\n",
        "spec/once.py": "class Unique:\n    class Finding:\n        pass\n",
    })
    assert names.shared(root) == {"Finding": ["verify/report.py", "fuzz/report.py"],
                                  "Probe": ["review/a.py", "review/sub/b.py"]}


def test_an_allowed_name_is_allowed_only_in_its_modules(tmp_path: Path) -> None:
    """vLLM's ``MambaSpec`` in the stub and in impl passes; a third definition elsewhere is reported."""
    names = load("class_names")
    files = {"base/vllm_stub/__init__.py": "class MambaSpec:\n    pass\n",
             "impl/layers.py": "class MambaSpec:\n    pass\n"}
    assert names.shared(_tree(tmp_path / "ok", files)) == {}
    root = _tree(tmp_path / "bad", {**files, "review/spec_of.py": "class MambaSpec:\n    pass\n"})
    assert names.shared(root) == {"MambaSpec": ["base/vllm_stub/__init__.py", "review/spec_of.py", "impl/layers.py"]}
