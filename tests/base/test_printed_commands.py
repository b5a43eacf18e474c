"""Every command line the tool prints or writes is quoted for a shell
(issue 39): a file named ``$(touch pwned).py`` is pasted as that name, never run."""

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
