"""Modules of one concern: every module of the packages is at most 600 lines (the guide's rule, issue 42 item 5)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "impl", "verify", "fuzz", "review", "base", "replayssm")
MOST_LINES = 600


def too_long(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, int]:
    """Each module of ``packages`` under ``root`` longer than :data:`MOST_LINES`, with its line count."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > MOST_LINES:
                out[str(path.relative_to(root))] = lines
    return out


def test_every_module_is_at_most_600_lines() -> None:
    assert (ROOT / "review" / "command.py").is_file(), "is the scan reading the tree?"
    assert too_long(ROOT) == {}


def test_teeth_a_module_of_601_lines_is_reported(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "long.py").write_text("x = 1\n" * 601)
    (tmp_path / "spec" / "short.py").write_text("x = 1\n" * 600)
    assert too_long(tmp_path, ("spec",)) == {"spec/long.py": 601}
