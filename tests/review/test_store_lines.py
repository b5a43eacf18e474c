"""``review/store_lines.py``'s watch on Triton's interpreter's stores, run here on a kernel of this test (the
target's process runs it around a launch of the version's kernels; its record is read by
``tests/review/test_report_for_people.py``): each store's line (a statement over several lines by its first), the
cells it wrote with their values, the interpreter left as it was; a watch that cannot read a store leaves the
launch as it is."""

from __future__ import annotations

import inspect
import os

import pytest
import torch

triton = pytest.importorskip("triton")
tl = triton.language

from replayssm.review.store_lines import recorded_stores  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the watch reads Triton's interpreter (TRITON_INTERPRET=1)")


@triton.jit
def _two_stores(x, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x + i, i + 10, mask=i < n)
    tl.store(
        x + 1,
        7,
    )


def _line(text: str) -> int:
    source, first = inspect.getsourcelines(_two_stores.fn)
    [n] = [first + k for k, line in enumerate(source) if line.strip() == text]
    return n


def test_each_store_names_its_line_and_the_cells_it_wrote() -> None:
    from triton.runtime import interpreter

    x = torch.zeros(8, dtype=torch.int32)
    region = [[x.data_ptr(), x.data_ptr() + 4 * 4, 4]]  # the first 4 elements only
    with recorded_stores(region, relocate=lambda a: a) as found:
        _two_stores[(1,)](x, 6, BLOCK=8)
    assert x.tolist() == [10, 7, 12, 13, 14, 15, 0, 0]
    assert [(s["line"], s["function"], s["cells"]) for s in found["stores"]] == [
        (_line("tl.store(x + i, i + 10, mask=i < n)"), "_two_stores", [[0, 0, 10], [0, 1, 11], [0, 2, 12], [0, 3, 13]]),
        (_line("tl.store("), "_two_stores", [[0, 1, 7]])]
    assert all(s["file"] == __file__ for s in found["stores"])
    assert "create_masked_store" not in vars(interpreter.interpreter_builder)  # the builder's own method again


def test_teeth_a_watch_that_cannot_read_a_store_leaves_the_launch_as_it_is() -> None:
    x = torch.zeros(8, dtype=torch.int32)
    broken = [[x.data_ptr(), x.data_ptr() + 16, "4"]]  # an element size no address divides by
    with recorded_stores(broken, relocate=lambda a: a) as found:
        _two_stores[(1,)](x, 6, BLOCK=8)
    assert x.tolist() == [10, 7, 12, 13, 14, 15, 0, 0] and found["stores"] == []
