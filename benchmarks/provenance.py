"""What every benchmark shares: the header of its report (date, machine, commit, versions, command), its option
checks, its JSON report."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The commit of the tree this benchmark belongs to, with ``+changes``
    when the tree differs from it (``unknown`` outside a git checkout)."""
    git = ["git", "-C", str(REPO)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except OSError:  # no git on this machine
        return "unknown"
    return (head or "unknown") + ("+changes" if dirty.stdout.strip() else "")


def header(**versions: object) -> dict:
    """The fields every report starts with: the UTC date, the machine and the
    CPUs this process may use, the commit, Python's version, then ``versions``
    (the other libraries' versions and settings), then the command line."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.node(),
            "cpus": cpus, "commit": commit(), "python": platform.python_version(), **versions,
            "command": " ".join(sys.argv)}


def bad_options(counts: dict[str, int], out: str | None, out_flag: str = "--out") -> str | None:
    """The error for a count below 1 (``counts`` maps each flag to its value)
    or an output file (``out``, given as ``out_flag``) whose folder does not
    exist, else ``None``."""
    for flag, value in counts.items():
        if value < 1:
            return f"error: {flag} must be >= 1, got {value}"
    if out and not Path(out).resolve().parent.is_dir():
        return f"error: {out_flag}'s folder {Path(out).resolve().parent} does not exist"
    return None


def write(report: dict, out: str) -> None:
    """Write ``report`` to ``out`` as indented JSON."""
    Path(out).write_text(json.dumps(report, indent=2) + "\n")


def emit(report: dict, out: str | None) -> None:
    """Print ``report`` as JSON, and write it to ``out`` when given."""
    print(json.dumps(report, indent=2))
    if out:
        write(report, out)


def parse_trees(specs: list[str]) -> dict[str, str] | str:
    """``LABEL=PYTHON`` pairs as a dict, or the error naming the bad one."""
    trees: dict[str, str] = {}
    for spec in specs:
        label, sep, python = spec.partition("=")
        if not sep or not label or not python:
            return f"error: --tree {spec!r}: give LABEL=PYTHON (e.g. before=/tmp/before/.venv/bin/python)"
        if label in trees:
            return f"error: --tree label {label!r} is given twice"
        if not os.access(python, os.X_OK):
            return f"error: --tree {spec!r}: {python} is not an executable interpreter"
        trees[label] = python
    if len(trees) < 2:
        return "error: give --tree at least twice (LABEL=PYTHON each: the trees to compare)"
    return trees
