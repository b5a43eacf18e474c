"""The numbers of the released kernels' numeric campaign: inputs as vLLM's
mixer gives them, their float64 truth, and the bounds the outputs and states
must keep (``docs/gpu.md``, "The released ReplaySSM numerically").

A request's token ``t`` of layer ``l`` carries ``x`` (heads x dim), ``B`` and
``C`` (groups x dstate) in the model's dtype and a raw ``dt`` per head (the
model dtype too); the layer has ``A < 0``, ``dt_bias`` and ``D`` per head
(float32 parameters). The kernels compute ``dt = softplus(raw + dt_bias)``
themselves in float32; the truth takes it in float64, and every bound
carries the float32 error :func:`dt_error` of that. The state after ``n``
tokens is the closed form of ``numeric_math.replay_exact`` from a zero state;
token ``t``'s output is ``C_t . S_t + D x_t`` per head and dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .numeric_math import U_F32, U_OF, Dims, Tokens, _rounding, replay_bound, replay_exact

U_SCALED = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-19}
"""The relative error of one scaled ``B`` row or product rounded to the input
dtype: its unit roundoff for bf16 and fp16; for float32 inputs the ``tf32x3``
dot of the Triton flush (each product within ``4 2^-22`` of its operands'
magnitudes) rounded up to ``2^-19``."""
TINY_OUT = {torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24, torch.float32: 2.0**-149}


def softplus64(v: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(v))`` in float64 (the truth of the kernels' ``dt``)."""
    return torch.nn.functional.softplus(v.double())


def dt_error(v: torch.Tensor) -> torch.Tensor:
    """A bound on ``|dt_f32 - softplus(v)|`` for ``v = raw + dt_bias`` (float64
    exact): the float32 sum (``u |v|``, scaled by ``softplus' <= 1``), ``exp``
    with the approximate exponential (``(2 + 1.2 |v|) 2^-23`` relative),
    ``+ 1`` and ``log`` (``2^-23`` absolute each, and ``2^-21`` for an
    approximate logarithm), and the result's rounding (``8 u`` relative)."""
    v = v.double()
    slope = torch.sigmoid(v)
    return slope * (U_F32 * v.abs() + (2 + 1.2 * v.abs()) * 2.0**-23) + 2.0**-22 + 2.0**-21 \
        + 8 * U_F32 * softplus64(v)


@dataclass
class Layer:
    """One layer's parameters: ``a`` (H,) < 0, ``bias`` (H,), ``skip`` (H,), float32."""

    a: torch.Tensor
    bias: torch.Tensor
    skip: torch.Tensor


class ReleaseStreams:
    """Every stream's tokens per layer (positions ``1..length``), in the model
    dtype ``input_dtype``, with each layer's parameters, on ``device``; the
    float64 truth of any position (cached), and rejected draft tokens."""

    def __init__(self, dims: Dims, layers: int, streams: int, length: int, seed: int, input_dtype: torch.dtype,
                 device: str) -> None:
        g = torch.Generator().manual_seed(seed)
        self.dims, self.length, self.input_dtype, self.device = dims, length, input_dtype, torch.device(device)
        h, d, n, grp = dims.heads, dims.dim, dims.dstate, dims.groups
        shape = (layers, streams, length + 1)

        def data(*s: int) -> torch.Tensor:
            return torch.randn(*s, generator=g).to(input_dtype).to(self.device)

        self.x, self.B, self.C = data(*shape, h, d), data(*shape, grp, n), data(*shape, grp, n)
        self.raw = (torch.rand(*shape, h, generator=g) * 3.0 - 2.5).to(input_dtype).to(self.device)
        self.layers = [Layer(-(torch.rand(h, generator=g) * 1.5 + 0.1).to(self.device),
                             (torch.rand(h, generator=g) - 0.5).to(self.device),
                             (torch.rand(h, generator=g) + 0.5).to(self.device)) for _ in range(layers)]
        self.garbage_gen = torch.Generator().manual_seed(seed + 1)
        self._truth: dict[tuple[int, int], dict[int, torch.Tensor]] = {}

    def slice(self, layer: int, stream: int, first: int, count: int) -> dict[str, torch.Tensor]:
        """The inputs of tokens ``first .. first + count - 1`` (``x``, ``B``, ``C``, ``raw``)."""
        sl = slice(first, first + count)
        return {"x": self.x[layer, stream, sl], "B": self.B[layer, stream, sl], "C": self.C[layer, stream, sl],
                "raw": self.raw[layer, stream, sl]}

    def garbage(self, count: int) -> dict[str, torch.Tensor]:
        """Rejected draft tokens: inputs of no stream."""
        d, gen = self.dims, self.garbage_gen

        def data(*s: int) -> torch.Tensor:
            return torch.randn(*s, generator=gen).to(self.input_dtype).to(self.device)

        return {"x": data(count, d.heads, d.dim), "B": data(count, d.groups, d.dstate),
                "C": data(count, d.groups, d.dstate),
                "raw": (torch.rand(count, d.heads, generator=gen) * 3.0 - 2.5).to(self.input_dtype).to(self.device)}

    def rows(self, layer: int, data: dict[str, torch.Tensor]) -> tuple[Tokens, torch.Tensor]:
        """Tokens for the float64 recurrences (``dt`` exact) and each one's ``dt`` error bound (K, H)."""
        v = data["raw"].double() + self.layers[layer].bias.double()
        return Tokens(data["x"].double(), data["B"].double(), softplus64(v)), dt_error(v)

    def truth(self, layer: int, stream: int, position: int) -> torch.Tensor:
        """The float64 state after ``position`` tokens of ``stream``."""
        known = self._truth.setdefault((layer, stream), {})
        if position not in known:
            d = self.dims
            base = max((p for p in known if p < position), default=0)
            start = known.get(base, torch.zeros(d.heads, d.dim, d.dstate, dtype=torch.float64, device=self.device))
            rows, _ = self.rows(layer, self.slice(layer, stream, base + 1, position - base))
            known[position] = replay_exact(start, rows, self.layers[layer].a, d.heads_per_group)
        return known[position]


