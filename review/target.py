"""What ``review`` adds to loading a target (:mod:`replayssm.base.targets`): a file at a git ref,
and the error for review's own bad input."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from replayssm.base.targets import TargetError


class ReviewInputError(TargetError):
    """The version's options or its launch API cannot be reviewed (exit 2, as a target that cannot be loaded)."""


def file_at_ref(repo: str | Path, ref: str, path: str, label: str) -> Path:
    """``path`` as it is at git ``ref`` of the checkout ``repo``, written to a temporary file."""
    proc = subprocess.run(["git", "-C", str(repo), "show", f"{ref}:{path}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ReviewInputError(f"{label} {ref!r}: cannot read {path!r} from {str(repo)!r}: {proc.stderr.strip()}")
    out = Path(tempfile.mkdtemp(prefix="replayssm-review-")) / Path(path).name
    out.write_text(proc.stdout)
    return out
