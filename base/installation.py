"""The tool's own files, checked before a verdict: a run that changed them is the target's finding.

In the sandbox (:mod:`.sandbox`) a target cannot write the tool's
installation: the file system is read-only there. Without it (no ``bwrap``,
or ``$REPLAYSSM_SANDBOX=off``) a target runs as this user and could append
to ``fuzz/launcher.py`` or drop a ``.pth`` file into ``site-packages``,
changing every later run. So each command whose targets run outside the
sandbox remembers its installation before any target runs
(:func:`remember`, from :func:`replayssm.cli.main`), and
before its reports are written and its exit status given
(:mod:`.reports`) looks again (:func:`changed`): a changed file makes the
run a finding (exit 1), said in its JSON (``installation_changed``), its
JUnit file and on standard error.

What is watched: every file of the tool's packages, their bytecode
(``.pyc``) included; the ``.pth``, ``sitecustomize`` and ``usercustomize``
files of the interpreter's ``site-packages`` folders, which every Python
start runs; and every module a watched ``.pth`` imports (its ``import``
lines, ``__import__("x")`` and ``importlib.import_module("x")`` in them):
pip's editable finder ``__editable___replayssm_verify_*_finder.py``, which
says where every later run imports the tool from, is one; a module's
bytecode in its ``__pycache__`` too. A file is known by its inode, size and
change time (``st_ctime``, which a process without root cannot set back),
so a look costs a ``stat`` per file.

Bytecode: a planted ``.pyc`` with a valid header is what a later import in
the same run (or any later run) executes, so a new ``.pyc`` counts as a
change like a rewritten one. Python itself writes the ``.pyc`` of a module
imported for the first time; so that the judge's own imports during the run
(and its hosts', plain interpreters at optimisation level 0) write none,
:func:`remember` first brings the bytecode of every watched source up to
date (:mod:`compileall`, timestamp-checked as imports check it; where the
folder cannot be written, Python cannot write there either; also under
``$PYTHONDONTWRITEBYTECODE``, which a process of the run need not inherit).
"""

from __future__ import annotations

import ast
import compileall
import hashlib
import importlib.machinery
import importlib.util
import os
import py_compile
import site
import sys
from pathlib import Path

from . import sandbox

PACKAGES = ("replayssm", "replayssm.spec", "replayssm.base", "replayssm.verify", "replayssm.fuzz",
            "replayssm.review", "replayssm.impl")
"""The tool's packages (``pyproject.toml`` maps each top-level folder to one)."""

STARTUP = (".pth",)
STARTUP_NAMES = ("sitecustomize.py", "usercustomize.py")
"""What a Python start runs from a ``site-packages`` folder."""

CHANGED = ("the tool's installed files changed during this run (the code under review ran outside the sandbox "
           "and may have written them; so may a person or another process)")
"""What a change is known to be, for every report that says it."""

Snapshot = dict[str, tuple[int, int, int]]
"""A watched file's path -> (inode, size, change time in ns)."""

_REMEMBERED: Snapshot | None = None
_SAID: set[tuple[str, ...]] = set()


def _folders() -> list[Path]:
    found: list[Path] = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            found += [Path(p) for p in spec.submodule_search_locations or []]
    return found


def _site_folders() -> list[Path]:
    folders = [*site.getsitepackages(), site.getusersitepackages()] if hasattr(site, "getsitepackages") else []
    return [Path(f) for f in folders if f and Path(f).is_dir()]


def _startup_files() -> list[Path]:
    """The ``.pth``, ``sitecustomize`` and ``usercustomize`` files of the ``site-packages`` folders."""
    found: list[Path] = []
    for folder in _site_folders():
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found += [folder / n for n in names if n.endswith(STARTUP) or n in STARTUP_NAMES]
    return found


_IMPORTERS = ("__import__", "import_module")
"""Calls whose first argument, a string, names a module a ``.pth`` line imports."""


def pth_imports(text: str) -> list[str]:
    """The top-level modules the lines of a ``.pth`` file's text import:
    ``site`` executes each line that starts with ``import`` (the others are
    folders); the names of its ``import``/``from`` statements and of its
    ``__import__("x")`` or ``importlib.import_module("x")`` calls. A line
    Python cannot parse imports nothing (``site`` skips it with an error)."""
    names: list[str] = []
    for line in text.splitlines():
        if not line.startswith(("import ", "import\t")):
            continue
        try:
            tree = ast.parse(line)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) \
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) in _IMPORTERS:
                names.append(node.args[0].value)
    return list(dict.fromkeys(n.split(".")[0] for n in names if n))


def _started_modules(startup: list[Path]) -> tuple[list[Path], list[Path]]:
    """The modules the ``.pth`` files of ``startup`` import, found on
    ``sys.path`` without importing them: (module files, package folders)."""
    files: list[Path] = []
    folders: list[Path] = []
    for pth in startup:
        if pth.suffix != ".pth":
            continue
        try:
            text = pth.read_text(errors="replace")
        except OSError:
            continue
        for name in pth_imports(text):
            try:
                spec = importlib.machinery.PathFinder.find_spec(name, [str(pth.parent), *sys.path])
            except (ImportError, ValueError):
                continue
            if spec is None:
                continue
            if spec.submodule_search_locations:
                folders += [Path(p) for p in spec.submodule_search_locations]
            elif spec.origin and spec.has_location:
                files.append(Path(spec.origin))
    return list(dict.fromkeys(files)), list(dict.fromkeys(folders))


