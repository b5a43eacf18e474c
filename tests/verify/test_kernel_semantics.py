"""The symbolic interpreter against Triton: its interpreter (``TRITON_INTERPRET=1``,
CPU) and, on a GPU (the ``gpu`` marker), its compiled CUDA kernels.

Each small kernel runs twice on the same concrete inputs: on the ``device``
fixture's tensors through Triton, and through ``verify.kernels`` into Z3 with the initial
memory pinned to those inputs. Every output cell must agree: signed ``//`` and
``%`` (truncation toward zero), ``tl.cdiv`` (inlined from Triton's source),
int32/int64 promotion and casts, masks with and without ``other``, pointer
tables, runtime branches with an early return, runtime-bounded loops,
``tl.cumsum``/``tl.sum``, inlined jit helpers returning tuples. Unsupported
constructs are reported with their line.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import z3

from replayssm.verify.kernels.contracts import BufferArg, PointerTable, ProgramLaunch, ScalarArg
from replayssm.verify.kernels.evaluator import run_program
from replayssm.verify.kernels.kmemory import KernelMemory
from replayssm.verify.kernels.source import Unsupported
from replayssm.verify.terms import lift


N = 8


@triton.jit
def _divmod(x, y, q, r, c):
    i = tl.arange(0, 8)
    a = tl.load(x + i)
    b = tl.load(y + i)
    tl.store(q + i, a // b)
    tl.store(r + i, a % b)
    tl.store(c + i, tl.cdiv(a, b))


@triton.jit
def _masks(x, out, n, FILL: tl.constexpr):
    i = tl.arange(0, 8)
    v = tl.load(x + i, mask=i < n, other=FILL)
    both = (v > 0) & ~(v > 5) | (i == 7)
    tl.store(out + i, tl.where(both, tl.maximum(v, 2), tl.minimum(v, -2)))


@triton.jit
def _pair(a, b):
    return a + b, a - b


@triton.jit
def _branches(x, out, WIDE: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    if v < 0:
        return
    if v > 5:
        r = v * 2
    else:
        r = v - 1
    s, d = _pair(r, pid)
    if WIDE:
        s = s.to(tl.int64) * 3
    tl.store(out + pid, (s + d).to(tl.int32))


@triton.jit
def _loop(n_ptr, out, VALUE: tl.constexpr):
    n = tl.load(n_ptr)
    for k in range(n):
        tl.store(out + k, VALUE)
    for k in tl.static_range(2):
        tl.store(out + 6 + k, k + 100)


@triton.jit
def _accumulate(n_ptr, x, out):
    n = tl.load(n_ptr)
    acc = 0
    for k in range(n):
        acc = acc * 2 + tl.load(x + k)
        tl.store(out + k + 1, acc)
    tl.store(out, acc)


@triton.jit
def _scan(x, out, total):
    i = tl.arange(0, 8)
    on = (tl.load(x + i) > 0).to(tl.int32)
    running = tl.cumsum(on, axis=0)
    tl.store(out + i, running - on)
    tl.store(total, tl.sum(on, axis=0))


@triton.jit
def _table(ptrs, base_ptrs, strides, out):
    g = tl.program_id(0)
    row = tl.load(ptrs + g).to(tl.pointer_type(tl.int32))
    i = tl.arange(0, 4)
    base = tl.load(base_ptrs).to(tl.pointer_type(tl.int32))
    below = tl.load(base + ((g + 1) % 3) * tl.load(strides + g) + i)
    tl.store(out + g * 4 + i, tl.load(row + i) * (g + 1) + below)


@triton.jit
def _sorted(x, up, down):
    i = tl.arange(0, 8)
    v = tl.load(x + i)
    tl.store(up + i, tl.sort(v, dim=0))
    tl.store(down + i, tl.sort(v, descending=True))


@triton.jit
def _boolops(x, out, FLAG: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    r = 0
    if FLAG and v > 2:
        r = r + 1
    if v < 0 or FLAG:
        r = r + 10
    if (v > 0) and (v < 5):
        r = r + 100
    if (v == 3) or (v == -1) or False:
        r = r + 1000
    tl.store(out + pid, r)


def _symbolic(kernel, launch_args, constexprs, inputs: dict, shapes: dict, programs: list) -> dict:
    """Run ``kernel`` symbolically program after program; the final value of every cell of ``shapes``."""
    first = KernelMemory(shapes, {}, "p")
    mem = first
    for pid in programs:
        # the next program starts from the memory the previous one left
        mem = KernelMemory(shapes, {b: mem.current.get(b, mem.array(b)) for b in shapes}, "p")
        run_program(kernel, ProgramLaunch(launch_args, constexprs, pid), mem)
    s = z3.Solver()
    for b, values in inputs.items():
        for idx in np.ndindex(*values.shape):
            s.add(lift(first.initial(b, idx)) == int(values[idx]))
    assert s.check() == z3.sat
    m = s.model()
    return {b: np.array([m.eval(lift(mem.final(b, idx)), model_completion=True).as_long()
                         for idx in np.ndindex(*shape)]).reshape(shape) for b, shape in shapes.items()}


def test_signed_division_remainder_and_cdiv_truncate_toward_zero(device):
    x = np.array([7, -7, 7, -7, 0, -8, 9, -1], dtype=np.int32)
    y = np.array([2, 2, -2, -2, 3, 3, -4, 5], dtype=np.int32)
    t = {k: torch.from_numpy(v.copy()).to(device) for k, v in {"x": x, "y": y}.items()}
    outs = {k: torch.zeros(N, dtype=torch.int32, device=device) for k in ("q", "r", "c")}
    _divmod[(1,)](t["x"], t["y"], outs["q"], outs["r"], outs["c"])
    shapes = {"x": (N,), "y": (N,), "q": (N,), "r": (N,), "c": (N,)}
    got = _symbolic(_divmod, [BufferArg(b) for b in ("x", "y", "q", "r", "c")], {}, {"x": x, "y": y}, shapes, [(0,)])
    for b in ("q", "r", "c"):
        assert got[b].tolist() == outs[b].cpu().tolist(), b
    assert got["q"][1] == -3 and got["r"][1] == -1  # C, not Python's -4 and 1


@pytest.mark.parametrize("n", [0, 3, 8])
def test_masks_other_and_logic(n, device):
    x = np.array([-3, 0, 1, 4, 6, 9, -9, 2], dtype=np.int32)
    out = torch.zeros(N, dtype=torch.int32, device=device)
    _masks[(1,)](torch.from_numpy(x.copy()).to(device), out, n, FILL=3)
    got = _symbolic(_masks, [BufferArg("x"), BufferArg("out"), ScalarArg(n)], {"FILL": 3}, {"x": x},
                    {"x": (N,), "out": (N,)}, [(0,)])
    assert got["out"].tolist() == out.cpu().tolist()


@pytest.mark.parametrize("wide", [False, True])
def test_runtime_branches_early_return_inlined_helper_and_casts(wide, device):
    x = np.array([-1, 0, 3, 6, 100, -5], dtype=np.int32)
    out = torch.full((6,), 42, dtype=torch.int32, device=device)
    _branches[(6,)](torch.from_numpy(x.copy()).to(device), out, WIDE=wide)
    got = _symbolic(_branches, [BufferArg("x"), BufferArg("out")], {"WIDE": wide}, {"x": x, "out": np.full(6, 42)},
                    {"x": (6,), "out": (6,)}, [(p,) for p in range(6)])
    assert got["out"].tolist() == out.cpu().tolist()


@pytest.mark.parametrize("n", [0, 2, 5])
def test_runtime_bounded_loop_and_static_range(n, device):
    out = torch.full((8,), -1, dtype=torch.int32, device=device)
    _loop[(1,)](torch.tensor([n], dtype=torch.int32, device=device), out, VALUE=9)
    got = _symbolic(_loop, [BufferArg("n"), BufferArg("out")], {"VALUE": 9},
                    {"n": np.array([n]), "out": np.full(8, -1)}, {"n": (1,), "out": (8,)}, [(0,)])
    assert got["out"].tolist() == out.cpu().tolist()


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loop_carried_loop_is_unrolled(n, device):
    x = np.array([3, -1, 4, 1, 5, -9, 2, 6], dtype=np.int32)
    out = torch.full((9,), -7, dtype=torch.int32, device=device)
    _accumulate[(1,)](torch.tensor([n], dtype=torch.int32, device=device), torch.from_numpy(x.copy()).to(device), out)
    got = _symbolic(_accumulate, [BufferArg("n"), BufferArg("x"), BufferArg("out")], {},
                    {"n": np.array([n]), "x": x, "out": np.full(9, -7)}, {"n": (1,), "x": (8,), "out": (9,)}, [(0,)])
    assert got["out"].tolist() == out.cpu().tolist()


def test_unrolled_loop_bound_is_an_obligation():
    """The unrolled loop's bound holds exactly when the trip count stays within it."""
    mem = KernelMemory({"n": (1,), "x": (8,), "out": (9,)}, {}, "p")
    run = run_program(_accumulate, ProgramLaunch([BufferArg("n"), BufferArg("x"), BufferArg("out")], {}, (0,), max_trips=4),
                      mem)
    (trips, bound, guard, line, _), = run.loop_bounds
    assert bound == 4 and line == inspect.getsourcelines(_accumulate.fn)[1] + 4  # the for
    n = mem.initial("n", (0,))
    for value, fits in ((4, True), (5, False)):
        s = z3.Solver()
        s.add(lift(n) == value, z3.Not(z3.Implies(guard, trips <= bound)))
        assert (s.check() == z3.unsat) == fits


