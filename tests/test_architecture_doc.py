"""``docs/architecture.md`` names every module: its module index is what
``scripts/module_index.py`` writes for the tree as it is."""

from __future__ import annotations

from pathlib import Path

from script_modules import load

ROOT = Path(__file__).resolve().parents[1]


def test_the_module_index_is_current() -> None:
    script = load("module_index")
    text = script.DOC.read_text()
    assert script.rewritten(text) == text, "docs/architecture.md's module index is stale: python3 scripts/module_index.py"


def test_a_module_without_its_line_is_caught(tmp_path: Path, monkeypatch) -> None:
    """Teeth: a new module in a copy of a package makes the committed index stale."""
    script = load("module_index")
    root = tmp_path / "repo"
    for package in script.PACKAGES:
        (root / package).mkdir(parents=True)
        for path in (ROOT / package).rglob("*.py"):
            target = root / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    monkeypatch.setattr(script, "ROOT", root)
    text = script.DOC.read_text()
    assert script.rewritten(text) == text
    (root / "fuzz" / "new_module.py").write_text('"""Something new."""\n')
    assert "`fuzz/new_module.py`: Something new." in script.rewritten(text)
    assert script.rewritten(text) != text
