"""Materialize backends: FlashInfer's CUDA kernel and a torch reference.

Both take the call signature of ``flashinfer.mamba.replayssm_materialize``.
For each entry of ``active_request_indices`` up to the first ``-1`` (request
``b``) and each layer ``l`` whose ``src_slots[l, b]`` and ``dst_slots[l, b]``
both differ from ``pad_slot_id``, the destination state becomes the source
state advanced by ``replay_prefix_len[b]`` ring rows starting at
``ring_start[b]`` (zero rows: an exact copy). Rings and trackers are read only.

The torch backend follows the kernel's rounding steps (design note section 7)
and runs on any device. It finds the tensors behind the address tables in the
registry of :mod:`replayssm.impl.pointers`: our ``ReplaySSMModelContext``
registers every tensor it tables (``i64_ptrs``); for a context that builds its
tables from bare addresses, as vLLM's does, whoever allocated the layer
tensors registers them (``register_tensor``; the fuzz harness's context level
does). Unlike the CUDA kernel it
checks the plan values (ring start, replay length, request indices) and raises
``ValueError`` on a violation instead of leaving it undefined.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch

from .pointers import resolve_address
from .validation import MAX_LOGICAL_WINDOW, fail

MaterializeFn = Callable[..., None]
BACKENDS = ("torch", "flashinfer")
ENV_VAR = "REPLAYSSM_MATERIALIZE"


def _resolve(field: str, table: torch.Tensor, layer: int, strides: torch.Tensor | None) -> torch.Tensor:
    address = int(table[layer])
    tensor = resolve_address(address, table.device)
    if tensor is None:
        raise fail(
            f"{field}[{layer}]",
            "the address of a tensor registered through replayssm.impl.pointers.i64_ptrs",
            hex(address & ((1 << 64) - 1)),
        )
    if strides is not None and int(strides[layer]) != tensor.stride(0):
        raise fail(f"{field} slot stride[{layer}]", f"{tensor.stride(0)} (that of the registered tensor)", int(strides[layer]))
    return tensor


def _stochastic_round(values: torch.Tensor, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Round float32 ``values`` to ``dtype`` up or down with probability by distance (unbiased).

    Computed on the CPU with a CPU generator seeded by ``seed``, so the result
    is the same for a given seed on every device.
    """
    exact = values.cpu()
    nearest = exact.to(dtype)
    near = nearest.float()
    direction = torch.where(exact > near, float("inf"), float("-inf")).to(dtype)
    other = torch.nextafter(nearest, direction).float()
    gap = (other - near).abs()
    frac = torch.where(gap > 0, (exact - near).abs() / gap, torch.zeros_like(gap))
    draw = torch.rand(exact.shape, generator=torch.Generator().manual_seed(seed))
    return torch.where(draw < frac, other, near).to(dtype).to(values.device)


