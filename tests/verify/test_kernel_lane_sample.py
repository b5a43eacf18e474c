"""A block evaluated at sampled lanes (``contracts.LaneSample``), against Triton.

A wide block is proved at a few of its lanes, each at a symbolic position:
here the positions are pinned, and the sampled lanes' stores must be what
those lanes of the real block store (Triton's interpreter, or CUDA with the
``gpu`` marker), the block's reduction exact when its attaining lane is
sampled. What a sample cannot stand for is refused by name: a scan, a second
reduction, a reduction inside a loop's symbolic iteration, a reduction with
no witness lane, a read of a buffer after a store through the block.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import z3

from replayssm.verify.kernels import builtins as kb
from replayssm.verify.kernels.contracts import BufferArg, LaneSample, ProgramLaunch
from replayssm.verify.kernels.evaluator import run_program
from replayssm.verify.kernels.kmemory import KernelMemory
from replayssm.verify.kernels.source import Unsupported
from replayssm.verify.terms import lift

WIDTH = 8


@triton.jit
def _widest(spans, out, ROWS: tl.constexpr):
    """Per row, mark columns ``0 .. span - 1`` with the row and the widest span."""
    rows = tl.arange(0, ROWS)
    span = tl.load(spans + rows)
    widest = tl.max(span, axis=0)
    for k in tl.range(0, widest):
        tl.store(out + rows * 8 + k, rows * 100 + widest, mask=k < span)


def _sampled(kernel, positions, inputs: dict, shapes: dict) -> tuple[dict, object]:
    """The final value of every cell of ``shapes`` after ``kernel`` at sampled lanes ``positions``, and the run."""
    mem = KernelMemory(shapes, {}, "p")
    sample = LaneSample(WIDTH, tuple(lift(p) for p in positions))
    run = run_program(kernel, ProgramLaunch([BufferArg(b) for b in shapes], {"ROWS": WIDTH}, (0,), lanes=sample), mem)
    s = z3.Solver()
    for b, values in inputs.items():
        for idx in np.ndindex(*values.shape):
            s.add(lift(mem.initial(b, idx)) == int(values[idx]))
    assert s.check() == z3.sat
    m = s.model()
    return {b: np.array([m.eval(lift(mem.final(b, idx)), model_completion=True).as_long()
                         for idx in np.ndindex(*shape)]).reshape(shape) for b, shape in shapes.items()}, run


def _compare(device, positions) -> tuple[list, list]:
    """The cells of the sampled rows: symbolic at the sample, and Triton's."""
    spans = np.array([2, 0, 5, 1, 3, 0, 1, 4], dtype=np.int32)
    out = torch.full((WIDTH * 8,), -1, dtype=torch.int32, device=device)
    _widest[(1,)](torch.from_numpy(spans.copy()).to(device), out, ROWS=WIDTH)
    got, run = _sampled(_widest, positions, {"spans": spans, "out": np.full(WIDTH * 8, -1)},
                        {"spans": (WIDTH,), "out": (WIDTH * 8,)})
    assert all(len(lanes) == len(positions) for lanes in run.block_stores + run.block_loads)
    rows = sorted(positions)
    real = out.cpu().numpy().reshape(WIDTH, 8)
    return got["out"].reshape(WIDTH, 8)[rows].tolist(), real[rows].tolist()


@pytest.mark.parametrize("positions", [(0, 3, 2), (6, 7, 2), (5, 2, 7)])
def test_sampled_lanes_store_what_those_lanes_of_the_block_store(positions, device):
    """Lane 2 has the widest span (5): with it sampled the reduction is the block's."""
    symbolic, real = _compare(device, positions)
    assert symbolic == real


def test_a_sample_without_the_attaining_lane_differs():
    """Why the witness lane: without lane 2 the reduction is the sample's, not the block's."""
    symbolic, real = _compare(torch.device("cpu"), (0, 3, 4))
    assert symbolic != real


def test_lanes_at_the_wrong_positions_are_caught(monkeypatch):
    """Teeth: an ``arange`` that ignores the sample (lane k at position k) stores the wrong rows."""
    right = kb.arange
    monkeypatch.setattr(kb, "arange", lambda start, end, sample=None: right(
        start, end, None if sample is None else LaneSample(sample.width, tuple(lift(i) for i in range(3)))))
    symbolic, real = _compare(torch.device("cpu"), (6, 7, 2))
    assert symbolic != real


@triton.jit
def _scan(x, out, ROWS: tl.constexpr):
    i = tl.arange(0, ROWS)
    tl.store(out + i, tl.cumsum(tl.load(x + i), axis=0))


@triton.jit
def _two_reductions(x, out, ROWS: tl.constexpr):
    i = tl.arange(0, ROWS)
    v = tl.load(x + i)
    tl.store(out + i, v + tl.max(v, axis=0) + tl.min(v, axis=0))


@triton.jit
def _reduction_in_a_loop(x, out, ROWS: tl.constexpr):
    i = tl.arange(0, ROWS)
    for k in tl.range(0, tl.load(x)):
        tl.store(out + i * 0 + k, tl.max(tl.load(x + i) + k, axis=0), mask=i == 0)


@triton.jit
def _read_after_block_store(x, out, ROWS: tl.constexpr):
    i = tl.arange(0, ROWS)
    tl.store(out + i, tl.load(x + i))
    tl.store(x + i, tl.load(out + (i + 1) % ROWS))


@pytest.mark.parametrize("kernel, positions, why", [
    (_scan, (0, 1, 2), "tl.cumsum/tl.sum over sampled lanes"),
    (_two_reductions, (0, 1, 2), "at most 1 reduction per program"),
    (_reduction_in_a_loop, (0, 1, 2), "inside a loop's symbolic iteration"),
    (_two_reductions, (4,), "at least 2 sampled lanes"),
    (_read_after_block_store, (0, 1, 2), "a load of out after a store to it through sampled lanes"),
], ids=["scan", "two reductions", "reduction in a loop", "no witness", "read after a block store"])
def test_what_sampled_lanes_cannot_stand_for_is_refused(kernel, positions, why):
    mem = KernelMemory({"x": (WIDTH,), "out": (WIDTH,)}, {}, "p")
    sample = LaneSample(WIDTH, tuple(lift(p) for p in positions))
    with pytest.raises(Unsupported, match=why):
        run_program(kernel, ProgramLaunch([BufferArg("x"), BufferArg("out")], {"ROWS": WIDTH}, (0,), lanes=sample), mem)
    # the whole block, every lane evaluated, is no sample: the same kernels run
    if kernel is not _read_after_block_store and kernel is not _reduction_in_a_loop:
        run_program(kernel, ProgramLaunch([BufferArg("x"), BufferArg("out")], {"ROWS": WIDTH}, (0,)),
                    KernelMemory({"x": (WIDTH,), "out": (WIDTH,)}, {}, "p"))
