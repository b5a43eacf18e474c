"""``scripts/count_any.py``: the ``Any`` in annotations (the count ``docs/architecture.md`` records),
and with ``--vocab`` the vocabulary's ``Value``/``Cond`` aliases, so naming a value so is seen."""

from __future__ import annotations

import textwrap
from pathlib import Path

from script_modules import load

MODULE = textwrap.dedent('''
    from typing import Any
    import typing
    from replayssm.spec.vocab import Cond, Value

    def f(a: Any, b: dict[str, Any], *rest: typing.Any) -> list[Any]:
        x: Any = a
        y = b  # not annotated: not counted
        return [x, y]

    def g(v: Value, c: Cond = True) -> Value:
        note: str = "Any in a string is no annotation"
        return v
''')


def test_annotations_are_counted_and_nothing_else(tmp_path: Path) -> None:
    """Teeth: each ``Any`` of a parameter, a ``*rest``, a return and an annotated assignment counts (a
    ``typing.Any`` too); an unannotated name and a string do not; ``--vocab`` counts ``Value``/``Cond``."""
    script = load("count_any")
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "m.py").write_text(MODULE)
    assert script.count(tmp_path / "verify" / "m.py") == 5
    assert script.count(tmp_path / "verify" / "m.py", script.VOCAB) == 3
    assert script.counts(tmp_path) == {"verify/m.py": 5}
    (tmp_path / "verify" / "m.py").write_text(MODULE.replace("x: Any = a", "x: int = a"))
    assert script.counts(tmp_path) == {"verify/m.py": 4}
