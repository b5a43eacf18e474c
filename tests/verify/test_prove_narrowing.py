"""``prove --transition NAME`` and ``--invariant NAME``: the obligations of one
transition, or those proving one system invariant; a bad name is exit 2
listing the allowed ones, before any work."""

from __future__ import annotations

import re

import pytest

from replayssm.cli import main
from replayssm.spec.system import INVARIANTS
from replayssm.verify.catalog import obligations


def _listed(text: str) -> set[str]:
    return set(re.findall(r"^(\S+)  \[", text, re.M))


def test_transition_lists_exactly_its_obligations(capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--list", "--transition", "step"]) == 0
    listed = _listed(capsys.readouterr().out)
    assert listed == {ob.name for ob in obligations() if ob.transition == "step"}
    assert "system.step" in listed and "system.admit" not in listed


def test_invariant_lists_the_obligations_that_prove_it(capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--list", "--invariant", "canonical"]) == 0
    listed = _listed(capsys.readouterr().out)
    assert {"system.canonical", "system.step", "system.initial", "system.bmc"} <= listed
    assert not listed & {"system.groups_agree", "system.no_token_dropped", "boundary.exact"}
    assert main(["prove", "--list", "--invariant", "canonical", "--transition", "all"]) == 0
    assert _listed(capsys.readouterr().out) == {"system.canonical"}


def test_every_invariant_is_proved_and_every_named_invariant_exists() -> None:
    names = {inv.name for inv in INVARIANTS}
    claimed = [(ob.name, n) for ob in obligations() for n in ob.invariants]
    assert {n for _, n in claimed} == names
    assert all(n in names for _, n in claimed)


def test_narrowed_obligations_are_proved(capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--only", "boundary.", "--transition", "boundary", "--jobs", "1", "--no-cache"]) == 0
    assert "4/4 obligations proved" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--transition", "stepp"], r"--transition must be one of admit, all, .*step, system, got 'stepp'"),
    (["--invariant", "canon"], r"--invariant must be one of range, refinement, no_token_dropped, groups_agree, "
                               r"canonical, got 'canon'"),
    (["--only", "boundary.", "--transition", "step"], r"no obligation matches --transition step"),
    (["--kernels", "--transition", "step"], r"--transition must be one of kernel _compact_replayssm_requests_kernel"),
])
def test_a_bad_name_is_a_usage_error_listing_the_allowed(argv: list[str], message: str,
                                                         capsys: pytest.CaptureFixture) -> None:
    assert main(["prove", "--no-cache", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and re.search(message, err), err
