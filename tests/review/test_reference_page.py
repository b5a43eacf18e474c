"""The reference module rebuilt from its documentation page runs at the fuzzer's context level on CPU.

A decode step that crosses a block boundary into a new live column makes the page's
``ReplaySSMModelContext`` call the materialize backend with address tables built from
bare addresses (vLLM's ``_cuda_i64_ptrs``); the torch backend resolves them because the
harness registers the layer tensors it allocates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from replayssm.fuzz.actions import Migrate, Postprocess
from replayssm.fuzz.launcher import ContextSide, Setup, SpecSide, compare
from replayssm.fuzz.target import load_target
from replayssm.spec.assumptions import GhostRow, encode_row
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec import corpus
ALIGN = Conventions(cumulative=False, post_step=False, has_idx_mapping=False, materialize_prefixes=True,
                    live_col_is_zero=False)


def _postprocess(row: GhostRow, table: list) -> Postprocess:
    picks = {"idx_mapping": None, "query_metadata": [0], "num_computed_tokens": [0, 0],
             "num_accepted_tokens": [0, 0], "is_prefilling": [False], "live_cols": [0, 0]}
    for buf, (i,), value in encode_row(ALIGN, 0, row):
        picks[buf][i] = bool(value) if buf == "is_prefilling" else int(value)
    return Postprocess(1, **picks, block_table=table)


@pytest.mark.corpus
def test_reference_page_module_runs_at_context_level_in_align_mode() -> None:
    module = load_target(str(corpus.reference_page()), level="context")
    setup = Setup(Geometry(max_num_reqs=2, block_size=4, window=4, ring_len=8), ALIGN, (2, 1), num_cols=3, num_slots=8)
    spec, ctx = SpecSide(setup), ContextSide(setup, module, torch.device("cpu"))
    table = [[[1, 2, 0], [0, 0, 0]], [[3, 4, 0], [0, 0, 0]]]
    actions = [
        _postprocess(GhostRow(0, 3, 0, True, 0, 0), table),  # prefill of 3 tokens in column 0
        Migrate(1, None, [0, -1], [1, -1], table),
        _postprocess(GhostRow(3, 2, 2, False, 1, 0), table),  # decode 3 -> 5 publishes column 0 from column 1
    ]
    for action in actions:
        spec.run(action)
        ctx.run(action)
        assert compare(spec.state(), ctx.state()) == []
    assert ctx.state()["plan_flush_count"][0] >= 1 and ctx.state()["active_request_indices"][0] == 0
