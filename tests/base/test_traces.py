"""``load_trace``: one read of a trace file says its kind, and a format version
it does not read, or a file that is no trace, is a ``ValueError`` naming why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayssm.base.traces import COUNTEREXAMPLE_ID, KINDS, RELEASE_ID, REVIEW_ID, TRACE_ID, load_trace, trace_kind

REPO = Path(__file__).resolve().parents[2]
SYSTEM = json.loads((REPO / "docs" / "traces" / "row_nonempty.json").read_text())
LAUNCH_PARAMS = {"geometry": {"max_num_reqs": 2, "block_size": 4, "window": 4, "ring_len": 8},
                 "layers_per_group": [1], "num_cols": 2, "num_slots": 4}

EXAMPLES = {
    "system": SYSTEM,
    "launch": {"#meta": {"format": TRACE_ID, "source": "fuzz"}, "params": LAUNCH_PARAMS, "actions": []},
    "review": {"#meta": {"format": REVIEW_ID, "versions": []}, "params": LAUNCH_PARAMS, "steps": []},
    "kernel": {"#meta": {"format": TRACE_ID, "source": "kernel-proof"}, "params": LAUNCH_PARAMS, "actions": []},
    "counterexample": {"schema": COUNTEREXAMPLE_ID, "obligation": "x", "assumptions": []},
    "release": {"#meta": {"format": RELEASE_ID, "source": "review --vllm"}, "launches": [], "events": []},
}
"""One document of each kind, as its writer lays it out."""


def _write(tmp_path: Path, document) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document))
    return path


def test_every_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_a_file_of_each_kind_is_told_apart(kind: str, tmp_path: Path) -> None:
    loaded = load_trace(_write(tmp_path, EXAMPLES[kind]))
    assert (loaded.kind, loaded.trace) == (kind, EXAMPLES[kind])
    assert trace_kind(EXAMPLES[kind]) == kind


@pytest.mark.parametrize("kind, edit, message", [
    ("review", lambda t: t["#meta"].update(format="replayssm-review-trace/2"),
     "trace format replayssm-review-trace/2 is not supported for a review trace: this version reads "
     "replayssm-review-trace/1"),
    ("counterexample", lambda t: t.update(schema="replayssm-counterexample/7"),
     "replayssm-counterexample/7 is not supported for a counterexample trace"),
    ("counterexample", lambda t: t.update(schema=3), "a counterexample file's schema must be replayssm-counterexample/1"),
    ("kernel", lambda t: t["#meta"].update(format="replayssm-trace/3"), "replayssm-trace/3 is not supported"),
    ("launch", lambda t: t["#meta"].update(format="replayssm-trace/3"), "replayssm-trace/3 is not supported"),
    ("launch", lambda t: t["#meta"].pop("format"), "#meta.format must be replayssm-trace/2, got None"),
    ("launch", lambda t: t["params"].update(num_slots=1 << 30), "params.num_slots must be an int in [1, 1048576]"),
    ("system", lambda t: t["#meta"].update(format="replayssm-trace/1"), "flat names"),
    ("system", lambda t: t.update({"#meta": []}), "trace.#meta must be an object, got []"),
])
def test_a_version_or_size_it_does_not_read_is_refused(kind: str, edit, message: str, tmp_path: Path) -> None:
    document = json.loads(json.dumps(EXAMPLES[kind]))
    edit(document)
    with pytest.raises(ValueError) as e:
        load_trace(_write(tmp_path, document))
    assert message in str(e.value), e.value


def test_files_written_before_a_kind_named_its_format_still_read(tmp_path: Path) -> None:
    kernel = json.loads(json.dumps(EXAMPLES["kernel"]))
    del kernel["#meta"]["format"]
    assert load_trace(_write(tmp_path, kernel)).kind == "kernel"
    scenario = {"obligation": "x"}
    assert load_trace(_write(tmp_path, scenario)).kind == "counterexample"


@pytest.mark.parametrize("text, message", [("{", "not a JSON trace"), ("[1]", "a trace is a JSON object, got list")])
def test_a_file_that_is_no_trace_is_refused(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_trace(path)


def test_a_fifo_a_device_or_a_loop_is_refused_without_waiting(tmp_path: Path) -> None:
    """``replay`` and ``explain`` of a FIFO with no writer, a character
    device, a folder or a symbolic-link loop: exit 2 naming what it is, at
    once (before, ``replay FIFO`` blocked in its open for ever and
    ``explain /dev/zero`` read without end)."""
    import os
    import subprocess
    import sys

    fifo, loop = tmp_path / "pipe.json", tmp_path / "loop.json"
    os.mkfifo(fifo)
    os.symlink(loop, loop)
    cases = [(fifo, "a FIFO (named pipe), not a trace file"), (Path("/dev/zero"), "a character device"),
             (tmp_path, "a folder, not a trace file"), (loop, "Too many levels of symbolic links")]
    for command in ("replay", "explain"):
        proc = subprocess.run([sys.executable, "-m", "replayssm.cli", command, str(fifo)], capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 2 and "a FIFO (named pipe), not a trace file" in proc.stderr, proc.stderr
    for path, message in cases:
        with pytest.raises((ValueError, OSError), match=message.replace("(", r"\(").replace(")", r"\)")):
            load_trace(path)
