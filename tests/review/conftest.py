"""Fixtures the review tests share: built once per session where the tests
only read what was built."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def a1_review(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Corpus version A1 reviewed once (``--examples 4 --seed 0``), every
    report written: ``out`` (the folder, with ``traces/``), the ``html``
    page's text, the ``verdict`` of its JSON and the ``sarif`` document.
    Read by ``test_report_for_people`` and ``test_finding_location``, which
    only read it (a test that changes a version reviews a copy of its own).
    The review gets an empty proof cache of its own: the per-test one
    (``proof_cache_folder``) is set only after a session fixture is made."""
    from replayssm.cli import main
    from replayssm.spec import corpus

    out = tmp_path_factory.mktemp("a1-review")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REPLAYSSM_VERIFY_CACHE", str(tmp_path_factory.mktemp("a1-review-proof-cache")))
        status = main(["review", str(corpus.versions() / "A1.py"), "--examples", "4", "--seed", "0",
                       "--traces", str(out / "traces"), "--json", str(out / "review.json"),
                       "--html", str(out / "review.html"), "--sarif", str(out / "review.sarif")])
    assert status == 1
    return {"out": out, "html": (out / "review.html").read_text(),
            "verdict": json.loads((out / "review.json").read_text())["verdicts"][0],
            "sarif": json.loads((out / "review.sarif").read_text())}
