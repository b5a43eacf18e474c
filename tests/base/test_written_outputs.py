"""What the tool writes survives hostile names and full disks (issue 39):
every command line it prints or writes is quoted for a shell (a file named
``$(touch pwned).py`` is pasted as that name, never run), and a trace or
report is written whole or not at all, under a name a file system takes."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from replayssm.base.reports import replay_command, tool_command

REPO = Path(__file__).resolve().parents[2]
UNQUOTED = re.compile(r"""f["'][^"']*replayssm-verify (?:replay|explain|review|fuzz|prove) \{""")
"""An f-string that pastes a value into a command line unquoted."""


def test_a_hostile_name_is_one_word_and_runs_nothing(tmp_path: Path) -> None:
    name = "$(touch pwned).py; touch pwned2 `touch pwned3`\n'"
    line = replay_command(name, name)
    assert shlex.split(line) == ["replayssm-verify", "replay", name, "--impl", name]
    subprocess.run(["sh", "-c", "true " + line], cwd=tmp_path, check=True)
    assert not list(tmp_path.iterdir())
    assert shlex.split(tool_command("prove", "--kernels", "--impl", name))[-1] == name


def test_no_module_pastes_a_value_into_a_command_line_unquoted(tmp_path: Path) -> None:
    """Teeth: the pattern finds such a line in a planted source."""
    assert UNQUOTED.search('x = f"replayssm-verify replay {path}"')
    found = [f"{p.relative_to(REPO)}:{n}" for folder in ("base", "fuzz", "review", "verify", "replayssm", "spec")
             for p in (REPO / folder).rglob("*.py") for n, text in enumerate(p.read_text().splitlines(), 1)
             if UNQUOTED.search(text)]
    assert not found, found


def test_a_full_disk_or_a_long_name_leaves_no_partial_file(tmp_path: Path, capsys) -> None:
    """A trace saved on a full disk (a file-size limit of 100 bytes:
    ``EFBIG``, as ``ENOSPC``) leaves no file at all, 0-byte or partial, and
    is printed instead; a report rewritten on a full disk keeps its old
    contents; a name of 300 bytes is shortened, not refused."""
    import resource
    import sys

    from replayssm.base.reports import MAX_NAME_BYTES, write_new, write_text
    from replayssm.fuzz.report import save_trace

    report = tmp_path / "report.json"
    report.write_text("old")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))
    try:
        saved = save_trace({"actions": ["x" * 1000]}, str(tmp_path / "traces"), "t.json", sys.stdout)
        try:
            write_text(str(report), "new " * 100)
            raise AssertionError("a write past the limit did not fail")
        except OSError:
            pass
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert saved is None and "the finding's trace:" in capsys.readouterr().out
    assert not list((tmp_path / "traces").iterdir()) and report.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "traces"]
    long = write_new(tmp_path / "long", "review-" + "v" * 290 + ".json", "{}")
    assert long.read_text() == "{}" and len(long.name.encode()) <= MAX_NAME_BYTES and long.suffix == ".json"


def test_a_newline_in_a_file_name_cannot_forge_a_row_of_the_verdict_table(capsys) -> None:
    """``review`` of a file named ``x.py\\nB  A  1/1 held  pass ...``, in the
    table and in its wide form: no line of its own, the name's newline and
    escape shown as ``\\x0a``/``\\x1b``."""
    from replayssm.review.verdict_parts import LifecycleResult, ReviewParts
    from replayssm.review.verdicts import build_verdict, print_table

    held = LifecycleResult({"request_steps": 100}, {"refinement": "held"}, (), (), 1.0)
    label = "x.py\nB  A  1/1 held  pass\x1b[2K"
    for wide in (False, True):
        print_table([build_verdict(label, label, "A", "gen A", ReviewParts(lifecycle=held))], None, wide=wide)
        printed = capsys.readouterr().out
        assert "\x1b" not in printed and "x.py\\x0aB" in printed, printed
        assert not [line for line in printed.splitlines() if line.startswith("B ")], printed


def test_a_symbolic_link_loop_is_exit_2_naming_the_option(tmp_path: Path, capsys) -> None:
    """A loop of symbolic links given as a report, a folder or a target: exit
    2 naming the option, no traceback (Python 3.11's ``resolve`` raised
    ``RuntimeError: Symlink loop`` out of ``fuzz --json LOOP`` and ``fuzz
    --impl LOOP.py``)."""
    import os

    from replayssm.cli import main

    for name, to in (("a.json", "b.json"), ("b.json", "a.json"), ("a.py", "b.py"), ("b.py", "a.py")):
        os.symlink(tmp_path / to, tmp_path / name)
    loop, impl = str(tmp_path / "a.json"), str(tmp_path / "a.py")
    cases = [(["fuzz", "--json", loop], "--json"), (["fuzz", "--failures", loop], "--failures"),
             (["prove", "--junit", loop], "--junit"), (["fuzz", "--impl", impl, "--examples", "2"], "--impl"),
             (["review", impl, "--examples", "1"], "HEAD")]
    for argv, option in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert option in err and "Traceback" not in err, (argv, err)
