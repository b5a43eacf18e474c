"""The interpreter's constructs for row-vectorized kernels, against Triton.

``tl.max``/``tl.min`` over a block (a runtime loop bound among them),
``tl.zeros_like``, masked loads and stores through a block of row pointers,
and a runtime branch a launch's facts decide. Each runs on Triton's
interpreter (or, with the ``gpu`` marker, compiled CUDA) and symbolically with
the initial memory pinned to the same inputs; every output cell must agree.
Each construct has a planted wrong semantics that the same comparison catches.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import z3

from replayssm.verify.kernels import builtins as kb
from replayssm.verify.kernels.contracts import BufferArg, ProgramLaunch, ScalarArg
from replayssm.verify.kernels.evaluator import run_program
from replayssm.verify.kernels.kmemory import KernelMemory
from replayssm.verify.terms import lift, named_int

from test_kernel_semantics import _symbolic

ROWS = 4


@triton.jit
def _reduce(x, lo, hi, zeros, ROWS: tl.constexpr):
    i = tl.arange(0, ROWS)
    v = tl.load(x + i)
    tl.store(hi, tl.max(v, axis=0))
    tl.store(lo, tl.min(v, axis=0))
    tl.store(zeros + i, tl.zeros_like(v) + 7)


@triton.jit
def _widest(spans, out, ROWS: tl.constexpr):
    """Per row, mark columns ``0 .. span - 1``: the loop runs to the widest span."""
    rows = tl.arange(0, ROWS)
    span = tl.load(spans + rows)
    for k in tl.range(0, tl.max(span, axis=0)):
        tl.store(out + rows * 8 + k, rows + 1, mask=k < span)


@triton.jit
def _half(x, out, n, ROWS: tl.constexpr):
    first = tl.program_id(0) * ROWS
    if first < n:
        rows = first + tl.arange(0, ROWS)
        tl.store(out + rows, tl.load(x + rows, mask=rows < n, other=-1) * 2, mask=rows < n)
    else:
        tl.store(out + tl.arange(0, ROWS), tl.zeros_like(tl.arange(0, ROWS)) - 5)


def _max_reduce(x, *a, **k):
    """A wrong ``tl.max``: the first lane."""
    return kb.as_scalar(x.lanes[0])


def _wrong_zeros(x):
    """A wrong ``tl.zeros_like``: ones."""
    return kb.lanewise(lambda v: kb.Scalar(lift(1), "i32"), x)


def _reduce_run(device):
    x = np.array([3, -9, 12, 0], dtype=np.int32)
    outs = {"lo": torch.zeros(1, dtype=torch.int32, device=device),
            "hi": torch.zeros(1, dtype=torch.int32, device=device),
            "zeros": torch.zeros(ROWS, dtype=torch.int32, device=device)}
    _reduce[(1,)](torch.from_numpy(x.copy()).to(device), outs["lo"], outs["hi"], outs["zeros"], ROWS=ROWS)
    got = _symbolic(_reduce, [BufferArg(b) for b in ("x", "lo", "hi", "zeros")], {"ROWS": ROWS}, {"x": x},
                    {"x": (ROWS,), "lo": (1,), "hi": (1,), "zeros": (ROWS,)}, [(0,)])
    return {b: (got[b].tolist(), outs[b].cpu().tolist()) for b in outs}


def test_max_min_and_zeros_like(device):
    for b, (symbolic, real) in _reduce_run(device).items():
        assert symbolic == real, b


@pytest.mark.parametrize("planted", ["max", "min", "zeros_like"])
def test_a_wrong_semantics_of_each_construct_is_caught(planted, monkeypatch):
    if planted == "max":
        monkeypatch.setattr(kb, "reduce_extremum", lambda kind, x, *a, **k: _max_reduce(x))
    elif planted == "min":
        # tl.min reduced as tl.max: tl.max stays right, so only ``lo`` can catch it
        right = kb.reduce_extremum
        monkeypatch.setattr(kb, "reduce_extremum", lambda kind, x, *a, **k: right("max", x, *a, **k))
    else:
        monkeypatch.setattr(kb, "zeros_like", _wrong_zeros)
    results = _reduce_run(torch.device("cpu"))
    assert any(s != r for s, r in results.values()), planted


def _widest_run(device, spans):
    spans = np.array(spans, dtype=np.int32)
    out = torch.full((ROWS * 8,), -1, dtype=torch.int32, device=device)
    _widest[(1,)](torch.from_numpy(spans.copy()).to(device), out, ROWS=ROWS)
    got = _symbolic(_widest, [BufferArg("spans"), BufferArg("out")], {"ROWS": ROWS},
                    {"spans": spans, "out": np.full(ROWS * 8, -1)}, {"spans": (ROWS,), "out": (ROWS * 8,)}, [(0,)])
    return got["out"].tolist(), out.cpu().tolist()


@pytest.mark.parametrize("spans", [[0, 0, 0, 0], [2, 0, 5, 1], [8, 8, 3, 0]])
def test_a_loop_to_the_widest_row_masks_each_row_to_its_own(spans, device):
    symbolic, real = _widest_run(device, spans)
    assert symbolic == real


def test_a_wrong_max_shortens_the_loop_and_is_caught(monkeypatch):
    monkeypatch.setattr(kb, "reduce_extremum", lambda kind, x, *a, **k: _max_reduce(x))
    symbolic, real = _widest_run(torch.device("cpu"), [1, 0, 5, 1])
    assert symbolic != real


@pytest.mark.parametrize("n", [0, 3, 4, 6])
def test_row_blocks_and_a_runtime_branch_on_the_block(n, device):
    x = np.arange(8, dtype=np.int32) * 3 - 4
    out = torch.full((8,), 9, dtype=torch.int32, device=device)
    _half[(2,)](torch.from_numpy(x.copy()).to(device), out, n, ROWS=ROWS)
    got = _symbolic(_half, [BufferArg("x"), BufferArg("out"), ScalarArg(n)], {"ROWS": ROWS},
                    {"x": x, "out": np.full(8, 9)}, {"x": (8,), "out": (8,)}, [(0,), (1,)])
    assert got["out"].tolist() == out.cpu().tolist()


def _stores_under(facts):
    """``(number of stores, how many store the else branch's constant -5)`` of ``_half`` under ``facts``."""
    n, block = named_int("n"), named_int("block")
    mem = KernelMemory({"x": (8,), "out": (8,)}, {}, "p")
    run_program(_half, ProgramLaunch([BufferArg("x"), BufferArg("out"), ScalarArg(n)], {"ROWS": ROWS}, (block,),
                              facts=tuple(f(block, n) for f in facts)), mem)
    constant = [w for w in mem.writes if z3.is_int_value(z3.simplify(lift(w.value)))]
    assert all(z3.simplify(lift(w.value)).as_long() == -5 for w in constant)
    return len(mem.writes), len(constant)


def test_launch_facts_decide_a_branch_and_only_then():
    """With facts that decide ``first < n`` only that branch's accesses exist
    (the then branch stores loaded values, the else branch the constant -5);
    without them, or with facts that leave both, both branches run, merged."""
    assert _stores_under(()) == (2 * ROWS, ROWS)
    assert _stores_under((lambda block, n: block * ROWS < n,)) == (ROWS, 0)
    assert _stores_under((lambda block, n: block * ROWS >= n,)) == (ROWS, ROWS)
    assert _stores_under((lambda block, n: block >= 0,)) == (2 * ROWS, ROWS)
    n, block = named_int("n"), named_int("block")
    s = z3.Solver()
    s.add(lift(block * ROWS < n), lift(block * ROWS >= n))
    assert s.check() == z3.unsat


def test_pruning_the_wrong_branch_is_caught(monkeypatch):
    """Teeth: a ``_decided`` that keeps the branch the facts refute."""
    from replayssm.verify.kernels.evaluator import KernelRun

    right = KernelRun._decided
    monkeypatch.setattr(KernelRun, "_decided", lambda self, c: (lambda d: d if d is None else not d)(right(self, c)))
    assert _stores_under((lambda block, n: block * ROWS < n,)) != (ROWS, 0)


@triton.jit
def _lanes(x, out, ROWS: tl.constexpr):
    i = tl.arange(0, ROWS)
    tl.store(out + i, tl.load(x + i) + tl.load(x))


def _mistagged(run) -> list:
    """The block accesses of ``_lanes`` whose lane tag is not the lane its index names."""
    from replayssm.verify.kernels.blocked import lane_of

    return [(i, lane) for i, lane in lane_of(run).items()
            if z3.simplify(lift(run.mem.accesses[i].index[0])).as_long() != lane]


def test_block_accesses_are_tagged_with_their_lane_and_scalar_ones_are_not():
    mem = KernelMemory({"x": (ROWS,), "out": (ROWS,)}, {}, "p")
    run = run_program(_lanes, ProgramLaunch([BufferArg("x"), BufferArg("out")], {"ROWS": ROWS}, (0,)), mem)
    from replayssm.verify.kernels.blocked import lane_of

    tagged = lane_of(run)
    assert len(tagged) == 2 * ROWS  # the block load and the block store; not the scalar load of x[0]
    assert len(mem.accesses) == 2 * ROWS + 1
    assert _mistagged(run) == []
    # teeth: lanes listed in reverse are caught
    run.block_loads[:] = [lanes[::-1] for lanes in run.block_loads]
    assert _mistagged(run) != []