def state_bound(streams: ReleaseStreams, layer: int, s0: torch.Tensor, e0: torch.Tensor,
                data: dict[str, torch.Tensor], u_scaled: float, state_dtype: torch.dtype | None) -> torch.Tensor:
    """A bound on the distance from the truth of ``s0`` (whose own distance is
    at most ``e0``) advanced by the tokens ``data`` as the kernels do it:
    ``e0`` decayed, plus ``numeric_math.replay_bound`` with the ``dt`` errors
    of :func:`dt_error` and ``u_scaled`` for the scaled ``B`` rows, rounded to
    ``state_dtype`` (None: a float32 state that is not stored)."""
    d, lay = streams.dims, streams.layers[layer]
    rows, err = streams.rows(layer, data)
    k = rows.dt.shape[0]
    if k == 0:
        return e0.double().clone()
    dt = rows.dt.transpose(0, 1)                                                      # (H, K)
    derr = err.transpose(0, 1)
    a = lay.a.double()[:, None]
    later = torch.flip(torch.cumsum(torch.flip(dt, [1]), dim=1), [1]) - dt
    later_err = torch.flip(torch.cumsum(torch.flip(derr, [1]), dim=1), [1]) - derr
    coeff = torch.exp(a * later) * dt
    total = (a * dt.sum(dim=1, keepdim=True))[:, 0]
    decay = torch.exp(total)[:, None, None]
    x = rows.x.transpose(0, 1)
    b = rows.B.repeat_interleave(d.heads_per_group, dim=1).transpose(0, 1)
    dt_rel = derr / dt + a.abs() * later_err
    decay_rel = (a.abs() * derr.sum(dim=1, keepdim=True))[:, 0]
    exact = replay_exact(s0, rows, lay.a, d.heads_per_group)
    own = replay_bound(s0, x, b, coeff, total, state_dtype, exact, u_scaled=u_scaled, dt_rel=dt_rel,
                       decay_rel=decay_rel)
    return e0.double() * decay + own


def output_bound(streams: ReleaseStreams, layer: int, s0: torch.Tensor, e0: torch.Tensor,
                 data: dict[str, torch.Tensor], u_scaled: float, u_read: float, out_dtype: torch.dtype,
                 y: torch.Tensor) -> torch.Tensor:
    """A bound on ``|out - y|`` (H, D) for the last token of ``data`` read out
    from ``s0`` (distance ``e0``) advanced by all of ``data``: the state's
    bound (:func:`state_bound`, unrounded) through ``C``; the float32 sums
    over ``dstate`` and the rows, ``(N + K + 4) u`` of the absolute terms
    (decayed ``|S0|`` and ``|x| |B| coeff``) through ``|C|``; ``u_read`` of
    them for a kernel that rounds the state or its products to the input
    dtype on the way out; the skip term ``3 u |D x|``; the rounding to
    ``out_dtype``. ``y`` is the float64 truth of the output."""
    d, lay = streams.dims, streams.layers[layer]
    e = state_bound(streams, layer, s0, e0, data, u_scaled, None)
    rows, _ = streams.rows(layer, data)
    k, n = rows.dt.shape[0], d.dstate
    c = data["C"][-1].double().abs().repeat_interleave(d.heads_per_group, dim=0)            # (H, N)
    dt = rows.dt.transpose(0, 1)
    later = torch.flip(torch.cumsum(torch.flip(dt, [1]), dim=1), [1]) - dt
    a = lay.a.double()[:, None]
    coeff = torch.exp(a * later) * dt
    decay = torch.exp((a * dt.sum(dim=1, keepdim=True)))[:, :, None]
    x = rows.x.transpose(0, 1).abs()
    b = rows.B.repeat_interleave(d.heads_per_group, dim=1).transpose(0, 1).abs()
    terms = s0.double().abs() * decay + e0.double() * decay + torch.einsum("hkd,hkn->hdn", x, b * coeff[:, :, None])
    through_c = torch.einsum("hdn,hn->hd", e, c)
    sums = ((n + k + 4) * U_F32 + u_read) * torch.einsum("hdn,hn->hd", terms, c)
    skip = 3 * U_F32 * (lay.skip.double()[:, None] * data["x"][-1].double()).abs()
    before = through_c + sums + skip
    u = U_OF.get(out_dtype, U_F32)
    return before + u / (1 - u) * (y.abs() + before) + TINY_OUT[out_dtype]


