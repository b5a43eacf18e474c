"""``review`` imports and launches each version in a process of its own
(issue 27): a version that ends its process at import, or a kernel that
never returns, is that version's finding, with the reports written; the
review's own process decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.cli import main
from replayssm.review import campaign as review_campaign

REPO = Path(__file__).resolve().parents[2]
TARGETS = REPO / "tests" / "targets"
MIGRATION_LINE = "    valid_req = req >= 0\n"


def test_a_version_that_exits_at_import_is_a_finding_with_its_reports(tmp_path: Path, capsys) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    code = main(["review", str(TARGETS / "exit_at_import.py"), "--examples", "1", "--traces", str(tmp_path / "t"),
                 "--json", str(report), "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 1, out
    (verdict,) = json.loads(report.read_text())["verdicts"]
    assert verdict["status"] == "finding" and verdict["properties"] == {"process": "broken"}, verdict
    message = verdict["findings"][0]["message"]
    assert "the target ended the process at import: exit status 0" in message and "about to leave" in message
    assert "exit_at_import" in out and "finding" in out and "<failure" in junit.read_text()


def test_a_kernel_that_never_returns_is_a_hang_finding_of_the_version(tmp_path: Path, capsys) -> None:
    source = (REPO / "impl" / "kernels.py").read_text()
    looping = tmp_path / "looping_kernels.py"
    looping.write_text(source.replace(MIGRATION_LINE, MIGRATION_LINE + "    while True: pass\n", 1))
    report = tmp_path / "r.json"
    code = main(["review", str(looping), "--examples", "1", "--watchdog", "2", "--budget", "4",
                 "--traces", str(tmp_path / "t"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 1, out
    (verdict,) = json.loads(report.read_text())["verdicts"]
    (finding,) = verdict["findings"]
    assert finding["property"] == "process" and "within the 2 s watchdog" in finding["message"], finding
    assert "_reset_new_replayssm_slots_kernel" in finding["message"] and Path(finding["trace"]).is_file()


@pytest.mark.corpus
def test_review_input_misuse_is_exit_2(tmp_path: Path, capsys) -> None:
    binary, page = tmp_path / "binary.py", tmp_path / "half.txt"
    binary.write_bytes(b"\x96\x00\xff" * 100)
    from replayssm.spec import corpus

    page.write_text(corpus.reference_page().read_text()[:20000])
    kernels = str(REPO / "impl" / "kernels.py")  # in a git checkout
    cases = [
        ([kernels, f"--base-ref=--output={tmp_path / 'written'}"], "is not a git revision"),
        ([kernels, "--json", str(tmp_path / "x"), "--junit", str(tmp_path / "x")], "name the same file"),
        ([str(binary)], "is not Python source text"),
        ([str(page)], "error: "),
    ]
    for argv, message in cases:
        assert main(["review", *argv, "--examples", "1", "--traces", str(tmp_path / "t")]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "written").exists()


def test_two_versions_with_one_file_name_keep_their_own_labels(tmp_path: Path) -> None:
    from replayssm.base.reports import replay_command
    from replayssm.base.isolation import absolute_target
    from replayssm.review.command import _labels

    sources = [absolute_target(str(tmp_path / d / "ssu_dispatch.py")) for d in ("co1", "co2")] + ["A1.py"]
    labels = _labels(sources)
    assert [labels[s] for s in sources] == ["co1/ssu_dispatch", "co2/ssu_dispatch", "A1"]
    assert all(Path(s).is_absolute() for s in sources[:2])
    assert replay_command("/a b/t.json", "/x y/v.py") == "replayssm-verify replay '/a b/t.json' --impl '/x y/v.py'"


def test_two_reports_into_one_file_are_exit_2_for_prove_and_fuzz(tmp_path: Path, capsys) -> None:
    same = str(tmp_path / "x")
    for argv in (["prove", "--only", "boundary.exact"], ["fuzz"]):
        assert main([*argv, "--json", same, "--junit", same]) == 2, argv
        err = capsys.readouterr().err
        assert "--json and --junit name the same file" in err, err
    assert not (tmp_path / "x").exists()


def test_fuzz_drop_twice_is_exit_2_naming_both(capsys) -> None:
    """``--drop A --drop B`` kept only B; containment judges one broken assumption per campaign."""
    assert main(["fuzz", "--drop", "decode_within_block", "--drop", "positions_nonnegative"]) == 2
    err = capsys.readouterr().err
    assert "--drop takes one assumption per campaign, got 2: decode_within_block, positions_nonnegative" in err


def test_fuzz_numeric_refuses_the_options_it_ignored(capsys) -> None:
    for extra, named in ((["--level", "kernel"], "--level kernel"), (["--watchdog", "5"], "--watchdog"),
                         (["--drop", "decode_within_block"], "--drop")):
        assert main(["fuzz", "--numeric", *extra]) == 2, extra
        assert f"{named} does not apply to --numeric" in capsys.readouterr().err


ONLY_FRESH = ("changed = valid_dst & (~valid_src | (src_slot != dst_slot))", "changed = valid_dst & ~valid_src")
"""A line of our reset kernel changed so that its proofs fail (equivalence) and it differs from the original."""

IMPORTED_ONLY = "\n_IMPORTED = False\nif True:  # not read by the proofs (only definitions are): true once imported\n    _IMPORTED = True\n"
"""Module code that the proofs' reading of the source leaves out: the kernel's fault below is
reached only by the module as imported (in the version's own process), never by the proofs."""


def _faulty_version(folder: Path, fault: str | None, change: tuple[str, str] | None) -> Path:
    """Our kernels with ``change`` planted and, with ``fault``, the reset kernel running ``fault`` when launched."""
    text = (REPO / "impl" / "kernels.py").read_text()
    if change is not None:
        assert text.count(change[0]) == 1
        text = text.replace(*change)
    if fault is not None:
        text = text.replace(MIGRATION_LINE, f"{MIGRATION_LINE}    if _IMPORTED:\n        {fault}\n", 1) + IMPORTED_ONLY
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kernels.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize("fault, kind, words", [
    ("__import__('os')._exit(0)", "crash", "exit status 0"),
    ("while True: pass", "hang", "within the 2 s watchdog"),
])
def test_a_kernel_faulting_on_a_proof_or_diff_replay_is_a_finding_of_the_version(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, fault: str, kind: str, words: str) -> None:
    """``review HEAD --base BASE``: HEAD's reset kernel fails its proofs and
    differs from BASE's, and ends its process (or loops) when launched. The
    counterexample of its proofs and the diff's distinguishing input are
    replayed on HEAD in its own process: each a finding of HEAD naming the
    fault (the proofs' replay ran the kernel read from the source in the
    review's process, where the fault is not reached: "reproduced"), with
    its trace kept, exit 1, the JSON written.

    The lifecycle campaigns find the same fault; their counterexample is
    shrunk by one step here, not :data:`~replayssm.review.campaign.SHRINKS`:
    every step of a hang costs the watchdog and a fresh host (about 80 s of
    the test's 110 s), and a hang shrunk in full is
    :func:`test_a_kernel_that_never_returns_is_a_hang_finding_of_the_version`'s."""
    monkeypatch.setattr(review_campaign, "SHRINKS", 1)
    base = _faulty_version(tmp_path / "base", None, None)
    head = _faulty_version(tmp_path / "head", fault, ONLY_FRESH)
    report = tmp_path / "r.json"
    code = main(["review", str(head), "--base", str(base), "--examples", "1", "--watchdog", "2", "--budget", "4",
                 "--traces", str(tmp_path / "t"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 1, out
    (verdict,) = json.loads(report.read_text())["verdicts"]
    replays = [r for r in verdict["kernel_proofs"]["results"] if "replayed" in r]
    assert replays and all(r["replayed"] == "target fault" for r in replays), replays
    assert all(r["fault"]["kind"] == kind and words in r["fault"]["report"] and Path(r["trace"]).is_file()
               for r in replays), replays
    assert {k["property"] for k in verdict["kernel_findings"]} == {r["obligation"] for r in replays}
    assert all(f"the version's kernel is a {kind}" in k["message"] for k in verdict["kernel_findings"])
    (diff,) = [d for d in verdict["differences"] if d.get("evidence") == "proved" and d["kind"] != "equal"]
    assert diff["kind"] == "regression" and f"head breaks process: a {kind} of the target" in diff["message"], diff
    assert words in diff["kernel_diff"]["distinction"]["faults"]["head"] and Path(diff["trace"]).is_file()
    assert "Traceback" not in out
