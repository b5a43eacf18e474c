"""Where a benchmark's figures come from: the commit of the tree it ran on."""

from __future__ import annotations

import subprocess
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
