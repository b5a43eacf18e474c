"""The command line starts without torch: a warm ``prove`` (every case from the proof cache) is about a
second, and torch's import alone is more than that. Only the subcommands that run kernels load it."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_the_cli_and_every_subcommand_parser_load_no_torch() -> None:
    loaded = _loaded_after("import replayssm.cli; replayssm.cli.build_parser()")
    assert "torch" not in loaded and "triton" not in loaded, sorted(m for m in loaded if m.startswith(("torch", "tri")))


def test_teeth_a_module_that_imports_the_launcher_loads_torch() -> None:
    assert "torch" in _loaded_after("import replayssm.fuzz.launcher")
