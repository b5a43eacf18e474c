"""The user's settings that the target's process reads are checked before
any work (``base/host_settings.py``, issue 39): one that contradicts the
command is exit 2 naming it and what to do, never a finding against correct
kernels, and nothing is run or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from replayssm.base import host_settings
from replayssm.base.reports import UsageError
from replayssm.cli import main
from replayssm.spec import corpus


def _fuzz(tmp_path: Path) -> int:
    return main(["fuzz", "--examples", "32", "--jobs", "1", "--failures", str(tmp_path / "f"),
                 "--json", str(tmp_path / "s.json")])


@pytest.mark.parametrize("value", ["0", "false", ""])
def test_triton_compiling_for_a_gpu_on_a_cpu_run_is_exit_2_before_any_work(tmp_path: Path, monkeypatch, capsys,
                                                                           value: str) -> None:
    """``TRITON_INTERPRET=0`` with ``fuzz`` on cpu: exit 2 naming the setting
    and what to do, no JSON and no failure folder (before: on 1d5a1d0 a finding
    against our kernels; since, the hosts overrode it and the run passed,
    exit 0, running what the user had not asked for)."""
    monkeypatch.setenv("TRITON_INTERPRET", value)
    code = _fuzz(tmp_path)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"$TRITON_INTERPRET={value!r}" in err and "unset TRITON_INTERPRET" in err and "--device cuda" in err, err
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "f").exists()


@pytest.mark.corpus
def test_review_checks_the_same_settings_before_any_work(tmp_path: Path, monkeypatch, capsys) -> None:
    """``review`` of a corpus version with ``TRITON_INTERPRET=0``, then with a
    ``$REPLAYSSM_SANDBOX`` that is no choice: exit 2 each, before any version
    is loaded (no JSON, no trace folder)."""
    version = str(corpus.versions() / "A3.py")
    args = ["review", version, "--examples", "4", "--traces", str(tmp_path / "t"), "--json", str(tmp_path / "r.json")]
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert main(args) == 2
    assert "$TRITON_INTERPRET='0'" in capsys.readouterr().err
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("REPLAYSSM_SANDBOX", "maybe")
    assert main(args) == 2
    assert "$REPLAYSSM_SANDBOX must be one of auto, require, off, got 'maybe'" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "t").exists()


@pytest.mark.parametrize("setting, value, message", [
    ("TRITON_INTERPRET", "0", "$TRITON_INTERPRET='0'"),
    ("REPLAYSSM_TARGET_LOAD_SECONDS", "nan", "$REPLAYSSM_TARGET_LOAD_SECONDS must be a number of seconds > 0"),
    ("REPLAYSSM_SANDBOX", "on", "$REPLAYSSM_SANDBOX must be one of"),
])
def test_each_setting_that_contradicts_a_cpu_run_is_named(monkeypatch, setting: str, value: str,
                                                          message: str) -> None:
    monkeypatch.setenv(setting, value)
    with pytest.raises(UsageError) as raised:
        host_settings.check("cpu")
    assert message in str(raised.value)


@pytest.mark.parametrize("device, interpret", [("cpu", None), ("cpu", "1"), ("cuda", "0"), ("cuda", None)])
def test_settings_that_agree_with_the_device_pass(monkeypatch, device: str, interpret: str | None) -> None:
    """Teeth the other way: the interpreter (or nothing) on cpu, the compiler on cuda, are no error."""
    if interpret is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
    host_settings.check(device)