def torch_replayssm_materialize(
    state_ptrs: torch.Tensor,
    state_slot_strides: torch.Tensor,
    x_cache_ptrs: torch.Tensor,
    x_cache_slot_strides: torch.Tensor,
    B_cache_ptrs: torch.Tensor,
    B_cache_slot_strides: torch.Tensor,
    dt_cache_ptrs: torch.Tensor,
    dt_cache_slot_strides: torch.Tensor,
    A_ptrs: torch.Tensor,
    state_scale_ptrs: torch.Tensor,
    state_scale_slot_strides: torch.Tensor,
    src_slots: torch.Tensor,
    dst_slots: torch.Tensor,
    ring_start: torch.Tensor,
    replay_prefix_len: torch.Tensor,
    active_request_indices: torch.Tensor,
    *,
    state_dtype: torch.dtype,
    input_dtype: torch.dtype,
    matrixA_dtype: torch.dtype,
    dim: int,
    dstate: int,
    num_heads: int,
    heads_per_group: int,
    max_window: int,
    ring_buffer_len: int,
    pad_slot_id: int = -1,
    rand_seed: torch.Tensor | None = None,
    philox_rounds: int = 0,
    dependency_inputs: list[torch.Tensor] | None = None,
    dependency_outputs: list[torch.Tensor] | None = None,
) -> None:
    """Torch reference of ``flashinfer.mamba.replayssm_materialize`` (same contract).

    Per selected (layer, request) and head ``h``, with ``K`` replayed rows
    ``r_k = start + k`` (minus ``ring_buffer_len`` once when past the end),
    processed ``dt_k`` and ``a = A[h]``, all in float32: ``c_k = a * (dt_0 +
    ... + dt_k)``, ``total = c_{K-1}``; each B row is scaled by
    ``exp(total - c_k) * dt_k`` and rounded to bfloat16; the new state is
    ``S * exp(total) + sum_k x_k (outer) B'_k`` (float32 accumulation), rounded
    to ``state_dtype`` (stochastically for float16 when ``philox_rounds > 0``,
    with a CPU generator seeded from ``rand_seed`` and the layer: unbiased
    like FlashInfer's Philox rounding, not bit-equal to it). Quantized (8-bit)
    states are not supported. ``dependency_*`` anchors only order work under
    ``torch.compile`` and are not read.
    """
    if input_dtype != torch.bfloat16:
        raise fail("input_dtype", "torch.bfloat16", input_dtype)
    if state_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise fail("state_dtype", "one of torch.float32, torch.bfloat16, torch.float16", state_dtype)
    if not 1 <= max_window <= MAX_LOGICAL_WINDOW:
        raise fail("max_window", f"in [1, {MAX_LOGICAL_WINDOW}]", max_window)
    if ring_buffer_len < 1:
        raise fail("ring_buffer_len", "in [1, inf]", ring_buffer_len)
    if num_heads < 1 or heads_per_group < 1 or num_heads % heads_per_group:
        raise fail("heads_per_group", f"a positive divisor of num_heads={num_heads}", heads_per_group)
    if philox_rounds > 0 and (rand_seed is None or rand_seed.numel() != 1):
        raise fail("rand_seed", "a one-element int64 tensor when philox_rounds > 0", rand_seed)
    tables = (state_ptrs, state_slot_strides, x_cache_ptrs, x_cache_slot_strides, B_cache_ptrs,
              B_cache_slot_strides, dt_cache_ptrs, dt_cache_slot_strides, A_ptrs,
              state_scale_ptrs, state_scale_slot_strides)
    device = state_ptrs.device
    for t in tables:
        if t.dtype != torch.int64 or t.dim() != 1 or t.device != device:
            raise fail("pointer/stride tables", f"1-D int64 tensors on {device}", (t.dtype, t.device))
    for name, t in (("src_slots", src_slots), ("dst_slots", dst_slots), ("ring_start", ring_start),
                    ("replay_prefix_len", replay_prefix_len),
                    ("active_request_indices", active_request_indices)):
        if t.dtype != torch.int32 or t.device != device:
            raise fail(name, f"an int32 tensor on {device}", (t.dtype, t.device))
    layers, batch = src_slots.shape
    if layers < 1 or tuple(dst_slots.shape) != (layers, batch) or any(
        t.numel() != batch for t in (ring_start, replay_prefix_len, active_request_indices)
    ) or any(t.numel() != layers for t in tables):
        raise fail("slot and metadata shapes", f"({layers}, {batch}) slot tables, ({batch},) metadata "
                   f"and ({layers},) tables", "inconsistent shapes")
    if bool((state_scale_ptrs != 0).any()):
        raise fail("state_scale_ptrs", "all zero (the torch backend has no quantized state)", "non-zero")

    active = active_request_indices.tolist()
    starts = ring_start.tolist()
    counts = replay_prefix_len.tolist()
    src_rows = src_slots.tolist()
    dst_rows = dst_slots.tolist()
    seed = int(rand_seed.reshape(-1)[0]) if philox_rounds > 0 and rand_seed is not None else 0
    group_of_head = torch.arange(num_heads, device=device) // heads_per_group
    listed = active.index(-1) if -1 in active else len(active)
    if any(r != -1 for r in active[listed:]):
        # FlashInfer's persistent CTAs each stop at the -1 they meet, so an entry
        # after the first -1 may still be processed there: not a valid list.
        raise fail("active_request_indices", "distinct indices followed by -1 entries only",
                   active)
    seen: set[int] = set()
    for request in active[:listed]:
        if request >= batch or request in seen:
            raise fail("active_request_indices", f"distinct indices in [0, {batch}) before the first -1", request)
        seen.add(request)
        start, count = starts[request], counts[request]
        if not 0 <= start < ring_buffer_len:
            raise fail(f"ring_start[{request}]", f"in [0, {ring_buffer_len})", start)
        if not 0 <= count <= max_window:
            raise fail(f"replay_prefix_len[{request}]", f"in [0, {max_window}]", count)
        for layer in range(layers):
            src, dst = src_rows[layer][request], dst_rows[layer][request]
            if src == pad_slot_id or dst == pad_slot_id:
                continue
            state = _resolve("state_ptrs", state_ptrs, layer, state_slot_strides)
            if state.dtype != state_dtype or tuple(state.shape[1:]) != (num_heads, dim, dstate):
                raise fail(f"state_ptrs[{layer}] tensor", f"{state_dtype} of shape (slots, {num_heads}, {dim}, {dstate})",
                           (state.dtype, tuple(state.shape)))
            for name, slot in (("src_slots", src), ("dst_slots", dst)):
                if not 0 <= slot < state.shape[0]:
                    raise fail(f"{name}[{layer}, {request}]", f"in [0, {state.shape[0]})", slot)
            if count == 0:
                state[dst] = state[src].clone()
                continue
            x_cache = _resolve("x_cache_ptrs", x_cache_ptrs, layer, x_cache_slot_strides)
            b_cache = _resolve("B_cache_ptrs", B_cache_ptrs, layer, B_cache_slot_strides)
            dt_cache = _resolve("dt_cache_ptrs", dt_cache_ptrs, layer, dt_cache_slot_strides)
            a_vec = _resolve("A_ptrs", A_ptrs, layer, None)
            if a_vec.dtype != matrixA_dtype:
                raise fail(f"A_ptrs[{layer}] tensor dtype", str(matrixA_dtype), a_vec.dtype)
            rows = torch.arange(start, start + count, device=device)
            rows = torch.where(rows >= ring_buffer_len, rows - ring_buffer_len, rows)
            x = x_cache[src][:, rows, :].float()                        # (H, K, D)
            b = b_cache[src][:, rows, :][group_of_head].float()         # (H, K, N)
            dt = dt_cache[src][:, rows].float()                         # (H, K)
            a = a_vec[:num_heads].float()                               # (H,)
            decay_prefix = a[:, None] * torch.cumsum(dt, dim=1)
            total = decay_prefix[:, -1]
            coeff = torch.exp(total[:, None] - decay_prefix) * dt
            b_scaled = (b * coeff[:, :, None]).to(torch.bfloat16).float()
            update = torch.einsum("hkd,hkn->hdn", x, b_scaled)
            new_state = state[src].float() * torch.exp(total)[:, None, None] + update
            if philox_rounds > 0 and state_dtype == torch.float16:
                layer_seed = (seed + 0x9E3779B97F4A7C15 * (layer + 1)) % (1 << 63)
                state[dst] = _stochastic_round(new_state, state_dtype, layer_seed)
            else:
                state[dst] = new_state.to(state_dtype)


