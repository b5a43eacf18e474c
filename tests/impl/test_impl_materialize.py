"""The torch materialize backend against an independent float64 recurrence.

Tolerances (design note section 7; u = unit roundoff, 2^-8 for bfloat16,
2^-11 for float16, 2^-24 for float32): each replayed B row is scaled and
rounded to bfloat16 (relative error <= u_bf16 per term), the rest runs in
float32 (a few u_f32 per operation over K + 2 terms), and the result is
rounded to the state dtype once (<= u_state relative). Per element:
``tol = u_bf16 * sum_k |x_k dt_k e_k B_k| + 8 (K + 2) u_f32 (|S| decay +
sum_k |...|) + u_state |ref|``.
"""

from __future__ import annotations

import re

import pytest
import torch

from impl_builders import Model, i32, make_model
from replayssm.impl.materialize import _load_replayssm_materialize, torch_replayssm_materialize
from replayssm.impl.pointers import i64_ptrs

H, D, N, G = 4, 6, 8, 2
WINDOW, RING = 16, 20
UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def model_for(device: torch.device, state_dtype: torch.dtype, layers: int = 2,
              max_num_reqs: int = 4) -> Model:
    return make_model(device, [[[1, 2]] * max_num_reqs], layers_per_group=[layers], num_slots=[12],
                      max_num_reqs=max_num_reqs, heads=H, dim=D, dstate=N, groups=G,
                      window=WINDOW, ring=RING, state_dtype=state_dtype)


def set_plan(model: Model, entries: dict[int, tuple[int, int, int, int]], active: list[int]) -> None:
    """entries: row -> (src, dst, ring start, replay length), for every layer."""
    ctx = model.ctx
    ctx.src_slots.fill_(0)
    ctx.dst_slots.fill_(0)
    ctx.plan_ring_start.fill_(0)
    ctx.plan_flush_count.fill_(-1)
    for row, (src, dst, start, count) in entries.items():
        ctx.src_slots[:, row] = src
        ctx.dst_slots[:, row] = dst
        ctx.plan_ring_start[row] = start
        ctx.plan_flush_count[row] = count
    ctx.active_request_indices.copy_(i32(active + [-1] * (ctx.max_num_reqs - len(active)), ctx.device))


