"""Run mypy on the packages and compare its errors with the baseline of allowed ones.

    python3 scripts/mypy_baseline.py           # the errors per module, against tests/mypy_baseline.txt
    python3 scripts/mypy_baseline.py --write   # record the current counts as the baseline (after fixing some)

The packages are folders mapped to ``replayssm.<folder>`` at install time, so
mypy reads them through a temporary tree of links laid out as the installed
package. Third-party modules (torch, z3, numpy, hypothesis, triton) are not
followed (their types are ``Any``): the check is of our own code, and takes
seconds. The baseline holds the number of errors per module; it may only
shrink (``tests/test_types.py`` fails when a module has more errors than its
line allows, and when it has fewer, so that the baseline follows the fixes).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "mypy_baseline.txt"
FOLDERS = ("spec", "base", "impl", "verify", "fuzz", "review")
"""The folders installed under ``replayssm`` (``replayssm/`` itself holds the command line)."""
FLAGS = ("--follow-imports=skip", "--ignore-missing-imports", "--cache-dir=/dev/null", "--no-error-summary",
         "--show-error-codes", "--no-color-output")
ERROR = re.compile(r"^replayssm/(?P<path>[^:]+\.py):\d+: error: ")


def _linked_tree(root: Path, into: Path) -> Path:
    """``into/replayssm`` laid out as the installed package, of links into ``root``."""
    package = into / "replayssm"
    package.mkdir()
    for entry in (root / "replayssm").iterdir():
        (package / entry.name).symlink_to(entry)
    for folder in FOLDERS:
        if (root / folder).is_dir():
            (package / folder).symlink_to(root / folder)
    return into


def run_mypy(root: Path = ROOT) -> str:
    """mypy's output on the packages under ``root``; a missing mypy is a ``RuntimeError``."""
    with tempfile.TemporaryDirectory(prefix="replayssm-mypy-") as tmp:
        tree = _linked_tree(root, Path(tmp))
        proc = subprocess.run([sys.executable, "-m", "mypy", "-p", "replayssm", *FLAGS], cwd=tree,
                              capture_output=True, text=True)
    if proc.returncode not in (0, 1) or "No module named mypy" in proc.stderr:
        raise RuntimeError(f"mypy did not run (pip install mypy; scripts/setup.sh does): {proc.stderr.strip()}")
    return proc.stdout


def error_counts(output: str) -> dict[str, int]:
    """The number of errors per module (its path in the repository) in mypy's output."""
    counts: dict[str, int] = {}
    for line in output.splitlines():
        m = ERROR.match(line)
        if m:
            path = m["path"]
            top = path.split("/", 1)[0]
            path = path if top in FOLDERS else f"replayssm/{path}"
            counts[path] = counts.get(path, 0) + 1
    return counts


def read_baseline(path: Path = BASELINE) -> dict[str, int]:
    """The baseline file: ``<count> <module path>`` per line, ``#`` comments."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            count, module = line.split(maxsplit=1)
            out[module] = int(count)
    return out


def differences(counts: dict[str, int], baseline: dict[str, int]) -> tuple[list[str], list[str]]:
    """Modules with more errors than the baseline allows, and modules with fewer (the baseline may shrink)."""
    more = [f"{m}: {counts[m]} errors, the baseline allows {baseline.get(m, 0)}"
            for m in sorted(counts) if counts[m] > baseline.get(m, 0)]
    fewer = [f"{m}: {counts.get(m, 0)} errors, the baseline says {baseline[m]}"
             for m in sorted(baseline) if counts.get(m, 0) < baseline[m]]
    return more, fewer


def write_baseline(counts: dict[str, int], path: Path = BASELINE) -> None:
    lines = ["# mypy errors allowed per module (scripts/mypy_baseline.py --write); the counts may only shrink"]
    lines += [f"{n} {m}" for m, n in sorted(counts.items())]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    output = run_mypy()
    counts = error_counts(output)
    if "--write" in argv:
        more, _ = differences(counts, read_baseline()) if BASELINE.exists() else ([], [])
        if more:
            print("refused: the baseline may only shrink, and these modules have more errors:\n  " + "\n  ".join(more))
            return 1
        write_baseline(counts)
        print(f"{sum(counts.values())} errors in {len(counts)} modules written to {BASELINE}")
        return 0
    more, fewer = differences(counts, read_baseline())
    print(output, end="")
    print(f"{sum(counts.values())} errors; more than the baseline: {more or 'none'}; fewer: {fewer or 'none'}")
    return 1 if more else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