@functools.cache
def _flashinfer_materialize() -> MaterializeFn | None:
    try:
        from flashinfer.mamba import replayssm_materialize
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None
    return replayssm_materialize


def _auto_materialize(*args: Any, **kwargs: Any) -> None:
    """FlashInfer for CUDA tables when it is available, the torch reference otherwise."""
    tables_on_cuda = args[0].is_cuda if args else kwargs["state_ptrs"].is_cuda
    fn = _flashinfer_materialize() if tables_on_cuda else None
    (fn or torch_replayssm_materialize)(*args, **kwargs)


def _load_replayssm_materialize(backend: str | None = None) -> MaterializeFn:
    """The materialize callable to use.

    ``backend`` (else the ``REPLAYSSM_MATERIALIZE`` environment variable) may be
    ``"torch"`` or ``"flashinfer"``; unset means automatic: FlashInfer for CUDA
    tables when it imports, the torch reference otherwise. Asking for
    ``"flashinfer"`` when it cannot be imported raises ``ValueError``.
    """
    choice = backend if backend is not None else os.environ.get(ENV_VAR) or None
    if choice is None:
        return _auto_materialize
    if choice not in BACKENDS:
        raise fail("backend" if backend is not None else ENV_VAR, f"one of {BACKENDS}", repr(choice))
    if choice == "torch":
        return torch_replayssm_materialize
    fn = _flashinfer_materialize()
    if fn is None:
        raise fail("backend", "an importable FlashInfer for 'flashinfer'", "flashinfer not importable")
    return fn