def float64_replay(layer, src: int, start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequential recurrence in float64 and the per-element error budget."""
    state, x, dt, b = (layer.kv_cache[i][src].double().cpu() for i in (1, 2, 3, 4))
    a = layer.A.double().cpu()
    magnitude = torch.zeros(H, D, N, dtype=torch.float64)
    s = state.clone()
    decay_total = torch.ones(H, dtype=torch.float64)
    for k in range(count):
        r = (start + k) % RING
        step_decay = torch.exp(a * dt[:, r])
        b_heads = b[torch.arange(H) // (H // G), r]  # (H, N)
        term = dt[:, r, None, None] * x[:, r, :, None] * b_heads[:, None, :]
        s = s * step_decay[:, None, None] + term
        magnitude = magnitude * step_decay[:, None, None] + term.abs()
        decay_total = decay_total * step_decay
    return s, magnitude, state.abs() * decay_total[:, None, None]


# row 0: 3 rows from 2; row 1: full window 16 from 10 (wraps at 20);
# row 2: 5 rows from 18 (wraps); row 3: zero-length copy. Listed out of order.
PLAN = {0: (1, 5, 2, 3), 1: (2, 6, 10, 16), 2: (3, 7, 18, 5), 3: (4, 8, 0, 0)}
ACTIVE = [2, 0, 3, 1]


def check_against_float64(model: Model, before: list[list[torch.Tensor]],
                          state_dtype: torch.dtype) -> None:
    """Destinations within the error budget of the float64 replay; nothing else touched."""
    u_state = UNIT_ROUNDOFF[state_dtype]
    for layer, old in zip(model.groups[0], before):
        state = layer.kv_cache[1]
        for src, dst, start, count in PLAN.values():
            if count == 0:
                assert torch.equal(state[dst], old[1][src])
                continue
            # The reference reads the pre-call source (sources are never destinations here).
            ref, mag, decayed = float64_replay(_frozen(layer, old), src, start, count)
            got = state[dst].double().cpu()
            tol = (UNIT_ROUNDOFF[torch.bfloat16] * mag + 8 * (count + 2) * 2.0**-24 * (decayed + mag)
                   + u_state * ref.abs() + 1e-30)
            excess = ((got - ref).abs() - tol).max().item()
            assert excess <= 0, f"src {src} count {count}: error above budget by {excess}"
            assert not torch.equal(got, old[1][dst].double().cpu())
        written = {dst for _, dst, _, _ in PLAN.values()}
        for s in range(state.shape[0]):
            if s not in written:
                assert torch.equal(state[s], old[1][s]), f"slot {s} touched"
        for i in (0, 2, 3, 4):
            assert torch.equal(layer.kv_cache[i], old[i]), f"kv_cache[{i}] touched"


@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_float64_recurrence(device: torch.device, state_dtype: torch.dtype) -> None:
    model = model_for(device, state_dtype)
    set_plan(model, PLAN, ACTIVE)
    before = [[t.clone() for t in layer.kv_cache] for layer in model.groups[0]]
    model.ctx.materialize("torch")
    check_against_float64(model, before, state_dtype)


def test_teeth_wrong_ring_length_is_caught(device: torch.device) -> None:
    # Planted bug: the call claims a ring of 19 rows, so wrapped replays read
    # the wrong rows; the float64 comparison must notice.
    model = model_for(device, torch.float32)
    set_plan(model, PLAN, ACTIVE)
    before = [[t.clone() for t in layer.kv_cache] for layer in model.groups[0]]
    model.ctx.ring_buffer_len = RING - 1
    model.ctx.materialize("torch")
    with pytest.raises(AssertionError, match="error above budget"):
        check_against_float64(model, before, torch.float32)


class _frozen:
    """A layer view whose caches are the given pre-call copies."""

    def __init__(self, layer, caches: list[torch.Tensor]) -> None:
        self.kv_cache = caches
        self.A = layer.A


def test_zero_length_replay_is_bit_exact(device: torch.device) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        model = model_for(device, dtype)
        set_plan(model, {1: (3, 9, 17, 0)}, [1])
        model.ctx.materialize("torch")
        for layer in model.groups[0]:
            assert torch.equal(layer.kv_cache[1][9], layer.kv_cache[1][3])


def test_pad_pairs_skipped_and_stop_at_first_minus_one(device: torch.device) -> None:
    model = model_for(device, torch.float32, layers=3)
    ctx = model.ctx
    # Rows 1 and 2 have plans but are not listed: the list ends at the first -1.
    set_plan(model, {0: (1, 5, 0, 2), 1: (2, 6, 0, 2), 2: (3, 7, 0, 2)}, [0])
    ctx.src_slots[1, 0] = 0  # layer 1: pad source
    ctx.dst_slots[2, 0] = 0  # layer 2: pad destination
    before = [layer.kv_cache[1].clone() for layer in model.groups[0]]
    ctx.materialize("torch")
    after = [layer.kv_cache[1] for layer in model.groups[0]]
    assert not torch.equal(after[0][5], before[0][5])
    for layer in range(3):
        for s in range(12):
            if (layer, s) != (0, 5):
                assert torch.equal(after[layer][s], before[layer][s]), (layer, s)


def test_entries_after_first_minus_one_are_rejected(device: torch.device) -> None:
    model = model_for(device, torch.float32)
    set_plan(model, {0: (1, 5, 0, 2), 1: (2, 6, 0, 2)}, [0])
    model.ctx.active_request_indices.copy_(i32([0, -1, 1, -1], device))
    before = model.groups[0][0].kv_cache[1].clone()
    with pytest.raises(ValueError, match="active_request_indices: must be distinct indices followed by -1"):
        model.ctx.materialize("torch")
    assert torch.equal(model.groups[0][0].kv_cache[1], before)


def test_stochastic_rounding_float16_picks_a_neighbour(device: torch.device) -> None:
    model = model_for(device, torch.float16)
    plain = model_for(device, torch.float16)
    for m in (model, plain):
        set_plan(m, {0: (1, 5, 4, 6)}, [0])
    model.groups[0][0].mamba_config.enable_stochastic_rounding = True
    model.ctx.materialize("torch")
    plain.ctx.materialize("torch")
    got = model.groups[0][0].kv_cache[1][5].float().cpu()
    nearest = plain.groups[0][0].kv_cache[1][5].cpu()
    lower = torch.nextafter(nearest, torch.full_like(nearest, -float("inf"))).float()
    upper = torch.nextafter(nearest, torch.full_like(nearest, float("inf"))).float()
    assert bool(((got >= lower) & (got <= upper)).all())
    assert not torch.equal(got, nearest.float())  # some elements were rounded the other way


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda c: c.plan_ring_start.__setitem__(0, RING), "ring_start[0]"),
        (lambda c: c.plan_flush_count.__setitem__(0, WINDOW + 1), "replay_prefix_len[0]"),
        (lambda c: c.active_request_indices.copy_(i32([0, 0, -1, -1], c.device)), "active_request_indices"),
        (lambda c: c.active_request_indices.copy_(i32([4, -1, -1, -1], c.device)), "active_request_indices"),
        (lambda c: c.dst_slots.__setitem__((0, 0), 12), "dst_slots[0, 0]"),
        (lambda c: c.materialize_tables.x_cache_slot_strides.__setitem__(0, 1), "x_cache_ptrs slot stride[0]"),
        (lambda c: c.materialize_tables.state_ptrs.__setitem__(0, 16), "state_ptrs[0]"),
        (lambda c: c.materialize_tables.state_scale_ptrs.__setitem__(0, 8), "state_scale_ptrs"),
    ],
)
def test_torch_backend_rejects_bad_plans(device: torch.device, mutate, field: str) -> None:
    model = model_for(device, torch.float32)
    set_plan(model, {0: (1, 5, 2, 3)}, [0])
    mutate(model.ctx)
    with pytest.raises(ValueError, match=re.escape(field)):
        model.ctx.materialize("torch")


def test_torch_backend_rejects_bad_static_arguments(device: torch.device) -> None:
    model = model_for(device, torch.float32)
    ctx = model.ctx
    args = (*ctx.materialize_tables, ctx.src_slots, ctx.dst_slots, ctx.plan_ring_start,
            ctx.plan_flush_count, ctx.active_request_indices)
    good = dict(state_dtype=torch.float32, input_dtype=torch.bfloat16, matrixA_dtype=torch.float32,
                dim=D, dstate=N, num_heads=H, heads_per_group=H // G, max_window=WINDOW,
                ring_buffer_len=RING, pad_slot_id=0)
    for key, value, field in [("input_dtype", torch.float16, "input_dtype"),
                              ("max_window", 17, "max_window"), ("max_window", 0, "max_window"),
                              ("heads_per_group", 3, "heads_per_group"),
                              ("state_dtype", torch.int8, "state_dtype"),
                              ("ring_buffer_len", 0, "ring_buffer_len")]:
        with pytest.raises(ValueError, match=field):
            torch_replayssm_materialize(*args, **{**good, key: value})
    with pytest.raises(ValueError, match="src_slots"):
        torch_replayssm_materialize(*args[:11], ctx.src_slots.long(), *args[12:], **good)


def test_backend_selection(monkeypatch: pytest.MonkeyPatch, device: torch.device) -> None:
    from replayssm.impl import materialize

    monkeypatch.delenv("REPLAYSSM_MATERIALIZE", raising=False)
    assert _load_replayssm_materialize("torch") is torch_replayssm_materialize
    monkeypatch.setenv("REPLAYSSM_MATERIALIZE", "torch")
    assert _load_replayssm_materialize() is torch_replayssm_materialize
    monkeypatch.setenv("REPLAYSSM_MATERIALIZE", "cuda")
    with pytest.raises(ValueError, match="REPLAYSSM_MATERIALIZE"):
        _load_replayssm_materialize()
    with pytest.raises(ValueError, match="backend"):
        _load_replayssm_materialize("triton")
    monkeypatch.delenv("REPLAYSSM_MATERIALIZE")
    # Automatic choice: FlashInfer for CUDA tables when it imports, else torch.
    calls: list[str] = []
    monkeypatch.setattr(materialize, "torch_replayssm_materialize", lambda *a, **k: calls.append("torch"))
    monkeypatch.setattr(materialize, "_flashinfer_materialize",
                        lambda: (lambda *a, **k: calls.append("flashinfer")))
    model = model_for(device, torch.float32)
    model.ctx.materialize_backend = None
    model.ctx.materialize()
    monkeypatch.setattr(materialize, "_flashinfer_materialize", lambda: None)
    model.ctx.materialize()
    assert calls == ["flashinfer" if device.type == "cuda" else "torch", "torch"]


def test_flashinfer_backend_unavailable_is_a_value_error() -> None:
    from replayssm.impl import materialize

    if materialize._flashinfer_materialize() is not None:
        pytest.skip("flashinfer is importable here")
    with pytest.raises(ValueError, match="backend"):
        _load_replayssm_materialize("flashinfer")


def test_unregistered_pointer_is_reported(device: torch.device) -> None:
    model = model_for(device, torch.float32)
    set_plan(model, {0: (1, 5, 0, 2)}, [0])
    stray = torch.zeros(12, H, RING, D, dtype=torch.bfloat16, device=device)
    model.ctx.materialize_tables.x_cache_ptrs[0] = stray.data_ptr()
    with pytest.raises(ValueError, match=r"x_cache_ptrs\[0\]"):
        model.ctx.materialize("torch")
    i64_ptrs([stray], device)  # once registered, the same address resolves
    model.ctx.materialize("torch")


def test_registry_forgets_dead_tensors(device: torch.device) -> None:
    from replayssm.impl import pointers

    first = torch.zeros(64, device=device)
    i64_ptrs([first], device)
    address = first.data_ptr()
    assert pointers.resolve_address(address, first.device) is first
    view = first[:8]  # same address: the newer registration wins
    pointers.register_tensor(view)
    assert pointers.resolve_address(address, first.device) is view
    del view
    assert pointers.resolve_address(address, first.device) is None
    assert (first.device, address) not in pointers._REGISTRY
