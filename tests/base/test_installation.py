"""The tool's own files, checked before a verdict (``base/installation.py``,
issue 39): outside the sandbox a target that rewrites what every later
Python start runs (pip's editable finder, imported by a ``.pth``) or plants
bytecode the judge would load is the target's finding (exit 1,
``installation_changed``), while a clean run, whose own first imports would
write ``.pyc`` files, changes nothing the check counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replayssm.base import installation

REPO = Path(__file__).resolve().parents[2]
UNIMPORTED = REPO / "review" / "pr_check.py"
"""A module of the tool that ``fuzz`` never imports: its bytecode is written only by an import or a plant."""

PLANT = '''
import os, sys
sys.path.insert(0, {targets!r})
from _ours import export  # our kernels: a campaign of this target passes unless its writes count

export(globals())
{plant}
'''
APPEND_TO_THE_FINDER = "open({finder!r}, 'a').write('\\n# MAPPING redirected here by the target\\n')"
PLANT_BYTECODE = ("import py_compile, tempfile; _s = tempfile.mktemp(suffix='.py'); "
                  "open(_s, 'w').write('print(\\'the code under review ran here\\')\\n'); "
                  "py_compile.compile(_s, {pyc!r}, doraise=True, "
                  "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)")
"""A target's bytecode for a module of the tool: another source's code, in a ``.pyc`` whose header tells the
import not to check the source (what the next import of the module runs)."""


WRITES_BYTECODE = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _target(tmp_path: Path, plant: str) -> Path:
    target = tmp_path / "plants.py"
    target.write_text(PLANT.format(targets=str(REPO / "tests" / "targets"), plant=plant))
    return target


def _fuzz(tmp_path: Path, python: str, target: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """``fuzz --impl target`` (2 examples) outside the sandbox, under
    ``python``, where Python writes the bytecode of what it imports (no
    ``$PYTHONDONTWRITEBYTECODE``): a first import's ``.pyc`` would be counted."""
    out = tmp_path / "out.json"
    proc = subprocess.run([python, "-m", "replayssm.cli", "fuzz", "--impl", str(target), "--jobs", "1", "--examples",
                           "2", "--failures", str(tmp_path / "f"), "--json", str(out), "--junit",
                           str(tmp_path / "out.xml")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=WRITES_BYTECODE | {"REPLAYSSM_SANDBOX": "off"})
    return proc, json.loads(out.read_text())


def _a_finding_naming(proc: subprocess.CompletedProcess, summary: dict, path: Path) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert summary["status"] == "finding" and not summary["findings"], summary
    assert summary["installation_changed"] == [str(path)]  # nothing else: the judge's own imports are no change
    assert "may have written them" in proc.stderr and "the target wrote them" not in proc.stderr, proc.stderr


def test_the_lines_of_a_pth_file_name_the_modules_it_imports() -> None:
    text = ("/some/folder\n# import not_a_line_site_runs\n"
            "import __editable___x_finder; __editable___x_finder.install()\n"
            "import os; var = 'X'; enabled = True; enabled and __import__('_distutils_hack').add_shim(); \n"
            "import importlib; importlib.import_module('a.b')\nimport c.d as e, f\nimport (broken\n"
            "import sys; from g.h import i\n")
    assert installation.pth_imports(text) == ["__editable___x_finder", "os", "_distutils_hack", "importlib", "a",
                                              "c", "f", "sys", "g"]


def _editable_files() -> tuple[Path, Path]:
    """The ``.pth`` file and the finder module of this tool's editable installation."""
    finders = [m.__file__ for n, m in list(sys.modules.items())
               if n.startswith("__editable___replayssm_verify") and getattr(m, "__file__", None)]
    if not finders:
        pytest.skip("the tool is not installed in editable mode here: no editable finder to rewrite")
    finder = Path(finders[0])
    pth = [p for p in finder.parent.glob("__editable__.replayssm_verify*.pth") if finder.stem in p.read_text()]
    assert pth, finder
    return pth[0], finder


def test_a_target_that_rewrites_the_editable_finder_is_a_finding(tmp_path: Path) -> None:
    """The finder a ``.pth`` imports at every Python start says where every
    later run imports the tool from; a target appends to it (in a venv of
    its own, here: the tool's editable ``.pth`` and finder copied into it).
    The campaign that would pass (exit 3) is exit 1 naming the finder (before,
    only the ``.pth`` itself was watched: exit 3)."""
    pth, finder = _editable_files()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    (site_packages,) = venv.glob("lib/python*/site-packages")
    shutil.copy(pth, site_packages)
    ours = Path(shutil.copy(finder, site_packages))
    python = str(venv / "bin" / "python")
    where = subprocess.run([python, "-c", "import sys, replayssm.base.installation as i; "
                            "print(i.__file__); print(any(m.__file__ == sys.argv[1] for m in list(sys.modules.values()) "
                            "if getattr(m, '__file__', None)))", str(ours)], capture_output=True, text=True, check=True)
    assert where.stdout.split() == [str(REPO / "base" / "installation.py"), "True"], where
    proc, summary = _fuzz(tmp_path, python, _target(tmp_path, APPEND_TO_THE_FINDER.format(finder=str(ours))))
    _a_finding_naming(proc, summary, ours)
    assert "MAPPING redirected" in ours.read_text()


@pytest.fixture
def unimported_bytecode():
    """The bytecode path of :data:`UNIMPORTED`, absent when the test starts
    (as where nothing imported it yet), rewritten by an honest compile after."""
    import py_compile
    from importlib.util import cache_from_source

    pyc = Path(cache_from_source(str(UNIMPORTED)))
    pyc.unlink(missing_ok=True)
    try:
        yield pyc
    finally:
        pyc.unlink(missing_ok=True)
        py_compile.compile(str(UNIMPORTED), str(pyc), doraise=True)


def test_a_target_that_plants_bytecode_in_the_tools_package_is_a_finding(tmp_path: Path, unimported_bytecode) -> None:
    """A ``.pyc`` with a valid header for a module of the tool that nothing
    imported yet is what the next import of it runs; a target writes one
    (another source's code, unchecked against the module's). Exit 1 naming it
    (before, a new ``.pyc`` in a ``__pycache__`` was not counted: exit 3)."""
    plant = PLANT_BYTECODE.format(pyc=str(unimported_bytecode))
    proc, summary = _fuzz(tmp_path, sys.executable, _target(tmp_path, plant))
    _a_finding_naming(proc, summary, unimported_bytecode)


def test_a_first_import_during_the_run_is_no_change_and_a_new_pyc_still_is(unimported_bytecode, monkeypatch) -> None:
    """No false alarm: after :func:`installation.remember` a fresh
    interpreter (as the judge's hosts are) imports a module of the tool for
    the first time: no ``.pyc`` is written, nothing counted. Teeth: without
    the compile at remember that same import writes one, which counts; so
    does a planted sourceless ``.pyc`` beside the sources."""
    monkeypatch.setenv("REPLAYSSM_SANDBOX", "off")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(installation, "_REMEMBERED", installation._REMEMBERED)  # as it was, after
    first_import = [sys.executable, "-c", "import replayssm.review.pr_check"]
    installation.remember("cpu")
    assert unimported_bytecode.exists()  # compiled at remember
    subprocess.run(first_import, check=True)
    assert installation.changed() == []
    unimported_bytecode.unlink()
    monkeypatch.setattr(installation, "compile_bytecode", lambda: None)
    installation.remember("cpu")
    subprocess.run(first_import, check=True)
    assert installation.changed() == [str(unimported_bytecode)]
    sourceless = REPO / "review" / "planted_by_a_target.pyc"
    try:
        shutil.copy(unimported_bytecode, sourceless)
        assert str(sourceless) in installation.changed()
    finally:
        sourceless.unlink(missing_ok=True)


def test_bytecode_compiled_again_with_the_same_bytes_is_no_change(monkeypatch) -> None:
    """Two runs of the tool starting at once both bring the bytecode up to date: a ``.pyc`` the other
    run rewrites with the same bytes (a new file, a new change time) is no change. Teeth: other bytes
    in its place are."""
    monkeypatch.setenv("REPLAYSSM_SANDBOX", "off")
    monkeypatch.setattr(installation, "_REMEMBERED", installation._REMEMBERED)  # as it was, after
    installation.remember("cpu")
    pyc = next(Path(p) for p in installation._BYTECODE if p.endswith(".pyc"))
    honest = pyc.read_bytes()
    try:
        replaced = pyc.with_suffix(".tmp")
        replaced.write_bytes(honest)
        os.replace(replaced, pyc)  # as a compile writes it: a new file in its place
        assert installation.changed() == []
        pyc.write_bytes(honest[:-1] + bytes([honest[-1] ^ 1]))
        assert installation.changed() == [str(pyc)]
    finally:
        pyc.write_bytes(honest)
