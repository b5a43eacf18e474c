"""The numbers behind the numeric fuzz layer: token streams, the float64
truth, the float32 forward references and their error bounds.

A request's tokens carry Mamba2 inputs per layer: ``x`` (heads x dim) and
``B`` (groups x dstate), both bfloat16 values (the ring stores them so), and
a processed ``dt`` per head (float32, positive). A layer has one ``a < 0`` per
head. The state after ``n`` tokens, from a zero state, is
``S_n = S_{n-1} * exp(a dt_n) + dt_n x_n (outer) B_n``; :class:`TokenStreams`
computes it in float64, on the campaign's device, for the positions the
checks ask for (the truth).

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

from replayssm.spec.geometry import Geometry

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


@dataclass(frozen=True)
class Sizing:
    """The shape of a numeric campaign's systems: the layer dims, the
    geometries it runs (a drawn one outside them is replaced by the first
    whose window is, like the drawn one's, shorter than two blocks or not)
    and at most how many layers each cache group has (the groups past the
    caps' length dropped); None: as drawn."""

    dims: Dims
    geometries: tuple[Geometry, ...] | None = None
    layers_per_group: tuple[int, ...] | None = None

    def fit(self, geometry: Geometry) -> Geometry:
        """``geometry``, or the one of ``geometries`` that stands for it."""
        if self.geometries is None or geometry in self.geometries:
            return geometry
        short = geometry.window < 2 * geometry.block_size
        return next((g for g in self.geometries if (g.window < 2 * g.block_size) == short), self.geometries[0])


REALISTIC_GEOMETRIES = (Geometry(max_num_reqs=4, block_size=8, window=16, ring_len=20),
                        Geometry(max_num_reqs=4, block_size=16, window=16, ring_len=20))
"""FlashInfer's built window (16, T <= 4): vLLM's fuzzed geometry, and blocks
of 16 for the systems drawn with a window shorter than two blocks (long
decodes, whose checkpoints then happen in align mode too)."""

SIZINGS = {
    "small": Sizing(CPU_DIMS),
    "realistic": Sizing(CUDA_DIMS, REALISTIC_GEOMETRIES, layers_per_group=(2, 1)),
}
"""``fuzz --numeric-dims``: small dims with every drawn geometry and layer
count (the CPU default), or FlashInfer's built specialization (window 16
only) with at most three layers in two groups (the CUDA default)."""


@dataclass
class Tokens:
    """Inputs of consecutive tokens of one layer: ``x`` (T, H, D), ``B``
    (T, G, N) as float32 holding bfloat16 values, ``dt`` (T, H) float32."""

    x: torch.Tensor
    B: torch.Tensor
    dt: torch.Tensor


class TokenStreams:
    """Every stream's tokens per layer, positions ``1..length``, on ``device``,
    and the float64 truth of any position (computed on demand, cached)."""

    def __init__(self, dims: Dims, num_layers: int, num_streams: int, length: int, seed: int,
                 device: torch.device | str = "cpu") -> None:
        g = torch.Generator().manual_seed(seed)
        self.dims, self.length, self.device = dims, length, torch.device(device)
        h, d, n, grp = dims.heads, dims.dim, dims.dstate, dims.groups
        shape = (num_layers, num_streams, length + 1)
        self.x = torch.randn(*shape, h, d, generator=g).to(torch.bfloat16).float().to(device)
        self.B = torch.randn(*shape, grp, n, generator=g).to(torch.bfloat16).float().to(device)
        self.dt = (torch.rand(*shape, h, generator=g) * 0.4 + 0.05).to(device)
        self.a = (-(torch.rand(num_layers, h, generator=g) * 1.5 + 0.1)).to(device)
        self.garbage_gen = torch.Generator().manual_seed(seed + 1)
        self._truth: dict[tuple[int, int], dict[int, torch.Tensor]] = {}

    def tokens(self, layer: int, stream: int, first: int, count: int) -> Tokens:
        """Tokens ``first .. first + count - 1`` of ``stream`` (positions from 1)."""
        sl = slice(first, first + count)
        return Tokens(self.x[layer, stream, sl], self.B[layer, stream, sl], self.dt[layer, stream, sl])

    def truth(self, layer: int, stream: int, position: int) -> torch.Tensor:
        """The float64 state of ``stream`` in ``layer`` after ``position``
        tokens: advanced exactly from the nearest earlier position asked
        before (the zero state at 0), then kept."""
        known = self._truth.setdefault((layer, stream), {})
        if position not in known:
            d = self.dims
            base = max((p for p in known if p < position), default=0)
            start = known.get(base, torch.zeros(d.heads, d.dim, d.dstate, dtype=torch.float64, device=self.device))
            known[position] = replay_exact(start, self.tokens(layer, stream, base + 1, position - base),
                                           self.a[layer], d.heads_per_group)
        return known[position]

    def garbage(self, count: int) -> Tokens:
        """Rejected draft tokens: inputs that belong to no stream."""
        d = self.dims
        x = torch.randn(count, d.heads, d.dim, generator=self.garbage_gen).to(torch.bfloat16).float()
        b = torch.randn(count, d.groups, d.dstate, generator=self.garbage_gen).to(torch.bfloat16).float()
        dt = torch.rand(count, d.heads, generator=self.garbage_gen) * 0.4 + 0.05
        return Tokens(x.to(self.device), b.to(self.device), dt.to(self.device))


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
        return state.clone(), torch.zeros(state.shape, dtype=torch.float64, device=state.device)
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
                 state_dtype: torch.dtype | None, result: torch.Tensor, *, u_scaled: float = 2.0**-8,
                 dt_rel: torch.Tensor | None = None, decay_rel: torch.Tensor | None = None) -> torch.Tensor:
    """Elementwise bound on ``|computed - exact|`` of one replay of ``K`` rows
    from ``s`` (``docs/gpu.md``): the decay factor's float32 error (scan of
    ``K`` terms plus ``exp``: ``(2 K |T| + 4) u``), each scaled B row's
    rounding to the input dtype (``u_scaled``: ``u_bf16`` by default) and float32
    coefficient error, the float32 sum of ``K + 1`` terms (``(K + 2) u`` of the
    absolute terms), the rounding to the state dtype and its subnormal step
    (none for ``state_dtype`` None: a float32 value that is not stored).
    ``dt_rel`` (H, K) and ``decay_rel`` (H,): further relative errors of each
    coefficient and of the decay factor, from ``dt`` values the kernel
    computes itself (``fuzz/release_numeric_math.py``)."""
    k = coeff.shape[1]
    s_abs, x_abs, b_abs, c_abs = s.double().abs(), x.double().abs(), b.double().abs(), coeff.double().abs()
    t_abs = total.double().abs()
    decay = torch.exp(total.double())[:, None, None]
    decay_err = (2 * k * t_abs + 4)[:, None, None] * U_F32
    if decay_rel is not None:
        decay_err = decay_err + decay_rel.double()[:, None, None]
    weights = c_abs if dt_rel is None else c_abs * (1 + dt_rel.double())
    terms = torch.einsum("hkd,hkn->hdn", x_abs, b_abs * c_abs[:, :, None])
    coeff_err = (u_scaled + (2 * k * t_abs + 6) * U_F32)[:, None, None]
    extra = 0.0 if dt_rel is None else torch.einsum("hkd,hkn->hdn", x_abs, b_abs * (c_abs * dt_rel.double())[:, :, None])
    sum_err = (k + 2) * U_F32 * (s_abs * decay + torch.einsum("hkd,hkn->hdn", x_abs, b_abs * weights[:, :, None])
                                 * (1 + u_scaled))
    before_rounding = s_abs * decay * decay_err + terms * coeff_err + extra * (1 + coeff_err) + sum_err
    if state_dtype is None:
        return before_rounding
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
    """``state`` advanced by ``rows`` in float64 (for the truth and the
    checks: the rows are exact data, so this adds no error worth counting),
    in closed form: ``S exp(a sum dt) + sum_k exp(a sum_{j>k} dt_j) dt_k x_k (outer) B_k``."""
    s = state.double()
    if rows.dt.shape[0] == 0:
        return s
    dt = rows.dt.double().transpose(0, 1)                                             # (H, K)
    later = torch.flip(torch.cumsum(torch.flip(dt, [1]), dim=1), [1]) - dt            # sum of dt_j, j > k
    a64 = a.double()[:, None]
    coeff = torch.exp(a64 * later) * dt
    x = rows.x.double().transpose(0, 1)                                               # (H, K, D)
    b = rows.B.double().repeat_interleave(heads_per_group, dim=1).transpose(0, 1)     # (H, K, N)
    decay = torch.exp(a64[:, 0] * dt.sum(dim=1))[:, None, None]
    return s * decay + torch.einsum("hkd,hkn->hdn", x, b * coeff[:, :, None])
