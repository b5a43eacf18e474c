"""The verdict table fits 120 columns; ``--wide`` gives every detail on one line per version.

A verdict with every list long (five latent and five guaranteed reliances,
findings with long trace paths, a long evidence string) is printed: every
line is at most 120 columns and every name and trace is still there, whole,
in the narrow table; ``wide`` prints the unwrapped line that is longer
(teeth: the width check fails on it). :mod:`replayssm.review.text_table`'s
layout is checked on its own too: a header its column can hold is never
wrapped, a cell wraps within its column.
"""

from __future__ import annotations

import pytest

from replayssm.review.text_table import WIDTH, layout
from replayssm.review.verdict_parts import Counterexample, LifecycleResult, ProbeOutcome, ReviewParts
from replayssm.review.verdicts import build_verdict, print_table
from replayssm.spec import assumptions as env

NAMES = [a.name for a in env.ALL][:10]


def _probe(name: str, outcome: str, guaranteed: bool) -> ProbeOutcome:
    return ProbeOutcome(name, {"assumptions": [name], "guaranteed": guaranteed, "outcome": outcome,
                               "relied_on": True, "property": "forward", "message": "forward: decode reads ...",
                               "trace": f"/a/rather/long/folder/of/traces/review-X-without-{name}-seed7.json",
                               "independent_finding": None, "seconds": 1.0})


def _verdict():  # type: ignore[no-untyped-def]
    props = ("memory", "refinement", "frame")
    broken = LifecycleResult({"request_steps": 100}, {p: "broken" for p in props},
                             tuple(Counterexample(p, f"{p}: broken", f"/long/path/{n}" * 6, True, "r")
                                   for n, p in enumerate(props)), (), 1.0)
    probes = [_probe(n, "latent", False) for n in NAMES[:5]] + [_probe(n, "relies on a guarantee", True)
                                                               for n in NAMES[5:10]]
    return build_verdict("A_version_label", "x.py", "A", "gen A", ReviewParts(lifecycle=broken, probes=probes))


def test_the_table_fits_120_columns_and_keeps_every_name_and_trace(capsys: pytest.CaptureFixture) -> None:
    v = _verdict()
    print_table([v], None)
    narrow = capsys.readouterr().out
    lines = narrow.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    assert "latent" in lines[0] and "finding" in lines[1]
    assert lines[1].split()[-4:-2] == ["5", "5"]  # the counts; the names on their own lines
    assert any(line.startswith("A_version_label latent (not guaranteed): ") for line in lines)
    flat = " ".join(line.strip() for line in lines)
    for name in NAMES:
        assert name in flat.replace(" ", "") or name in narrow, name
    for n in range(3):
        assert f"/long/path/{n}" * 6 in flat.replace(" ", ""), n
    print_table([v], None, wide=True)
    wide = capsys.readouterr().out.splitlines()
    assert len(wide) == 2 and max(len(line) for line in wide) > WIDTH  # teeth: the wide line breaks the bound
    assert all(name in wide[1] for name in NAMES)


def test_a_header_its_column_can_hold_is_not_wrapped_and_cells_wrap_in_their_column() -> None:
    rows = [["name", "a long header", "list"], ["x", "y", ", ".join(["item"] * 40)]]
    lines = layout(rows, width=60, floors={1: len("a long header")})
    assert "a long header" in lines[0] and all(len(line) <= 60 for line in lines)
    start = lines[0].index("list")
    assert all(line[start:].startswith("item") for line in lines[1:]), lines
    assert layout(rows, width=1000) == [f"name  a long header  list{' ' * 0}".rstrip().ljust(0),
                                        "x     y              " + ", ".join(["item"] * 40)]


def test_a_path_longer_than_a_line_stays_whole_to_be_copied() -> None:
    from replayssm.review.text_table import wrapped

    path = "/tmp/pytest-of-root/traces/" + "kernel-diff-vllm-replayssm_utils-vs-planted-migration" * 3 + ".json"
    lines = wrapped(f"regression (proved): {path}", 60)
    assert [line.strip() for line in lines] == ["regression (proved):", path]
