"""The type checker on the packages: mypy's errors per module never rise above
``tests/mypy_baseline.txt``, and the baseline follows every fix down
(``scripts/mypy_baseline.py``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from script_modules import load


def test_mypy_errors_stay_within_the_baseline() -> None:
    script = load("mypy_baseline")
    counts = script.error_counts(script.run_mypy())
    more, fewer = script.differences(counts, script.read_baseline())
    assert not more, "new mypy errors (python3 scripts/mypy_baseline.py shows them):\n" + "\n".join(more)
    assert not fewer, ("fewer mypy errors than the baseline: lower it with python3 scripts/mypy_baseline.py "
                       "--write\n" + "\n".join(fewer))


def test_a_planted_type_error_is_counted_against_the_baseline(tmp_path: Path) -> None:
    """Teeth: mypy runs on a small tree laid out like ours, and an error planted in it rises above a baseline."""
    script = load("mypy_baseline")
    (tmp_path / "replayssm").mkdir()
    (tmp_path / "replayssm" / "__init__.py").write_text("")
    for folder in script.FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "spec" / "vocab.py").write_text(textwrap.dedent('''
        def width(n: int) -> int:
            return n + 1
    '''))
    (tmp_path / "fuzz" / "callers.py").write_text(textwrap.dedent('''
        from replayssm.spec.vocab import width

        rows: int = width("two")
    '''))
    counts = script.error_counts(script.run_mypy(tmp_path))
    assert counts == {"fuzz/callers.py": 1}, counts
    more, fewer = script.differences(counts, {"fuzz/callers.py": 0, "spec/vocab.py": 1})
    assert more == ["fuzz/callers.py: 1 errors, the baseline allows 0"]
    assert fewer == ["spec/vocab.py: 0 errors, the baseline says 1"]
