"""The numbers behind the numeric fuzz layer: token streams, the float64
truth, the float32 forward references and their error bounds.

A request's tokens carry Mamba2 inputs per layer: ``x`` (heads x dim) and
``B`` (groups x dstate), both bfloat16 values (the ring stores them so), and
a processed ``dt`` per head (float32, positive). A layer has one ``a < 0`` per
head. The state after ``n`` tokens, from a zero state, is
``S_n = S_{n-1} * exp(a dt_n) + dt_n x_n (outer) B_n``; :class:`TokenStreams`
computes it in float64 for every position (the truth).

The float32 references follow FlashInfer's rounding steps (design note
section 7, ``docs/gpu.md``): a replay of ``K`` ring rows scans ``a dt`` in
float32, scales each B row by ``exp(total - c_k) dt_k``, rounds that to
bfloat16, sums ``x_k (outer) B'_k`` in float32, adds ``S exp(total)`` and
rounds to the state dtype; a prefill chunk runs the recurrence token by token
in float32. Each returns, with its result, an elementwise bound on the error
it adds (``*_bound``), so a state's distance from the truth is bounded by the
sum of the bounds of the operations that made it, each decayed by the
``exp(a dt) <= 1`` factors that followed (``docs/gpu.md``, numeric layer).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

U_F32 = 2.0**-24
U_OF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
"""Unit roundoff of each state dtype."""
TINY_OF = {torch.float32: 2.0**-149, torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24}
"""The smallest subnormal step of each state dtype (rounding near zero)."""


@dataclass(frozen=True)
class Dims:
    """One layer's Mamba2 shapes; ``groups`` B groups share the heads evenly."""

    heads: int
    dim: int
    dstate: int
    groups: int
    state_dtype: torch.dtype

    @property
    def heads_per_group(self) -> int:
        return self.heads // self.groups


CPU_DIMS = Dims(heads=2, dim=4, dstate=4, groups=1, state_dtype=torch.float32)
"""Small dims for the torch forward on CPU."""
CUDA_DIMS = Dims(heads=6, dim=64, dstate=128, groups=2, state_dtype=torch.float32)
"""The FlashInfer specialization the GPU scripts build (``checkpointing_ssu``, ``replayssm_materialize``)."""


@dataclass
class Tokens:
    """Inputs of consecutive tokens of one layer: ``x`` (T, H, D), ``B``
    (T, G, N) as float32 holding bfloat16 values, ``dt`` (T, H) float32."""

    x: torch.Tensor
    B: torch.Tensor
    dt: torch.Tensor


