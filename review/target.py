"""What ``review`` adds to loading a target (:mod:`replayssm.base.targets`): a file at a git ref,
the error for review's own bad input, and the version's launch-API generation."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from replayssm.base.targets import TargetError
from replayssm.spec import generations


class ReviewInputError(TargetError):
    """The version's options or its launch API cannot be reviewed (exit 2, as a target that cannot be loaded)."""


def detect(module: Any, name: str | None = None) -> generations.Api:
    """The launch-API generation of ``module`` (``--api`` ``name`` when given,
    :func:`replayssm.spec.generations.detect`); one that does not match is a
    :class:`ReviewInputError`."""
    try:
        return generations.detect(module, name)
    except generations.GenerationError as e:
        raise ReviewInputError(str(e)) from None


def file_at_ref(repo: str | Path, ref: str, path: str, label: str, folder: str | Path) -> Path:
    """``path`` as it is at git ``ref`` of the checkout ``repo``, written to
    ``folder/at-REF/NAME`` (the review's traces folder: the file the replay
    commands name travels with the traces). A ``ref`` that starts with ``-``
    is refused: git would read it as an option (``--output=FILE`` writes a file)."""
    if not ref or ref.startswith("-"):
        raise ReviewInputError(f"{label} {ref!r} is not a git revision (it must not start with '-')")
    proc = subprocess.run(["git", "-C", str(repo), "show", "--end-of-options", f"{ref}:{path}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ReviewInputError(f"{label} {ref!r}: cannot read {path!r} from {str(repo)!r}: {proc.stderr.strip()}")
    out = Path(folder) / f"at-{re.sub(r'[^A-Za-z0-9_.-]', '_', ref)}" / Path(path).name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(proc.stdout)
    return out