def _bytecode(source: Path) -> list[Path]:
    """Where Python keeps ``source``'s bytecode, at each optimisation level."""
    return [Path(importlib.util.cache_from_source(str(source), optimization=level or "")) for level in _LEVELS]


_LEVELS = sorted({0, sys.flags.optimize})
"""The optimisation levels whose bytecode a run writes: this interpreter's,
and 0, its hosts' (plain ``python -m`` starts)."""


def _watched() -> tuple[list[Path], list[Path], list[Path]]:
    """What is watched: (the startup files, the modules a ``.pth`` imports
    and ``sitecustomize``/``usercustomize``, each with its bytecode,
    the folders watched whole: the tool's packages, the packages a ``.pth``
    imports, and where ``$PYTHONPYCACHEPREFIX`` keeps their bytecode)."""
    startup = _startup_files()
    modules, packages = _started_modules(startup)
    modules = list(dict.fromkeys([*modules, *(p for p in startup if p.suffix == ".py")]))
    folders = [*_folders(), *packages]
    if sys.pycache_prefix:
        folders += [_bytecode(f / "__init__.py")[0].parent for f in list(folders)]
    return startup, modules, list(dict.fromkeys(folders))


def _stat(path: str, into: Snapshot) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    into[path] = (st.st_ino, st.st_size, st.st_ctime_ns)


def snapshot() -> Snapshot:
    """The watched files as they are now."""
    files: Snapshot = {}
    startup, modules, folders = _watched()
    for folder in folders:
        for parent, _, names in os.walk(folder):
            for name in names:
                _stat(os.path.join(parent, name), files)
    for path in startup:  # a .pth, and a .py module's source again below
        _stat(str(path), files)
    for module in modules:
        for path in (module, *(_bytecode(module) if module.suffix == ".py" else ())):
            _stat(str(path), files)
    return files


def compile_bytecode() -> None:
    """Bring the bytecode of every watched source up to date, as an import
    would write it (timestamp-checked, at :data:`_LEVELS`), so that no import
    later in the run writes a ``.pyc``: a new one is then a change. Silent; a
    file that cannot be compiled or written is left as it is."""
    mode = py_compile.PycInvalidationMode.TIMESTAMP
    _, modules, folders = _watched()
    for level in _LEVELS:
        for folder in folders:
            compileall.compile_dir(str(folder), quiet=2, optimize=level, invalidation_mode=mode)
        for module in modules:
            if module.suffix == ".py":
                compileall.compile_file(str(module), quiet=2, optimize=level, invalidation_mode=mode)


def exposed(device: str | None) -> bool:
    """Whether a target of a command on ``device`` could write the tool's
    files: its hosts run outside the sandbox (it is off, or cannot start
    here, or the device is CUDA, whose hosts it does not cover)."""
    return device == "cuda" or sandbox.setting() == "off" or sandbox.unavailable() is not None


def remember(device: str | None = None) -> None:
    """Take the installation as it is before any target runs (each
    command's start), where a target could write it (:func:`exposed`): in
    the sandbox it cannot, and a file a person edits during a run is no
    finding. The bytecode is compiled first (:func:`compile_bytecode`)."""
    global _REMEMBERED
    if exposed(device):
        compile_bytecode()
        _REMEMBERED = snapshot()
        _BYTECODE.clear()
        _BYTECODE.update({p: _digest(p) for p in _REMEMBERED if p.endswith(".pyc")})
    else:
        _REMEMBERED = None
    _SAID.clear()


def changed() -> list[str]:
    """The watched files changed, added or removed since :func:`remember`
    (none when it was not called), by path: a new ``.pyc`` too."""
    if _REMEMBERED is None:
        return []
    now = snapshot()
    return [p for p in sorted(set(now) | set(_REMEMBERED)) if _REMEMBERED.get(p) != now.get(p)
            and not (p in now and p in _BYTECODE and _digest(p) == _BYTECODE[p])]


def _digest(path: str) -> bytes | None:
    """The SHA-256 of a file's bytes (None: it cannot be read). A ``.pyc`` that another run of the tool
    compiled again at the same moment is rewritten with the same bytes: no change."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).digest()
    except OSError:
        return None


_BYTECODE: dict[str, bytes | None] = {}
"""The remembered bytecode files' digests (:func:`remember`)."""


def say(paths: list[str]) -> None:
    """Say once on standard error that the installation changed."""
    if paths and tuple(paths) not in _SAID:
        _SAID.add(tuple(paths))
        shown = ", ".join(repr(p) for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        print(f"error: {CHANGED} ({shown}); this run is a finding, and a later run cannot be trusted until the "
              "tool is installed again", file=sys.stderr)
