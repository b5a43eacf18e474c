"""Item 3: a file as it is in a vLLM checkout loads with the stub; bad files are named errors."""

from __future__ import annotations

import sys

import pytest

from replayssm.base.targets import TargetError, load_source

from review_corpus import VERSIONS, needs_corpus, unmodified


@needs_corpus
@pytest.mark.parametrize("label", VERSIONS)
def test_unmodified_file_loads_with_the_stub(label: str, tmp_path) -> None:
    path = unmodified(label, tmp_path)
    text = path.read_text()
    assert "from vllm.triton_utils import tl, triton" in text and "NULL_BLOCK_ID = 0" not in text
    module = load_source(path)
    assert module.NULL_BLOCK_ID == 0
    assert not any(k == "vllm" or k.startswith("vllm.") for k in sys.modules), "the stub stays injected"


def test_a_vllm_name_the_stub_lacks_is_named(tmp_path) -> None:
    bad = tmp_path / "ssu_dispatch.py"
    bad.write_text("from vllm.v1.attention.backends.utils import NULL_BLOCK_ID, NOT_A_NAME\n")
    with pytest.raises(TargetError, match="NOT_A_NAME"):
        load_source(bad)
    bad.write_text("from vllm.distributed import get_tp_group\n")
    with pytest.raises(TargetError, match="vllm.distributed"):
        load_source(bad)


def test_a_file_that_does_not_parse_is_named(tmp_path) -> None:
    bad = tmp_path / "ssu_dispatch.py"
    bad.write_text("def broken(:\n")
    with pytest.raises(TargetError, match="does not parse: line 1"):
        load_source(bad)
