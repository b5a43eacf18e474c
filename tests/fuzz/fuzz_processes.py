"""Helpers the fuzz tests share: a planted bug as an ``--impl`` file, and a
campaign subprocess interrupted once its output shows a marker (with the
processes it had started then, to check none survives)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Collection
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def plant(folder: Path, old: str, new: str) -> str:
    """A copy of the kernel module with ``old`` replaced by ``new`` (once), as an --impl file."""
    source = (REPO / "impl" / "kernels.py").read_text()
    assert source.count(old) == 1, f"planted bug anchor {old!r} not found exactly once"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "planted_kernels.py"
    path.write_text(source.replace(old, new))
    return str(path)


def _parents() -> dict[int, list[int]]:
    """Every live process id by its parent's id, read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    return parents


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    return set(_parents().get(pid, []))


def descendants(pid: int) -> set[int]:
    """The processes below ``pid``: its children, theirs, and so on."""
    parents = _parents()
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def running(token: str) -> list[int]:
    """The processes whose command line holds ``token`` (a hostile target's marked children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def interrupt_at(proc: subprocess.Popen, marker: str, signum: signal.Signals, timeout: float,
                 watch: Callable[[int], Collection[int]] = children) -> tuple[str, Collection[int]]:
    """Read ``proc``'s output until a line holds ``marker``, note ``watch(proc.pid)``,
    send ``signum`` and wait for the end: its whole output, and the noted processes."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if marker in line:
            break
    processes = watch(proc.pid)
    proc.send_signal(signum)
    rest, _ = proc.communicate(timeout=timeout)
    return "".join(lines) + rest, processes