def test_cumsum_and_sum(device):
    x = np.array([1, 0, 5, -2, 7, 7, 0, 3], dtype=np.int32)
    out = torch.zeros(N, dtype=torch.int32, device=device)
    total = torch.zeros(1, dtype=torch.int32, device=device)
    _scan[(1,)](torch.from_numpy(x.copy()).to(device), out, total)
    got = _symbolic(_scan, [BufferArg("x"), BufferArg("out"), BufferArg("total")], {}, {"x": x},
                    {"x": (N,), "out": (N,), "total": (1,)}, [(0,)])
    assert got["out"].tolist() == out.cpu().tolist() and got["total"].tolist() == total.tolist()


def test_sort_ascending_and_descending(device):
    x = np.array([5, -3, 7, 0, 5, 2147483647, -2147483648, 1], dtype=np.int32)
    up, down = (torch.zeros(N, dtype=torch.int32, device=device) for _ in range(2))
    _sorted[(1,)](torch.from_numpy(x.copy()).to(device), up, down)
    got = _symbolic(_sorted, [BufferArg("x"), BufferArg("up"), BufferArg("down")], {}, {"x": x},
                    {"x": (N,), "up": (N,), "down": (N,)}, [(0,)])
    assert got["up"].tolist() == up.cpu().tolist() and got["down"].tolist() == down.cpu().tolist()