def output_truth(streams: ReleaseStreams, layer: int, state: torch.Tensor,
                 data: dict[str, torch.Tensor]) -> torch.Tensor:
    """``C . S + D x`` (H, D) in float64 for the last token of ``data``, ``state`` the float64 state after it."""
    d, lay = streams.dims, streams.layers[layer]
    c = data["C"][-1].double().repeat_interleave(d.heads_per_group, dim=0)
    return torch.einsum("hdn,hn->hd", state, c) + lay.skip.double()[:, None] * data["x"][-1].double()


def stored_bound(truth: torch.Tensor, state_dtype: torch.dtype) -> torch.Tensor:
    """The bound of a state written as its truth rounded to ``state_dtype`` (a prefill's result here)."""
    return _rounding(state_dtype, truth.abs())


def advance_exact(streams: ReleaseStreams, layer: int, state: torch.Tensor,
                  data: dict[str, torch.Tensor]) -> torch.Tensor:
    """``state`` (float64) advanced by the tokens ``data`` in float64."""
    rows, _ = streams.rows(layer, data)
    return replay_exact(state, rows, streams.layers[layer].a, streams.dims.heads_per_group)


def checkpointing_ssu_stand_in(state: torch.Tensor, x_cache: torch.Tensor, B_cache: torch.Tensor,
                               dt_cache: torch.Tensor, ring_start: torch.Tensor, committed: torch.Tensor,
                               x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                               out: torch.Tensor, *, D: torch.Tensor | None = None,
                               dt_bias: torch.Tensor | None = None, dt_softplus: bool = False,
                               state_batch_indices: torch.Tensor | None = None, pad_slot_id: int = -1,
                               cu_seqlens: torch.Tensor | None = None, max_seqlen: int | None = None,
                               **_: object) -> torch.Tensor:
    """FlashInfer's ``checkpointing_ssu`` semantics in float32 torch, for CPU runs of the campaign
    (FlashInfer is CUDA only): per sequence of ``q`` tokens on slot ``s`` with ``p`` committed rows
    from ``ring_start``, fold the ``p`` rows into the state when ``p + q > R - T`` (its
    ``must_checkpoint``), append the tokens at ring rows ``start + p + j`` (mod ``R``) and read each
    one's output out of the state advanced over the window (``numeric_math.replay``'s rounding steps)."""
    from .numeric_math import replay

    ring, heads, groups = x_cache.shape[2], state.shape[1], B.shape[-2]
    if cu_seqlens is None:
        big_t = x.shape[1]
        spans = [(b, 0, big_t) for b in range(x.shape[0])]
    else:
        big_t = int(max_seqlen or 0)
        cu = cu_seqlens.tolist()
        spans = [(0, cu[b], cu[b + 1] - cu[b]) for b in range(len(cu) - 1)]
    window, hpg, a = ring - big_t, heads // groups, A[:, 0, 0].float()
    slots = state_batch_indices.tolist() if state_batch_indices is not None else list(range(len(spans)))
    for (outer, first, q), slot in zip(spans, slots):
        if slot == pad_slot_id:
            continue
        start, p = int(ring_start[slot]), int(committed[slot])
        old = [(start + i) % ring for i in range(p)]
        if p + q > window:
            rows = Tokens(x_cache[slot][:, old].transpose(0, 1).float(), B_cache[slot][:, old].transpose(0, 1).float(),
                          dt_cache[slot][:, old].transpose(0, 1))
            state[slot] = replay(state[slot], rows, a, hpg, state.dtype)[0]
            old = []
        for j in range(q):
            v = dt[outer, first + j, :, 0].float() + (dt_bias[:, 0].float() if dt_bias is not None else 0.0)
            step = torch.nn.functional.softplus(v) if dt_softplus else v
            r = (start + p + j) % ring
            x_cache[slot][:, r] = x[outer, first + j].to(x_cache.dtype)
            B_cache[slot][:, r] = B[outer, first + j].to(B_cache.dtype)
            dt_cache[slot][:, r] = step
            idx = old + [(start + p + i) % ring for i in range(j + 1)]
            rows = Tokens(x_cache[slot][:, idx].transpose(0, 1).float(), B_cache[slot][:, idx].transpose(0, 1).float(),
                          dt_cache[slot][:, idx].transpose(0, 1))
            s = replay(state[slot], rows, a, hpg, torch.float32)[0]
            c = C[outer, first + j].float().repeat_interleave(hpg, dim=0)
            y = torch.einsum("hdn,hn->hd", s, c)
            if D is not None:
                y = y + D.float() * x[outer, first + j].float()
            out[outer, first + j] = y.to(out.dtype)
    return out
