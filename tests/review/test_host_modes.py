"""Which cache modes each version's host publishes prefixes in (``review/host_modes.py``), read from the
corpus: A1-era hosts publish in align and all, A3's and the reference's in align only, D3 computes no flag."""

from __future__ import annotations

import pytest

from replayssm.review.host_modes import describe, publishing_modes, version_publishing_modes
from replayssm.spec import corpus

PUBLISH_IN_ALL = ("A1", "A2", "A4", "A5", "B1", "B2", "B3", "C1", "C2", "D1", "D2")


@pytest.mark.corpus
@pytest.mark.parametrize("label", PUBLISH_IN_ALL + ("A3", "D3"))
def test_each_versions_host_map_is_read_from_its_source(label: str) -> None:
    want = {"A3": ("align",), "D3": None}.get(label, ("align", "all"))
    assert version_publishing_modes(str(corpus.versions() / f"{label}.py")) == want


@pytest.mark.corpus
def test_the_reference_page_publishes_in_align_only() -> None:
    assert version_publishing_modes(str(corpus.reference_page())) == ("align",)
    assert "all mode unpublished" in describe(("align",))


def test_the_map_evaluates_the_hosts_comparison_for_each_mode() -> None:
    assert publishing_modes('x(\n    materialize_prefixes=mode != "none",\n)') == ("align", "all")
    assert publishing_modes("materialize_prefixes = cache_mode not in ('all',)") == ("none", "align")
    assert publishing_modes("materialize_prefixes=materialize_prefixes,\nif self.materialize_prefixes:") is None
    assert publishing_modes('a.materialize_prefixes = m == "align"\nb.materialize_prefixes = m in ("align", "all")') is None
    assert describe(None).startswith("cache modes: not read")