@pytest.mark.parametrize("flag", [False, True])
def test_and_or_on_scalars_short_circuit_constexprs(flag, device):
    x = np.array([3, -1, 0, 4, 7], dtype=np.int32)
    out = torch.zeros(5, dtype=torch.int32, device=device)
    _boolops[(5,)](torch.from_numpy(x.copy()).to(device), out, FLAG=flag)
    got = _symbolic(_boolops, [BufferArg("x"), BufferArg("out")], {"FLAG": flag}, {"x": x},
                    {"x": (5,), "out": (5,)}, [(i,) for i in range(5)])
    assert got["out"].tolist() == out.cpu().tolist()


def test_pointer_table_rows(device):
    rows = np.arange(12, dtype=np.int32).reshape(3, 4) * 3 - 5
    tensors = [torch.from_numpy(rows[g].copy()).to(device) for g in range(3)]
    whole = torch.from_numpy(rows.copy()).to(device)
    ptrs = torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=device)
    base_ptrs = torch.tensor([whole.data_ptr()], dtype=torch.int64, device=device)
    out = torch.zeros(12, dtype=torch.int32, device=device)
    _table[(3,)](ptrs, base_ptrs, torch.tensor([4, 4, 4], dtype=torch.int64, device=device), out)
    from replayssm.verify.kernels.contracts import StrideTable

    # ptrs: one row each (the row fixed, offsets move the column); base_ptrs:
    # the whole table (an offset scaled by the row stride moves the row)
    table = PointerTable("ptrs", "rows", lambda g: (g, 0), 1)
    base = PointerTable("base_ptrs", "rows", lambda g: (0, 0), 0)
    strides = StrideTable("strides", "rows", 0, lambda g: 4)
    got = _symbolic(_table, [table, base, strides, BufferArg("out")], {}, {"rows": rows},
                    {"rows": (3, 4), "ptrs": (3,), "base_ptrs": (1,), "strides": (3,), "out": (12,)},
                    [(g,) for g in range(3)])
    assert got["out"].tolist() == out.cpu().tolist()


@triton.jit
def _unsupported(x, out):
    v = tl.load(x)
    while v > 0:
        v = v - 1
    tl.store(out, v)


def test_unsupported_construct_is_reported_with_its_line():
    mem = KernelMemory({"x": (1,), "out": (1,)}, {}, "p")
    with pytest.raises(Unsupported) as err:
        run_program(_unsupported, ProgramLaunch([BufferArg("x"), BufferArg("out")], {}, (0,)), mem)
    line = inspect.getsourcelines(_unsupported.fn)[1] + 3
    assert err.value.construct == "statement While" and err.value.line == line
    assert err.value.file.endswith("test_kernel_semantics.py")