class TokenStreams:
    """Every stream's tokens and truth states, per layer, positions ``1..length``."""

    def __init__(self, dims: Dims, num_layers: int, num_streams: int, length: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.dims, self.length = dims, length
        h, d, n, grp = dims.heads, dims.dim, dims.dstate, dims.groups
        shape = (num_layers, num_streams, length + 1)
        self.x = torch.randn(*shape, h, d, generator=g).to(torch.bfloat16).float()
        self.B = torch.randn(*shape, grp, n, generator=g).to(torch.bfloat16).float()
        self.dt = torch.rand(*shape, h, generator=g) * 0.4 + 0.05
        self.a = -(torch.rand(num_layers, h, generator=g) * 1.5 + 0.1)
        self.garbage_gen = torch.Generator().manual_seed(seed + 1)
        truth = torch.zeros(*shape, h, d, n, dtype=torch.float64)
        for t in range(1, length + 1):
            x, b, dt = self.x[:, :, t].double(), self._per_head(self.B[:, :, t]).double(), self.dt[:, :, t].double()
            decay = torch.exp(self.a.double()[:, None, :] * dt)
            truth[:, :, t] = truth[:, :, t - 1] * decay[..., None, None] + \
                (dt[..., None, None] * x[..., :, None] * b[..., None, :])
        self.truth = truth

    def _per_head(self, b: torch.Tensor) -> torch.Tensor:
        """B rows (..., G, N) repeated for each head of their group: (..., H, N)."""
        return b.repeat_interleave(self.dims.heads_per_group, dim=-2)

    def tokens(self, layer: int, stream: int, first: int, count: int) -> Tokens:
        """Tokens ``first .. first + count - 1`` of ``stream`` (positions from 1)."""
        sl = slice(first, first + count)
        return Tokens(self.x[layer, stream, sl], self.B[layer, stream, sl], self.dt[layer, stream, sl])

    def garbage(self, count: int) -> Tokens:
        """Rejected draft tokens: inputs that belong to no stream."""
        d = self.dims
        x = torch.randn(count, d.heads, d.dim, generator=self.garbage_gen).to(torch.bfloat16).float()
        b = torch.randn(count, d.groups, d.dstate, generator=self.garbage_gen).to(torch.bfloat16).float()
        return Tokens(x, b, torch.rand(count, d.heads, generator=self.garbage_gen) * 0.4 + 0.05)


def _rounding(state_dtype: torch.dtype, magnitude: torch.Tensor) -> torch.Tensor:
    """The error of rounding a value of at most ``magnitude`` (the result plus
    the error before rounding) to ``state_dtype``: ``u / (1 - u)`` of it, and the
    subnormal step near zero."""
    u = U_OF[state_dtype]
    return u / (1 - u) * magnitude + TINY_OF[state_dtype]


def replay(state: torch.Tensor, rows: Tokens, a: torch.Tensor, heads_per_group: int,
           state_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``state`` (H, D, N) advanced by ``rows`` with FlashInfer's rounding steps
    (the checkpoint of ``checkpointing_ssu``, and ``replayssm_materialize``).
    Returns the new state in ``state_dtype`` and the bound on the error this
    replay adds (float64, elementwise)."""
    k = rows.dt.shape[0]
    if k == 0:
        return state.clone(), torch.zeros(state.shape, dtype=torch.float64)
    x = rows.x.transpose(0, 1).float()                                            # (H, K, D)
    b = rows.B.repeat_interleave(heads_per_group, dim=1).transpose(0, 1).float()  # (H, K, N)
    dt = rows.dt.transpose(0, 1).float()                                          # (H, K)
    prefix = a.float()[:, None] * torch.cumsum(dt, dim=1)
    total = prefix[:, -1]
    coeff = torch.exp(total[:, None] - prefix) * dt
    b_scaled = (b * coeff[:, :, None]).to(torch.bfloat16).float()
    s = state.float()
    result = (s * torch.exp(total)[:, None, None] + torch.einsum("hkd,hkn->hdn", x, b_scaled)).to(state_dtype)
    return result, replay_bound(s, x, b, coeff, total, state_dtype, result)


def replay_bound(s: torch.Tensor, x: torch.Tensor, b: torch.Tensor, coeff: torch.Tensor, total: torch.Tensor,
                 state_dtype: torch.dtype, result: torch.Tensor) -> torch.Tensor:
    """Elementwise bound on ``|computed - exact|`` of one replay of ``K`` rows
    from ``s`` (``docs/gpu.md``): the decay factor's float32 error (scan of
    ``K`` terms plus ``exp``: ``(2 K |T| + 4) u``), each scaled B row's
    bfloat16 rounding (``u_bf16``) and float32 coefficient error, the float32
    sum of ``K + 1`` terms (``(K + 2) u`` of the absolute terms), the
    rounding to the state dtype and its subnormal step."""
    k = coeff.shape[1]
    s_abs, x_abs, b_abs, c_abs = s.double().abs(), x.double().abs(), b.double().abs(), coeff.double().abs()
    t_abs = total.double().abs()
    decay = torch.exp(total.double())[:, None, None]
    decay_err = (2 * k * t_abs + 4)[:, None, None] * U_F32
    terms = torch.einsum("hkd,hkn->hdn", x_abs, b_abs * c_abs[:, :, None])
    coeff_err = (2.0**-8 + (2 * k * t_abs + 6) * U_F32)[:, None, None]
    sum_err = (k + 2) * U_F32 * (s_abs * decay + terms * (1 + 2.0**-8))
    before_rounding = s_abs * decay * decay_err + terms * coeff_err + sum_err
    return before_rounding + _rounding(state_dtype, result.double().abs() + before_rounding)


def prefill(state: torch.Tensor, tokens: Tokens, a: torch.Tensor, heads_per_group: int,
            state_dtype: torch.dtype, bound: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The float32 reference of a prefill chunk from ``state`` (whose error is
    at most ``bound``): the state after each token, rounded to ``state_dtype``,
    and each one's error bound. Per token the float32 step
    ``S exp(a dt) + dt x (outer) B`` adds at most ``(|a dt| + 4) u |S exp(a dt)|
    + 3 u |dt x B|``; the earlier error decays by ``exp(a dt)``."""
    s = state.float()
    err = bound.double().clone()
    states, bounds = [], []
    b_rows = tokens.B.repeat_interleave(heads_per_group, dim=1)
    for t in range(tokens.dt.shape[0]):
        adt = a.float() * tokens.dt[t]
        decay = torch.exp(adt)[:, None, None]
        update = tokens.dt[t][:, None, None] * tokens.x[t][:, :, None] * b_rows[t][:, None, :]
        decayed = s * decay
        s = decayed + update
        err = err * decay.double() + (adt.double().abs() + 4)[:, None, None] * U_F32 * decayed.double().abs() \
            + 3 * U_F32 * update.double().abs()
        rounded = s.to(state_dtype)
        states.append(rounded)
        bounds.append(err + _rounding(state_dtype, rounded.double().abs() + err))
    return states, bounds


def replay_exact(state: torch.Tensor, rows: Tokens, a: torch.Tensor, heads_per_group: int) -> torch.Tensor:
    """``state`` advanced by ``rows`` in float64, token by token (for the
    checks: the rows are exact data, so this adds no error worth counting)."""
    s = state.double()
    b_rows = rows.B.repeat_interleave(heads_per_group, dim=1).double()
    for t in range(rows.dt.shape[0]):
        dt = rows.dt[t].double()
        s = s * torch.exp(a.double() * dt)[:, None, None] + dt[:, None, None] * rows.x[t].double()[:, :, None] \
            * b_rows[t][:, None, :]
    return s
