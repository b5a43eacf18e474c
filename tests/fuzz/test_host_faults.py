"""A fault of the harness is never a finding (issue 38 item 2).

CPython 3.11's conversion of source to AST objects keeps its recursion depth
in one counter per interpreter (gh-106905): Python code that parses while a
conversion is under way, e.g. a finalizer the cyclic collector runs inside
it, makes it raise ``SystemError: AST constructor recursion depth
mismatch``. Triton's interpreter converts each kernel's source in the target
host at its first launch. A host forked from the judging process ran the
judge's finalizers (and hooks) beside the target, and CI saw that
SystemError as the target's ``exception`` finding.

The :class:`Bomb` below is such judge state: cyclic garbage whose finalizer
re-arms itself and, inside a target host only, parses Python. In the judge it
is harmless; a host that inherits it reports Triton's failure to read a
correct kernel as the kernel's raise. Hosts come from the fork server (a
fresh interpreter), so they never inherit it; and a host whose own
interpreter is broken that way (the bomb planted in the fork server's start
through ``sitecustomize``) fails its health check and the run is a set-up
error, exit 2, before or after the target's import.
"""

from __future__ import annotations

import ast
import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.fuzz.replay import replay
from test_guards import filled_table_trace

CANARY = "x = [" + ", ".join(f"f(a{i}, b[{i}])" for i in range(40)) + "]\n"

DEPTH = 40
"""The bomb parses this many calls deeper than its finalizer: the counter it
leaves is then never, by chance, the one the interrupted conversion expects
(a kernel's AST is nested less deep), so each conversion it lands in raises."""


def deep_parse(n: int = DEPTH) -> None:
    """:data:`CANARY` parsed ``n`` calls down."""
    if n:
        deep_parse(n - 1)
    else:
        ast.parse(CANARY)


class Bomb:
    """Cyclic garbage whose finalizer makes another (so every collection runs
    one) and, in a target host (``REPLAYSSM_TARGET_DEVICE`` set), parses Python."""

    armed = True

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        if Bomb.armed:
            Bomb()
            if "REPLAYSSM_TARGET_DEVICE" in os.environ:
                deep_parse()


@pytest.fixture
def bomb_in_the_judge() -> Iterator[None]:
    Bomb.armed = True
    Bomb()
    gc.collect()
    try:
        yield
    finally:
        Bomb.armed = False
        gc.collect()


def test_the_bomb_breaks_ast_in_a_process_that_has_it(bomb_in_the_judge: None, monkeypatch) -> None:
    """The provocation is real: where the bomb goes off, a large enough parse
    raises the SystemError (the judge's own parses are safe: it stays quiet here)."""
    source = "\n".join(f"def f{i}(a):\n    return [x * a for x in range({i}) if x % 3]" for i in range(60))
    ast.parse(source)
    monkeypatch.setenv("REPLAYSSM_TARGET_DEVICE", "cpu")
    with pytest.raises(SystemError, match="AST constructor recursion depth mismatch"):
        ast.parse(source)


def test_the_judges_state_never_runs_in_a_target_host(tmp_path: Path, bomb_in_the_judge: None) -> None:
    """Correct kernels replayed with the bomb in the judge: they pass (on
    tree 1d5a1d0 the forked host inherited it and the replay reported
    "the target raised SystemError: AST constructor recursion depth mismatch")."""
    path = tmp_path / "filled_table.json"
    path.write_text(json.dumps(filled_table_trace()))
    ok, report = replay(str(path), None, "cpu")
    assert ok and "SystemError" not in report, report


SITECUSTOMIZE = """
import ast, os, sys

CANARY = {canary!r}


def deep_parse(n={depth}):
    if n:
        deep_parse(n - 1)
    else:
        ast.parse(CANARY)


class Bomb:
    def __init__(self):
        self.cycle = self

    def __del__(self):
        Bomb()
        if "REPLAYSSM_TARGET_DEVICE" in os.environ and {condition}:
            deep_parse()


Bomb()
"""


@pytest.fixture
def broken_fork_server(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """A folder for a ``sitecustomize`` on the path of a fork server of this test's own."""
    from replayssm.base import fork_server

    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    fork_server.stop()
    try:
        yield folder
    finally:
        fork_server.stop()


@pytest.mark.parametrize("when, condition", [
    ("before the target is imported", "True"),
    ("after the target raised", "'replayssm.impl.kernels' in sys.modules"),
])
def test_a_host_whose_interpreter_is_broken_is_a_set_up_error(tmp_path: Path, broken_fork_server: Path,
                                                             capsys, when: str, condition: str) -> None:
    """The host's interpreter parses in its collector's finalizers (from the
    start, or once our kernels are imported, so that Triton's reading of the
    first kernel launched raises): ``fuzz`` of correct kernels is exit 2 naming
    the failed health check, with no finding."""
    site = SITECUSTOMIZE.format(canary=CANARY, depth=DEPTH, condition=condition)
    (broken_fork_server / "sitecustomize.py").write_text(site)
    out = tmp_path / "s.json"
    code = main(["fuzz", "--examples", "40", "--jobs", "1", "--failures", str(tmp_path / "f"), "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "health check" in err and "AST constructor recursion depth mismatch" in err, err
    if when == "before the target is imported":
        assert "before the target is imported" in err, err
    else:
        assert "after the target raised SystemError" in err, err
    assert not list((tmp_path / "f").glob("*.json")), "a finding was saved"


STALLS = '''
import os, stat, struct, time

for fd in range(3, 64):  # its socket to the judge: a message announced (1000 bytes), one byte sent, then nothing
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, struct.pack("!i", 1000) + b"x")
    except OSError:
        pass
time.sleep(600)
'''


def test_a_target_that_begins_a_message_and_stops_is_its_hang(tmp_path: Path) -> None:
    """The judge reads a host's message within the watchdog (issue 39): a stall
    halfway is the target's hang at import, not a judge blocked for ever in
    ``recv_bytes``; and the next host starts (the server is not stuck with it)."""
    from replayssm.base.isolation import TargetFault, load_isolated

    path = tmp_path / "stalls.py"
    path.write_text(STALLS)
    with pytest.raises(TargetFault) as raised:
        load_isolated(str(path), load_seconds=3.0)
    assert raised.value.kind == "hang" and "began a message and did not finish it" in raised.value.reason, \
        raised.value.reason
    kernels = load_isolated(str(Path(__file__).resolve().parents[2] / "impl" / "kernels.py"))
    assert "_postprocess_replayssm_kernel" in kernels._host.description["kernels"]


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "soon"])
def test_a_load_watchdog_that_is_no_watchdog_is_exit_2_naming_the_variable(tmp_path: Path, monkeypatch, capsys,
                                                                          value: str) -> None:
    monkeypatch.setenv("REPLAYSSM_TARGET_LOAD_SECONDS", value)
    code = main(["fuzz", "--examples", "4", "--jobs", "1", "--failures", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert code == 2 and "$REPLAYSSM_TARGET_LOAD_SECONDS must be a number of seconds > 0" in err, err
