"""FlashInfer's CUDA materialize against the torch reference (GPU only).

Both backends follow the same rounding steps, so they differ only where
float32 intermediates differ slightly (FlashInfer's ``__expf``, max error
``2 + 1.2|x|`` ulp; its parallel scan and tensor-core summation order):

* a scaled B row element may round to the neighbouring bfloat16 value: at most
  one bf16 ulp, ``<= 2^-7 |B'|``, per term;
* float32 sums and products: ``<= 2 (K + 2) 2^-24`` relative to the
  magnitudes involved on each side; the decay ``exp(total)`` differs by
  ``<= (2 + 1.2 |total|) 2^-23`` relatively;
* the final rounding to the state dtype may then pick the neighbouring value:
  one ulp of the state dtype, ``<= 2^-23, 2^-7, 2^-10`` relative for float32,
  bfloat16, float16 (plus the smallest subnormal step near zero).

``tolerance`` below adds these terms per element. A zero-length replay is an
exact copy in both and must match bit for bit. docs/gpu.md has the derivation.
``test_comparison_harness_has_teeth`` runs the same comparison on every device
with the torch backend on both sides (exact agreement) and with a planted bug.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

from impl_builders import Model, i32, make_model

H, D, N, G = 6, 64, 128, 2
WINDOW, RING = 16, 20
ULP = {torch.float32: 2.0**-23, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}
TINY = {torch.float32: 2.0**-149, torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# row -> (src, dst, ring start, replay length): wrap at 20, full window, zero length,
# short replay; row 4 has a plan but is not listed, so nothing may write slot 13.
# (Entries after the first -1 must be -1: FlashInfer's persistent CTAs each stop
# only at the -1 they meet, so [.., -1, 4] did write slot 13 on an H200.)
PLAN = {0: (1, 9, 18, 5), 1: (2, 10, 7, 16), 2: (3, 11, 12, 0), 3: (4, 12, 0, 3), 4: (5, 13, 0, 2)}
ACTIVE = [3, 1, 0, 2, -1, -1]


def model(state_dtype: torch.dtype, device: torch.device | None = None) -> Model:
    device = device if device is not None else torch.device("cuda")
    return make_model(device, [[[1, 2]] * 6], layers_per_group=[3], num_slots=[16],
                      max_num_reqs=6, heads=H, dim=D, dstate=N, groups=G, window=WINDOW, ring=RING,
                      state_dtype=state_dtype)


def set_plan(m: Model) -> None:
    ctx = m.ctx
    for row, (src, dst, start, count) in PLAN.items():
        ctx.src_slots[:, row] = src
        ctx.dst_slots[:, row] = dst
        ctx.plan_ring_start[row] = start
        ctx.plan_flush_count[row] = count
    ctx.src_slots[1, 3] = 0  # layer 1 of row 3: pad source
    ctx.dst_slots[2, 0] = 0  # layer 2 of row 0: pad destination
    ctx.active_request_indices.copy_(i32(ACTIVE, ctx.device))


def tolerance(layer, src: int, start: int, count: int, dtype: torch.dtype) -> torch.Tensor:
    """Per-element bound on |FlashInfer - torch| for one replay (see module docstring)."""
    state, x, dt, b = (layer.kv_cache[i][src].double() for i in (1, 2, 3, 4))
    a = layer.A.double()
    rows = [(start + k) % RING for k in range(count)]
    cum = a[:, None] * torch.cumsum(dt[:, rows], dim=1)
    total = cum[:, -1]
    coeff = torch.exp(total[:, None] - cum) * dt[:, rows]  # (H, K)
    b_heads = b[torch.arange(H, device=b.device) // (H // G)][:, rows]  # (H, K, N)
    terms = torch.einsum("hkd,hkn->hdn", x[:, rows].abs(), (b_heads * coeff[..., None]).abs())
    terms = terms * (1 + 2.0**-7)
    decayed = state.abs() * torch.exp(total)[:, None, None]
    ref = decayed + terms
    return (2.0**-7 * terms + 2 * (count + 2) * 2.0**-24 * (decayed + terms)
            + (2 + 1.2 * total.abs())[:, None, None] * 2.0**-23 * decayed
            + ULP[dtype] * ref + TINY[dtype])


def report(entry: dict) -> None:
    path = os.environ.get("REPLAYSSM_GPU_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def compare(candidate: str, dtype: torch.dtype, device: torch.device, tamper=None) -> dict:
    """Materialize one plan with ``candidate`` and with torch; check and return statistics."""
    fi, ref = model(dtype, device), model(dtype, device)
    for m in (fi, ref):
        set_plan(m)
    if tamper is not None:
        tamper(fi.ctx)
    before = [[t.clone() for t in layer.kv_cache] for layer in fi.groups[0]]
    fi.ctx.materialize(candidate)
    ref.ctx.materialize("torch")
    if device.type == "cuda":
        torch.cuda.synchronize()
    written = {(layer, PLAN[row][1]) for row in (3, 1, 0, 2) for layer in range(3)}
    written -= {(1, PLAN[3][1]), (2, PLAN[0][1])}
    worst_ratio, max_abs, differing, total_elems = 0.0, 0.0, 0, 0
    for li, (lf, lr, old) in enumerate(zip(fi.groups[0], ref.groups[0], before)):
        for i in (0, 2, 3, 4):
            assert torch.equal(lf.kv_cache[i], old[i]), f"layer {li} kv_cache[{i}] written"
        sf, sr = lf.kv_cache[1], lr.kv_cache[1]
        for s in range(sf.shape[0]):
            if (li, s) not in written:
                assert torch.equal(sf[s], old[1][s]), f"layer {li} slot {s} touched"
                assert torch.equal(sr[s], old[1][s]), f"torch: layer {li} slot {s} touched"
        for row in (3, 1, 0, 2):
            src, dst, start, count = PLAN[row]
            if (li, dst) not in written:
                continue
            if count == 0:
                assert torch.equal(sf[dst], old[1][src]), "zero-length replay not bit-exact"
                assert torch.equal(sr[dst], sf[dst])
                continue
            tol = tolerance(_Frozen(lf, old), src, start, count, dtype)
            diff = (sf[dst].double() - sr[dst].double()).abs()
            assert bool(torch.isfinite(sf[dst].double()).all())
            ratio = (diff / tol).max().item()
            assert ratio <= 1.0, f"layer {li} row {row}: |diff| / tol = {ratio}"
            assert not torch.equal(sf[dst], old[1][dst])
            worst_ratio = max(worst_ratio, ratio)
            max_abs = max(max_abs, diff.max().item())
            differing += int((sf[dst] != sr[dst]).sum())
            total_elems += diff.numel()
    return {"dtype": str(dtype), "max_abs_diff": max_abs, "worst_diff_over_tol": worst_ratio,
            "elements_not_bit_equal": differing, "elements_compared": total_elems}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flashinfer_matches_torch_reference(dtype: torch.dtype) -> None:
    report({"test": "materialize", **compare("flashinfer", dtype, torch.device("cuda"))})


def test_comparison_harness_has_teeth(device: torch.device) -> None:
    """The comparison itself, run with torch on both sides: exact, and a planted bug fails it."""
    stats = compare("torch", torch.bfloat16, device)
    assert stats["max_abs_diff"] == 0.0 and stats["elements_compared"] > 0
    with pytest.raises(AssertionError, match="tol"):
        compare("torch", torch.bfloat16, device,
                tamper=lambda ctx: setattr(ctx, "ring_buffer_len", RING - 1))


class _Frozen:
    def __init__(self, layer, caches) -> None:
        self.kv_cache = caches
        self.A = layer.A


@pytest.mark.gpu
def test_postprocess_step_with_flashinfer_backend() -> None:
    """A decode step crossing a boundary, published by FlashInfer vs by torch."""
    runs = []
    for backend in ("flashinfer", "torch"):
        m = model(torch.bfloat16)
        m.ctx.materialize_backend = backend
        start, committed = m.trackers(0)
        start[2], committed[2] = 17, 5  # live slot of row 0: 5 committed rows from 17
        before = [[t.clone() for t in layer.kv_cache] for layer in m.groups[0]]
        m.ctx.postprocess(
            idx_mapping=None, query_metadata=i32([4] * 6, m.ctx.device),
            query_metadata_is_cumulative=False, num_computed_tokens=i32([6] * 6, m.ctx.device),
            num_computed_is_post_step=False, num_accepted_tokens=i32([3] * 6, m.ctx.device),
            is_prefilling=torch.zeros(6, dtype=torch.bool, device=m.ctx.device),
            live_cols=i32([1] * 6, m.ctx.device), num_reqs=1,
        )
        runs.append(m)
    fi, ref = runs
    # 6 -> 9 crosses 8 (block size 4): replay 1 + 1 + 5 rows from 17 (wraps) into block 1.
    # Block 1 is also the live block here (slot 2), so its trackers become (0, 0).
    assert fi.ctx.plan_ring_start[0].item() == 17 and fi.ctx.plan_flush_count[0].item() == 7
    assert fi.trackers(0)[0].tolist() == ref.trackers(0)[0].tolist()
    assert fi.trackers(0)[1].tolist() == ref.trackers(0)[1].tolist()
    worst = 0.0
    for lf, lr, old in zip(fi.groups[0], ref.groups[0], before):
        diff = (lf.kv_cache[1][2].double() - lr.kv_cache[1][2].double()).abs()
        ratio = (diff / tolerance(_Frozen(lf, old), 2, 17, 7, torch.bfloat16)).max().item()
        assert ratio <= 1.0, ratio
        assert not torch.equal(lf.kv_cache[1][2], old[1][2])
        worst = max(worst, ratio)
    report({"test": "postprocess_step", "worst_diff_over_tol": worst})
