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

What is watched: every file of the tool's packages (a ``.pyc`` in a
``__pycache__`` too, unless it is new: the judge's own first imports write
those), and the ``.pth``, ``sitecustomize`` and ``usercustomize`` files of
the interpreter's ``site-packages`` folders, which every Python start runs.
A file is known by its inode, size and change time (``st_ctime``, which a
process without root cannot set back), so a look costs a ``stat`` per file.
"""

from __future__ import annotations

import importlib.util
import os
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


def _stat(path: str, into: Snapshot) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    into[path] = (st.st_ino, st.st_size, st.st_ctime_ns)


def snapshot() -> Snapshot:
    """The watched files as they are now."""
    files: Snapshot = {}
    for folder in _folders():
        for parent, _, names in os.walk(folder):
            for name in names:
                _stat(os.path.join(parent, name), files)
    for folder in _site_folders():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(STARTUP) or name in STARTUP_NAMES:
                _stat(os.path.join(folder, name), files)
    return files


def exposed(device: str | None) -> bool:
    """Whether a target of a command on ``device`` could write the tool's
    files: its hosts run outside the sandbox (it is off, or cannot start
    here, or the device is CUDA, whose hosts it does not cover)."""
    return device == "cuda" or sandbox.setting() == "off" or sandbox.unavailable() is not None


def remember(device: str | None = None) -> None:
    """Take the installation as it is before any target runs (each
    command's start), where a target could write it (:func:`exposed`): in
    the sandbox it cannot, and a file a person edits during a run is no finding."""
    global _REMEMBERED
    _REMEMBERED = snapshot() if exposed(device) else None
    _SAID.clear()


def changed() -> list[str]:
    """The watched files changed, added or removed since :func:`remember`
    (none when it was not called): added, removed or rewritten files, by path;
    a new ``.pyc`` in a ``__pycache__`` is not counted (the judge writes those)."""
    if _REMEMBERED is None:
        return []
    now = snapshot()
    paths = []
    for path in sorted(set(now) | set(_REMEMBERED)):
        before, after = _REMEMBERED.get(path), now.get(path)
        if before == after or before is None and f"{os.sep}__pycache__{os.sep}" in path:
            continue
        paths.append(path)
    return paths


def say(paths: list[str]) -> None:
    """Say once on standard error that the installation changed."""
    if paths and tuple(paths) not in _SAID:
        _SAID.add(tuple(paths))
        shown = ", ".join(repr(p) for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        print(f"error: the tool's installed files changed during this run ({shown}): the target wrote them (it "
              "ran outside the sandbox); this run is a finding, and a later run cannot be trusted until the tool "
              "is installed again", file=sys.stderr)
