"""Where the vLLM evidence lives: the one setting every reader of the corpus goes through.

The corpus (vLLM's reference page ``vllm-replayssm_utils.txt``, the versions
``vllm-versions/`` with their README and tests, the host code ``vllm-host/``)
is test data kept outside the repository. Its folder is ``$REPLAYSSM_CORPUS``
when that is set, else ``../shared/reference`` beside the repository (for a
git worktree, beside its main checkout). The setting is read at each call, so
a test or a child process sees the value in force when it asks.
"""

from __future__ import annotations

import os
from pathlib import Path

SETTING = "REPLAYSSM_CORPUS"
"""The environment variable naming the corpus folder."""

_REPO = Path(__file__).resolve().parents[1]


def _main_checkout(repo: Path) -> Path:
    """``repo`` itself, or, when it is a git worktree (its ``.git`` a file
    ``gitdir: MAIN/.git/worktrees/NAME``), the main checkout MAIN."""
    marker = repo / ".git"
    if not marker.is_file():
        return repo
    gitdir = Path(marker.read_text().removeprefix("gitdir:").strip())
    return gitdir.parents[2] if gitdir.parent.name == "worktrees" else repo


def root() -> Path:
    """The corpus folder ``$REPLAYSSM_CORPUS`` names, or the default beside the repository."""
    named = os.environ.get(SETTING)
    return Path(named) if named else _main_checkout(_REPO).parent / "shared" / "reference"


def present() -> bool:
    """Whether the corpus is here: its folder holds the versions and the reference page."""
    return versions().is_dir() and reference_page().is_file()


def versions() -> Path:
    """The folder of real vLLM versions (``A1.py`` ... ``D3.py``, ``README.md``, ``T*_test.py``)."""
    return root() / "vllm-versions"


def reference_page() -> Path:
    """vLLM's documentation page for ``vllm.v1.worker.replayssm_utils``."""
    return root() / "vllm-replayssm_utils.txt"


def host() -> Path:
    """The vLLM host code around the kernels."""
    return root() / "vllm-host"


def missing() -> str:
    """Why the corpus counts as absent, naming the setting (for skip reasons and errors)."""
    return f"the vLLM corpus is not at {root()} (set {SETTING} to its folder)"
