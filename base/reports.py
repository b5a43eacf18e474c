"""What the command line writes, and how it ends: exit codes, output paths
checked before any work, JSON with a schema version, JUnit XML for CI.

Shared by every subcommand (``prove``, ``fuzz``, ``review``), so a CI job
reads them all the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from .escape import one_line, printable

EXIT_PASSED = 0
"""Everything asked for was checked and holds."""
EXIT_FINDING = 1
"""A finding: a failed obligation, a discrepancy, a broken invariant."""
EXIT_USAGE = 2
"""Bad input or set-up (an option, a path, a missing device): reported before any work."""
EXIT_COVERAGE = 3
"""No finding, but a scenario class a campaign must reach was never reached."""
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
"""Interrupted (128 + the signal's number): the partial results were still written."""

EXIT_STATUS = {"passed": EXIT_PASSED, "finding": EXIT_FINDING, "usage": EXIT_USAGE, "coverage": EXIT_COVERAGE,
               "SIGINT": EXIT_SIGINT, "SIGTERM": EXIT_SIGTERM}
"""The exit status of each outcome by name (``usage``: bad input or set-up; a signal by its name), as a
report's ``status`` names it; every command ends with one of these."""


class UsageError(ValueError):
    """Bad input, reported as ``error: ...`` with exit status :data:`EXIT_USAGE`;
    the message names the option and what it accepts."""


STDOUT = "-"
"""The path that means standard output (for ``--json``)."""


def _resolved(path: str, option: str) -> Path:
    """``path`` with its symbolic links followed; a loop of them (or a name
    too long) is a :class:`UsageError` naming ``option``."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as e:  # Python 3.11 says "Symlink loop" with a RuntimeError
        raise UsageError(f"{option} {path!r} cannot be followed: {e}") from None


def _writable_folder(folder: Path, option: str, path: str) -> None:
    if not folder.is_dir():
        raise UsageError(f"{option} {path!r}: the folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path!r}: the folder {str(folder)!r} is not writable")


def check_output_file(path: str | None, option: str, stdout_ok: bool = False) -> None:
    """Raise :class:`UsageError` unless ``path`` (given for ``option``) can be
    written: an existing folder holds it, it is not itself a folder, and an
    existing file there is writable. ``-`` is standard output where
    ``stdout_ok``."""
    if path is None or stdout_ok and path == STDOUT:
        return
    if path == "" or path == STDOUT:
        raise UsageError(f"{option} needs a file name (or - for standard output)" if stdout_ok
                         else f"{option} needs a file name (- for standard output is --json's only)")
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} {path!r} is a folder; give a file name")
    _writable_folder(_resolved(path, option).parent, option, path)
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {path!r} exists and is not writable")


def check_distinct_outputs(outputs: dict[str, str | None]) -> None:
    """Raise :class:`UsageError` when two output options (option -> path) name
    one file: the second report would overwrite the first."""
    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None or path == STDOUT:
            continue
        key = _resolved(path, option)
        if key in seen:
            raise UsageError(f"{seen[key]} and {option} name the same file {path!r}: give each report its own")
        seen[key] = option


def tool_command(*words: object) -> str:
    """A ``replayssm-verify`` command line of ``words``, each quoted for a
    shell: a file named ``$(touch x).py`` is pasted as a name, never run."""
    return shlex.join(["replayssm-verify", *(str(w) for w in words)])


def replay_command(trace: str, impl: str | None = None, recorded: bool = False) -> str:
    """The ``replayssm-verify replay`` command line of ``trace`` (with ``--impl``; ``recorded``: with
    ``--recorded``, for a trace of two versions whose first ``--impl`` does not name), quoted for a shell."""
    return tool_command("replay", trace, *(["--impl", impl] if impl else []), *(["--recorded"] if recorded else []))


def check_output_folder(path: str, option: str) -> None:
    """Raise :class:`UsageError` unless ``path`` is a writable folder or can
    be created (its nearest existing ancestor is a writable folder)."""
    if path == "":
        raise UsageError(f"{option} needs a folder name")
    target = _resolved(path, option)
    if target.exists():
        if not target.is_dir():
            raise UsageError(f"{option} {path!r} is a file, not a folder")
        _writable_folder(target, option, path)
        return
    ancestor = target.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{option} {path!r}: {str(ancestor)!r} is a file, not a folder")
    _writable_folder(ancestor, option, path)


MAX_NAME_BYTES = 255
"""The longest file name (in bytes) the usual file systems take."""


def fitting_name(name: str) -> str:
    """``name`` when a file system takes it, else its start, a digest of the
    whole name and its suffix, within :data:`MAX_NAME_BYTES` (a trace named
    after a version's file of 244 bytes is still saved)."""
    raw = name.encode(errors="surrogateescape")
    if len(raw) <= MAX_NAME_BYTES:
        return name
    suffix = Path(name).suffix if len(Path(name).suffix) <= 16 else ""
    digest = hashlib.sha256(raw).hexdigest()[:16]
    keep = MAX_NAME_BYTES - len(suffix.encode(errors="surrogateescape")) - len(digest) - 1
    return raw[:keep].decode(errors="ignore") + "-" + digest + suffix


_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _partial(folder: Path, text: str) -> Path:
    """``text`` written to a new hidden file in ``folder`` (a short name of its
    own); removed again when the write fails (a full disk): nothing 0-byte is left."""
    fd, name = tempfile.mkstemp(prefix=".replayssm-", suffix=".partial", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as an ordinary new file (mkstemp's are 0600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (``-``: standard output) through a
    temporary file beside it, so a reader never sees half a report, and a
    write that fails (a full disk) leaves the file as it was and nothing else."""
    if path == STDOUT:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    target = Path(path)
    partial = _partial(target.parent, text)
    try:
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_new(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` to a new file in ``folder`` (made if needed) named
    ``name`` or, when that exists, ``name`` with a counter, shortened where too
    long (:func:`fitting_name`); never overwrites, never leaves a partial or
    0-byte file (it appears whole or not at all). Its path."""
    folder.mkdir(parents=True, exist_ok=True)
    stem, n = name.removesuffix(".json"), 0
    partial = _partial(folder, text)
    try:
        while True:
            path = folder / fitting_name(name if n == 0 else f"{stem}-{n}.json")
            try:
                os.link(partial, path)
                return path
            except FileExistsError:
                n += 1
    finally:
        partial.unlink(missing_ok=True)


def _installation_changed() -> list[str]:
    """The tool's files a target changed during this run (:mod:`.installation`), said once."""
    from . import installation

    paths = installation.changed()
    installation.say(paths)
    return paths


def write_json(path: str, schema: str, report: dict[str, Any]) -> None:
    """Write ``report`` as JSON with ``"schema": schema`` first. When the
    tool's installation changed during the run (:mod:`.installation`), the
    document says so (``installation_changed``) and a verdict's ``status``
    is ``finding`` (``exit_code`` 1, ``passed`` false)."""
    tampered = _installation_changed()
    if tampered:
        report = {**report, "installation_changed": tampered}
        if "status" in report:
            report.update(status="finding", exit_code=EXIT_FINDING)
            if "passed" in report:
                report["passed"] = False
    write_text(path, json.dumps({"schema": schema, **{k: v for k, v in report.items() if k != "schema"}},
                                indent=2))


@dataclass(frozen=True)
class JunitCase:
    """One JUnit test case: an obligation, or a campaign."""

    name: str
    seconds: float
    failure: str | None = None
    """None when it passed; else the message (the counterexample, the trace)."""
    kind: str = "failure"
    """``failure`` (a finding), ``error`` (it could not be checked) or ``skipped``
    (not run, ``failure`` says why)."""


def junit_xml(suite: str, cases: list[JunitCase], interrupted: bool = False) -> str:
    """A JUnit XML document with one test suite ``suite`` of ``cases`` (and a
    failed case ``installation`` when the tool's files changed during the run)."""
    tampered = _installation_changed()
    if tampered:
        from .installation import CHANGED

        cases = [*cases, JunitCase("installation", 0.0, f"{CHANGED}: {', '.join(tampered)}")]
    failures = sum(c.failure is not None and c.kind == "failure" for c in cases)
    errors = sum(c.failure is not None and c.kind == "error" for c in cases) + int(interrupted)
    skipped = sum(c.failure is not None and c.kind == "skipped" for c in cases)
    seconds = sum(c.seconds for c in cases)
    tests = len(cases) + int(interrupted)  # the "interrupted" case below is one of them
    cases = [JunitCase(one_line(c.name), c.seconds, None if c.failure is None else printable(c.failure), c.kind)
             for c in cases]  # a name or message from a target: no character XML 1.0 cannot hold
    suite = one_line(suite)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f"<testsuites tests={quoteattr(str(tests))} failures={quoteattr(str(failures))} "
             f"errors={quoteattr(str(errors))} time={quoteattr(f'{seconds:.3f}')}>",
             f"  <testsuite name={quoteattr(suite)} tests={quoteattr(str(tests))} "
             f"failures={quoteattr(str(failures))} errors={quoteattr(str(errors))} "
             f"skipped={quoteattr(str(skipped))} time={quoteattr(f'{seconds:.3f}')}>"]
    for c in cases:
        head = f"    <testcase classname={quoteattr(suite)} name={quoteattr(c.name)} time={quoteattr(f'{c.seconds:.3f}')}"
        if c.failure is None:
            lines.append(head + "/>")
            continue
        first = c.failure.splitlines()[0] if c.failure else c.kind
        lines += [head + ">", f"      <{c.kind} message={quoteattr(first)}>{escape(c.failure)}</{c.kind}>",
                  "    </testcase>"]
    if interrupted:
        lines.append(f"    <testcase classname={quoteattr(suite)} name=\"interrupted\" time=\"0\">"
                     "<error message=\"interrupted before every case ran\"/></testcase>")
    lines += ["  </testsuite>", "</testsuites>", ""]
    return "\n".join(lines)


def write_junit(path: str, suite: str, cases: list[JunitCase], interrupted: bool = False) -> None:
    write_text(path, junit_xml(suite, cases, interrupted))


def write_reports(reports: list[tuple[str, str | None, Callable[[], None]]], listed: str) -> bool:
    """Write each report asked for: ``(option, path, write)``, ``path`` None
    when the option was not given. One that fails (its folder removed during
    the run, a full disk) is reported as ``error: OPTION PATH: cannot write
    the report: ...`` followed by ``listed`` (where the results can still be
    read), and the others are still written. Returns whether every one was.
    Every process of the run's targets is ended first (:func:`.isolation.end_targets`;
    a process that never imported :mod:`.isolation` started none): none is left to
    write beside the judge, or after it."""
    isolation = sys.modules.get(__package__ + ".isolation")
    if isolation is not None:
        isolation.end_targets()
    written = True
    for option, path, write in reports:
        if not path:
            continue
        try:
            write()
        except OSError as e:
            print(f"error: {option} {path}: cannot write the report: {e} ({listed})", file=sys.stderr)
            written = False
    return written


def status_after_writing(status: int, written: bool) -> int:
    """The exit status once the reports were (or were not) written: a report
    that could not be written is :data:`EXIT_USAGE` for a run that passed or
    fell short of coverage; a finding or an interrupt keeps its status (a
    finding is never reported as a set-up error). A run during which the
    tool's installation changed is :data:`EXIT_FINDING` whatever it was (the
    target's doing: never a pass, a set-up error or an interrupt)."""
    if _installation_changed():
        return EXIT_FINDING
    return status if written or status not in (EXIT_PASSED, EXIT_COVERAGE) else EXIT_USAGE
