"""Integer bitwise operators in the symbolic interpreter against Triton.

``&``, ``|``, ``^``, ``~``, ``<<``, ``>>`` on int32 and int64 blocks, runtime
and constexpr operands, on edge values (0, -1, INT_MIN, INT_MAX, powers of
two and their neighbours) and seeded random ones: every output cell the
interpreter computes into Z3 equals Triton's, except a left shift that
carries bits out of its type, which the model keeps exact (the ``int32``
obligation's overflow) while the machine wraps. A shift amount outside
``0 .. bits - 1`` (undefined in Triton) is a failing ``int32`` part.

Teeth: our kernel with its ring wrap written as a mask is proved equivalent
for a ring of 16 rows and fails, replayably, for a ring of 20.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import z3

from replayssm.impl import kernels
from replayssm.verify.kernels.bitwise import SHIFT
from replayssm.verify.kernels.contracts import BufferArg, ProgramLaunch
from replayssm.verify.kernels.evaluator import run_program
from replayssm.verify.kernels.kmemory import KernelMemory
from replayssm.verify.kernels.obligations import kernel_claim, register
from replayssm.verify.kernels.playback import playback
from replayssm.verify.kernels.report import explain
from replayssm.verify.obligation import Obligation, prove
from replayssm.verify.terms import lift

from kernel_mutants import Mutant, load_mutant

N = 32
OUTS = ("o_and", "o_or", "o_xor", "o_not", "o_shl", "o_shr", "o_cmask", "o_cand", "o_cshift", "o_fold")


@triton.jit
def _bits(x, y, s, o_and, o_or, o_xor, o_not, o_shl, o_shr, o_cmask, o_cand, o_cshift, o_fold,
          MASK: tl.constexpr, SH: tl.constexpr):
    i = tl.arange(0, 32)
    a = tl.load(x + i)
    b = tl.load(y + i)
    k = tl.load(s + i)
    tl.store(o_and + i, a & b)
    tl.store(o_or + i, a | b)
    tl.store(o_xor + i, a ^ b)
    tl.store(o_not + i, ~a)
    tl.store(o_shl + i, a << k)
    tl.store(o_shr + i, a >> k)
    tl.store(o_cmask + i, (a & MASK) + (b & -1) + (a | 0) - (b ^ 0))
    tl.store(o_cand + i, (a & 12) | (b & (MASK + 1)))
    tl.store(o_cshift + i, (a >> SH) ^ (b << 1) ^ (a >> 0))
    tl.store(o_fold + i, a * 0 + ((MASK << 2) ^ (SH >> 1) | (~MASK & 255)))


def _values(dtype: type, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    bits = info.bits
    edges = [0, 1, -1, 2, -2, 7, -8, info.min, info.max, info.min + 1, info.max - 1,
             2 ** (bits - 2), -(2 ** (bits - 2)), 2**16, -(2**16) - 1, 12345]
    rng = np.random.default_rng(seed)
    x = np.array(edges + list(rng.integers(info.min, info.max, N - len(edges), endpoint=True)), dtype=dtype)
    y = np.array(list(reversed(edges)) + list(rng.integers(info.min, info.max, N - len(edges), endpoint=True)),
                 dtype=dtype)
    k = np.array([0, 1, bits - 1, bits - 2] + list(rng.integers(0, bits - 1, N - 4, endpoint=True)), dtype=dtype)
    return x, y, k


def _symbolic(elem: str, consts: dict, inputs: dict) -> dict[str, list[int]]:
    """Every output cell of ``_bits`` computed into Z3 with the inputs pinned (exact Python ints)."""
    names = ("x", "y", "s", *OUTS)
    mem = KernelMemory({b: (N,) for b in names}, {}, "p")
    run_program(_bits, ProgramLaunch([BufferArg(b, elem) for b in names], consts, (0,)), mem)
    pinned = [lift(mem.initial(b, (i,))) == int(v[i]) for b, v in inputs.items() for i in range(N)]
    out = {}
    for o in OUTS:
        cells = [z3.substitute(lift(mem.final(o, (i,))), *[(p.arg(0), p.arg(1)) for p in pinned]) for i in range(N)]
        out[o] = [z3.simplify(c).as_long() for c in cells]
    return out


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@pytest.mark.parametrize("elem", ["i32", "i64"])
@pytest.mark.parametrize("seed", [0, 1])
def test_bitwise_operators_equal_triton(elem, seed, device):
    dtype, tdtype, bits = {"i32": (np.int32, torch.int32, 32), "i64": (np.int64, torch.int64, 64)}[elem]
    x, y, k = _values(dtype, seed)
    consts = {"MASK": 15, "SH": 3}
    t = [torch.from_numpy(v.copy()).to(device) for v in (x, y, k)]
    outs = {o: torch.zeros(N, dtype=tdtype, device=device) for o in OUTS}
    _bits[(1,)](*t, *outs.values(), **consts)
    got = _symbolic(elem, consts, {"x": x, "y": y, "s": k})
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    wrapped = 0
    for o in OUTS:
        want = outs[o].cpu().tolist()
        for lane, (g, w) in enumerate(zip(got[o], want)):
            if o in ("o_shl", "o_cshift", "o_cmask") and not lo <= g <= hi:
                # exact in the model (an overflow the int32 obligation flags); Triton wraps
                assert _wrap(g, bits) == w, (o, lane, x[lane], y[lane], k[lane])
                wrapped += 1
                continue
            assert g == w, (o, lane, int(x[lane]), int(y[lane]), int(k[lane]), g, w)
    assert wrapped > 0  # the edge values do carry bits out of the type


@triton.jit
def _shift_by(x, s, out, SH: tl.constexpr):
    i = tl.arange(0, 4)
    tl.store(out + i, (tl.load(x + i) << tl.load(s + i)) + (tl.load(x + i) >> SH))


def _shift_amount_parts(sh: int, elem: str = "i32") -> list[tuple[int, int, z3.ExprRef]]:
    mem = KernelMemory({"x": (4,), "s": (4,), "out": (4,)}, {}, "p")
    run = run_program(_shift_by, ProgramLaunch([BufferArg("x", elem), BufferArg("s", elem), BufferArg("out", elem)],
                                        {"SH": sh}, (0,)), mem)
    return [(*x.bounds(), x.term) for x in run.intermediates if x.what == SHIFT]


def _can_leave(parts: list, extra: list) -> bool:
    s = z3.Solver()
    s.add(*extra)
    s.add(z3.Or([z3.Or(lift(t) < lo, lift(t) > hi) for lo, hi, t in parts]))
    return s.check() == z3.sat


def test_shift_amount_out_of_range_is_an_int32_failure():
    parts = _shift_amount_parts(3)
    assert len(parts) == 8 and {(lo, hi) for lo, hi, _ in parts} == {(0, 31)}
    amounts = [lift(t) for _, _, t in parts if not z3.is_int_value(lift(t))]
    assert _can_leave(parts, [])  # a runtime amount may be anything: the obligation fails
    # teeth of the bound itself: amounts held inside 0..31 pass, a constexpr 32 fails
    assert not _can_leave(parts, [z3.And(a >= 0, a <= 31) for a in amounts])
    wide = _shift_amount_parts(32)
    held = [z3.And(lift(t) >= 0, lift(t) <= 31) for _, _, t in wide if not z3.is_int_value(lift(t))]
    assert _can_leave(wide, held)
    assert {(lo, hi) for lo, hi, _ in _shift_amount_parts(32, "i64")} == {(0, 63)}


RING_MASK = Mutant("ring wrap as a bit mask", "(old_start + old_committed) % RING_BUFFER_LEN",
                   "(old_start + old_committed) & (RING_BUFFER_LEN - 1)", "postprocess.equivalence")
"""Our kernel with the checkpoint's ring wrap written as a mask: right for a
ring of a power-of-two length (trackers inside the ring), wrong otherwise."""


def _prove_under_every_assumption(module, label: str, case: str):
    kc = kernel_claim(module, "postprocess", "equivalence", case)
    claim = replace(kc.claim, assumptions=[*kc.claim.assumptions, *kc.optional])
    name = f"kernel.postprocess.equivalence@{label}"
    return name, prove(Obligation(name, "postprocess", "", lambda: [claim]))


def test_ring_wrap_as_a_mask_is_equivalent_for_a_power_of_two_ring_only(tmp_path):
    module, path = load_mutant(RING_MASK, tmp_path)
    register(module, path.stem)
    pow2 = "pow2 len/pre/nomap/none/col0"
    assert kernel_claim(module, "postprocess", "equivalence", pow2).cases[0].constexprs["geometry"].ring_len == 16
    _, result = _prove_under_every_assumption(module, path.stem, pow2)
    assert result.status == "proved", result.detail
    twenty = "vllm len/pre/nomap/none/live"
    assert kernel_claim(module, "postprocess", "equivalence", twenty).cases[0].constexprs["geometry"].ring_len == 20
    name, result = _prove_under_every_assumption(module, path.stem, twenty)
    assert result.status == "failed"
    finding = explain(name, twenty, str(path))
    assert "differs from the spec even under every caller assumption" in finding.verdict, finding.text
    assert finding.trace is not None, finding.text
    seen = playback(finding.trace, module)
    assert seen.reproduces("equivalence"), f"not reproduced\n{finding.text}\n{seen.report()}"
    assert not seen.spec_fault
    assert not playback(finding.trace, kernels).reproduces("equivalence"), "the shipped kernel fails the same trace"
