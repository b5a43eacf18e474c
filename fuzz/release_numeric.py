"""The released vLLM 0.33.0's ReplaySSM numerically, many steps at a time, against float64.

The release's own files run in the target's process
(:mod:`.release_numeric_target`, loaded by ``base/isolation.py``; this
process never imports them), driven as 0.33.0's host drives them
(``mamba_mixer2.py``, ``mamba_attn.py``), with seeded requests that are
admitted (a prefill writes the slot's state, here the truth rounded to the
state dtype), decode for many forward passes, finish, and are preempted and
resumed (a new ``decode_base``):

- ``triton``: every pass, every decode row's cursor (``write_pos``,
  ``is_flush``) is computed on the CPU from its decode count
  (``spec/release_cursor.py``: the metadata builder's rule, ``align`` mode's
  re-anchoring and forced block-end flush, a one-token prompt tail as a
  one-token flush), CUDA-graph padding rows get the null block, and each
  layer calls the release's ``selective_state_update_replayssm_output_only``
  (its two Triton kernels) with ``dt_softplus``, ``dt_bias`` and ``D`` as the
  mixer passes them. In ``align`` mode a request that completed a block moves
  on to a fresh slot with the state copied (the scheduler's align copy); the
  completed block's slot is published and must not change.
- ``flashinfer``: the release's tracker kernels around FlashInfer's
  ``checkpointing_ssu`` called through the release's
  ``selective_state_update_replayssm_flashinfer``: the prefill rows' reset;
  with speculative decoding (``T > 1``) the delayed commit of the previous
  query's accepted counts by batch row once before the layers, queries of
  ``T`` tokens (or fewer, packed with ``cu_seqlens``), and the accepted
  prefix of each one revealed only after the pass; without it the advance
  after the last layer.

After every pass each decode token's output, of every layer, is compared
with the float64 truth of its own token stream (rejected draft tokens
included), and each slot's state with the truth of the position it holds,
elementwise within the bounds of :mod:`.release_numeric_math` (documented
in ``docs/gpu.md``); the null block and published slots must stay bit for
bit. A planted fault (:data:`PLANTS`) changes what the host hands the
release's kernels: the commit gets each accepted count one token short, or
a flush comes one step late (at the cursor's wrap, not at ``L - 1``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import torch

from replayssm.spec.release_caller import ReleaseConfig, rejection
from replayssm.spec.release_cursor import decode_cursor

from .numeric_math import CPU_DIMS, CUDA_DIMS, Dims
from .release_numeric_math import (
    U_SCALED, ReleaseStreams, advance_exact, output_bound, output_truth, state_bound, stored_bound,
)

TARGET = "replayssm.fuzz.release_numeric_target"
BACKENDS = ("triton", "flashinfer")
PLANTS = ("commit one token short", "flush one step late")
NULL = 0
"""The null block (``NULL_BLOCK_ID``): CUDA-graph padding rows point at it."""
FLASHINFER_SCALED = 2.0**-8
"""FlashInfer rounds each scaled ``B`` row (and its ``C . B`` products) to bfloat16 (``docs/gpu.md``,
tolerances); its outputs may read the state through one more such rounding (``u_read = 2^-7``)."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ReleaseNumericConfig:
    """One campaign: a configuration 0.33.0's validator accepts, and its size."""

    backend: str
    device: str = "cpu"
    passes: int = 40
    seed: int = 0
    buffer_len: int = 16
    query_len: int = 1
    cache_mode: str = "none"
    state_dtype: str = "float32"
    input_dtype: str = "float32"
    block_size: int = 16
    requests: int = 3
    layers: int = 2
    plant: str | None = None
    stand_in: str | None = None
    """FlashInfer only: ``module:function`` standing for ``checkpointing_ssu`` (CPU runs)."""

    def check(self) -> None:
        """ValueError naming the option and its allowed values, before any work."""
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        for name in ("state_dtype", "input_dtype"):
            if getattr(self, name) not in DTYPES:
                raise ValueError(f"--{name.replace('_', '-')} must be one of {', '.join(DTYPES)}")
        if self.plant is not None and self.plant not in PLANTS:
            raise ValueError(f"--plant must be one of {', '.join(map(repr, PLANTS))}, got {self.plant!r}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"--device must be cpu or cuda, got {self.device!r}")
        for name in ("passes", "requests", "layers", "block_size", "buffer_len", "query_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.device == "cpu" and "bfloat16" in (self.state_dtype, self.input_dtype):
            raise ValueError("--state-dtype/--input-dtype bfloat16 needs --device cuda: Triton's interpreter "
                             "truncates float32 to bfloat16 (and its bfloat16 dot is wrong), where CUDA rounds")
        rule = rejection(ReleaseConfig(self.backend, self.query_len - 1, self.buffer_len, self.cache_mode))
        if rule is not None:
            raise ValueError(f"0.33.0 rejects this configuration ({rule.name}): {rule.evidence.shows}")

    @property
    def ring_len(self) -> int:
        return self.buffer_len + (self.query_len if self.backend == "flashinfer" else 0)


@dataclass
class NumericRequest:
    """One running request: its stream, tokens so far, slot and what the slot holds."""

    stream: int
    n: int
    decode_base: int
    slot: int
    ckpt: int
    bounds: list[torch.Tensor]
    accepted: int = 0
    """Its last query's accepted count (0: its last pass was the prefill)."""


@dataclass
class ReleaseNumericOutcome:
    """What a campaign checked, its worst ratio of error to bound, and its first failure."""

    config: dict[str, Any]
    passes: int = 0
    outputs: int = 0
    states: int = 0
    flushes: int = 0
    checkpoints: int = 0
    worst_output: float = 0.0
    worst_state: float = 0.0
    failure: str | None = None
    seconds: float = 0.0
    events: dict[str, int] = field(default_factory=dict)
    release_calls: int = 0
    """Calls of the release's entry points (each launches its kernels in the target's process)."""
    target_exit: int | None = None
    """The exit status of the target's process that ran it, ended in order after the run's last
    campaign (``TargetHost.shutdown``: 0 once it has waited for the device; otherwise how it ended)."""

    def count(self, event: str) -> None:
        self.events[event] = self.events.get(event, 0) + 1


class BoundExceeded(Exception):
    """A check failed (a value outside its bound, a block that must not change did): the message says
    which request, layer, token and value."""


class Campaign:
    """Drives the release's kernels in the target's process and judges them here."""

    def __init__(self, config: ReleaseNumericConfig, module: Any) -> None:
        config.check()
        self.c, self.m = config, module
        self.dev = torch.device(config.device)
        self.dims: Dims = CUDA_DIMS if config.device == "cuda" else CPU_DIMS
        self.sdt, self.idt = DTYPES[config.state_dtype], DTYPES[config.input_dtype]
        self.rng = random.Random(config.seed)
        self.slots = config.requests * (3 if config.cache_mode == "align" else 2) + 2
        length = config.passes * config.query_len + 80
        self.streams = ReleaseStreams(self.dims, config.layers, 4 * config.requests + 8, length, config.seed, self.idt,
                                      config.device)
        d, r = self.dims, config.ring_len
        self.caches = [self._layer_caches(d, r) for _ in range(config.layers)]
        self.trackers = [torch.zeros(self.slots, dtype=torch.int32, device=self.dev) for _ in range(3)]
        self.requests: list[NumericRequest] = []
        self.published: dict[int, int] = {}
        self.made = 0
        self.out = ReleaseNumericOutcome({k: v for k, v in vars(config).items()})

    def _layer_caches(self, d: Dims, ring: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(self.c.seed + 7)
        return {"state": torch.randn(self.slots, d.heads, d.dim, d.dstate, generator=g).to(self.sdt).to(self.dev),
                "x": torch.randn(self.slots, d.heads, ring, d.dim, generator=g).to(self.idt).to(self.dev),
                "dt": torch.rand(self.slots, d.heads, ring, generator=g).to(self.dev),
                "B": torch.randn(self.slots, d.groups, ring, d.dstate, generator=g).to(self.idt).to(self.dev)}

    # -- the requests ------------------------------------------------------------------------------
    def _free_slot(self) -> int | None:
        used = {q.slot for q in self.requests} | set(self.published) | {NULL}
        free = [s for s in range(1, self.slots) if s not in used]
        if not free and self.published:
            oldest = min(self.published)  # the block pool evicts a published block
            del self.published[oldest]
            free = [oldest]
        return self.rng.choice(free) if free else None

    def _admit(self, resume: NumericRequest | None = None) -> NumericRequest | None:
        slot = self._free_slot()
        if slot is None:
            return None
        if resume is None:
            self.made += 1
            stream, n = self.made % len(self.streams.x[0]), 3 + self.rng.randrange(30)
        else:
            stream, n = resume.stream, resume.n
        base = n
        if resume is None and self.c.backend == "triton" and self.rng.random() < 0.3:
            n -= 1  # the prompt's last token runs as a decode row: a one-token prompt tail
            self.out.count("prompt tail")
        bounds = []
        for layer, cache in enumerate(self.caches):
            truth = self.streams.truth(layer, stream, n)
            cache["state"][slot] = truth.to(self.sdt)
            bounds.append(stored_bound(truth, self.sdt))
        req = NumericRequest(stream, n, base, slot, n, bounds)
        self.out.count("resume" if resume else "admit")
        return req

    def _lifecycle(self) -> list[NumericRequest]:
        """Finish, preempt and admit requests; the new ones (prefilled in this pass)."""
        new: NumericRequest | None = None
        if self.requests and self.rng.random() < 0.08:
            gone = self.requests.pop(self.rng.randrange(len(self.requests)))
            self.out.count("finish")
            if self.rng.random() < 0.5:
                new = self._admit(gone)  # preempted, then resumed by recomputing its tokens
        elif len(self.requests) < self.c.requests and self.rng.random() < 0.5:
            new = self._admit()
        if new is None:
            return []
        self.requests.append(new)  # holds its slot from now on; decodes from the next pass
        return [new]

    # -- checks ------------------------------------------------------------------------------------
    def _check(self, what: str, got: torch.Tensor, truth: torch.Tensor, bound: torch.Tensor, kind: str) -> None:
        ratio = float(((got.double() - truth).abs() / bound).max())
        if kind == "output":
            self.out.outputs += 1
            self.out.worst_output = max(self.out.worst_output, ratio)
        else:
            self.out.states += 1
            self.out.worst_state = max(self.out.worst_state, ratio)
        if not ratio <= 1.0:
            diff = float((got.double() - truth).abs().max())
            raise BoundExceeded(f"{what}: {kind} off its float64 truth by up to {diff:.3g}, "
                                f"{ratio:.3g} times its bound")

    def _frames(self, before: list[dict[int, torch.Tensor]]) -> None:
        for layer, kept in enumerate(before):
            for slot, value in kept.items():
                if not torch.equal(self.caches[layer]["state"][slot], value):
                    what = "the null block" if slot == NULL else f"published block slot {slot}"
                    raise BoundExceeded(f"pass {self.out.passes}: layer {layer}: {what} changed")

    def _kept(self) -> list[dict[int, torch.Tensor]]:
        return [{s: cache["state"][s].clone() for s in (NULL, *self.published)} for cache in self.caches]

    def _inputs(self, layer: int, tokens: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        return {k: torch.cat([t[k] for t in tokens]) for k in ("x", "B", "C", "raw")}

    def _params(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        d, lay = self.dims, self.streams.layers[layer]
        return (lay.a[:, None, None].expand(d.heads, d.dim, d.dstate), lay.skip[:, None].expand(d.heads, d.dim),
                lay.bias[:, None].expand(d.heads, d.dim))

    def run(self) -> ReleaseNumericOutcome:
        t0 = time.perf_counter()
        try:
            for _ in range(self.c.passes):
                self.m.forget()  # the last pass's tensors stop being shared (every request syncs those it shares)
                self.out.passes += 1
                if self.c.backend == "triton":
                    self._triton_pass()
                else:
                    self._flashinfer_pass()
        except BoundExceeded as e:
            self.out.failure = str(e)
        self.out.seconds = round(time.perf_counter() - t0, 3)
        return self.out

    # -- Triton --------------------------------------------------------------------------------------
    def _cursor(self, req: NumericRequest) -> tuple[int, bool]:
        c = self.c
        cur = decode_cursor(req.n, 1, req.decode_base, c.buffer_len, c.block_size, c.cache_mode == "align")
        write_pos, flush = int(cur.write_pos), bool(cur.is_flush)
        if c.plant == "flush one step late":
            regular = int(cur.write_pos) == c.buffer_len - 1 and not bool(cur.prompt_tail)
            late = int(cur.write_pos) == 0 and int(cur.steps) > 0
            flush = (flush and not regular) or late
        return write_pos, flush

    def _triton_pass(self) -> None:
        new = self._lifecycle()
        rows = [r for r in self.requests if r not in new]
        self.rng.shuffle(rows)
        pads = self.rng.choice((0, 0, 1, 3))
        cursors = [self._cursor(r) for r in rows] + [(0, False)] * pads
        n_rows = len(rows) + pads
        if rows:
            kept = self._kept()
            write_pos = torch.tensor([w for w, _ in cursors], dtype=torch.int32, device=self.dev)
            is_flush = torch.tensor([int(f) for _, f in cursors], dtype=torch.int8, device=self.dev)
            indices = torch.tensor([[r.slot] for r in rows] + [[NULL]] * pads, dtype=torch.int32, device=self.dev)
            for layer, cache in enumerate(self.caches):
                tokens = [self.streams.slice(layer, r.stream, r.n + 1, 1) for r in rows]
                data = self._inputs(layer, tokens + [self.streams.garbage(1) for _ in range(pads)])
                a, skip, bias = self._params(layer)
                d = self.dims
                out = torch.full((n_rows, d.heads, d.dim), float("nan"), dtype=self.idt, device=self.dev)
                bc_pre = torch.zeros(n_rows, d.groups, self.c.buffer_len, dtype=torch.float32, device=self.dev)
                self.out.release_calls += 1
                self.m.selective_state_update_replayssm_output_only(
                    cache["state"], data["x"], data["raw"][:, :, None].expand(n_rows, d.heads, d.dim), a,
                    data["B"], data["C"], skip, bias, dt_softplus=True, x_cache=cache["x"], dt_cache=cache["dt"],
                    B_cache=cache["B"], bc_pre=bc_pre, write_pos=write_pos, is_flush=is_flush,
                    max_cache_len=self.c.buffer_len, state_batch_indices=indices, out=out)
                for i, r in enumerate(rows):
                    self._triton_row(r, layer, tokens[i], out[i], cursors[i])
            self._frames(kept)
            for r, (_, flush) in zip(rows, cursors):
                r.n += 1
                if flush:
                    r.ckpt = r.n
                    self.out.flushes += 1
                self._align_move(r, flush)

    def _triton_row(self, r: NumericRequest, layer: int, token: dict[str, torch.Tensor], out: torch.Tensor,
                    cursor: tuple[int, bool]) -> None:
        s = self.streams
        history = s.slice(layer, r.stream, r.ckpt + 1, r.n - r.ckpt)
        data = {k: torch.cat([history[k], token[k]]) for k in token}
        s0 = s.truth(layer, r.stream, r.ckpt)
        stored = self.caches[layer]["state"][r.slot]
        flush = cursor[1]
        u = U_SCALED[self.idt] if flush else 0.0  # only the flush rounds its scaled B rows to the input dtype
        after = s.truth(layer, r.stream, r.n + 1)
        y = output_truth(s, layer, after, data)
        e0 = r.bounds[layer]
        where = f"pass {self.out.passes}: request on stream {r.stream} (slot {r.slot}), layer {layer}, " \
                f"token {r.n + 1} (write_pos {cursor[0]}{', flush' if flush else ''})"
        self._check(where, out, y, output_bound(s, layer, s0, e0, data, u, 0.0, self.idt, y),
                    "output")
        if flush:
            r.bounds[layer] = state_bound(s, layer, s0, e0, data, U_SCALED[self.idt], self.sdt)
            self._check(where, stored, after, r.bounds[layer], "state")
        else:
            self._check(where, stored, s0, e0, "state")

    def _align_move(self, r: NumericRequest, flushed: bool) -> None:
        """Align mode: a request that completed a block continues in a fresh slot (the align copy)."""
        if self.c.cache_mode != "align" or r.n % self.c.block_size or not flushed:
            return
        slot = self._free_slot()
        if slot is None:
            return
        for cache in self.caches:
            cache["state"][slot] = cache["state"][r.slot]
        self.published[r.slot] = r.n
        r.slot = slot
        self.out.count("align copy")

    # -- FlashInfer ----------------------------------------------------------------------------------
    def _flashinfer_pass(self) -> None:
        c, d = self.c, self.dims
        new = self._lifecycle()
        rows = [r for r in self.requests if r not in new]
        self.rng.shuffle(rows)
        spec = c.query_len > 1
        if rows:
            kept = self._kept()
            fixed = not spec or self.rng.random() < 0.5
            queries = [c.query_len if fixed else self.rng.randint(1, c.query_len) for _ in rows]
            pads = self.rng.choice((0, 1, 2)) if fixed else 0
            indices = torch.tensor([r.slot for r in rows] + [NULL] * pads, dtype=torch.int32, device=self.dev)
            starts = [0]
            for q in queries + [c.query_len] * pads:
                starts.append(starts[-1] + q)
            qsl = torch.tensor(starts, dtype=torch.int32, device=self.dev)
            if spec:
                short = 1 if c.plant == "commit one token short" else 0
                accepted = torch.tensor([max(r.accepted - short, 0) for r in rows] + [1] * pads, dtype=torch.int32,
                                        device=self.dev)
                self.out.release_calls += 1
                self.m.commit_replayssm_ring_trackers(*self.trackers, indices, accepted, qsl,
                                                      logical_window=c.buffer_len, ring_buffer_len=c.ring_len)
            scratch = self.m.allocate_scratch(len(indices), d.heads, c.query_len, c.buffer_len, c.input_dtype, c.device)
            accepts = [self.rng.randint(1, q) for q in queries]
            before = [cache["state"].clone() for cache in self.caches]
            for layer, cache in enumerate(self.caches):
                tokens = [self._query(layer, r, q, a) for r, q, a in zip(rows, queries, accepts)]
                tokens += [self.streams.garbage(c.query_len) for _ in range(pads)]
                data = self._inputs(layer, tokens)
                total = data["x"].shape[0]
                a_, skip, bias = self._params(layer)
                out = torch.full((total, d.heads, d.dim), float("nan"), dtype=self.idt, device=self.dev)
                x, dt = data["x"], data["raw"][:, :, None].expand(total, d.heads, d.dim)
                b, cc = data["B"], data["C"]
                cu, most = (qsl, c.query_len) if spec else (None, None)
                if spec and fixed:
                    batch = len(indices)
                    x, dt, b, cc, out_v = (t.view(batch, c.query_len, *t.shape[1:]) for t in (x, dt, b, cc, out))
                    cu, most = None, None
                else:
                    out_v = out
                self.out.release_calls += 1
                self.m.selective_state_update_replayssm_flashinfer(
                    cache["state"], x, dt, a_, b, cc, out_v, cache["x"], cache["B"], cache["dt"], *self.trackers,
                    logical_window=c.buffer_len, D=skip, dt_bias=bias, dt_softplus=True, state_batch_indices=indices,
                    scratch=scratch, update_trackers=not spec and layer == len(self.caches) - 1,
                    cu_seqlens=cu, max_seqlen=most)
                for i, r in enumerate(rows):
                    self._flashinfer_row(r, layer, tokens[i], out[starts[i]:starts[i + 1]], before[layer])
            self._frames(kept)
            for r, a in zip(rows, accepts):
                r.n += a
                r.accepted = a
        for r in new:  # the prefill rows' trackers are reset (mamba_mixer2's prefill branch)
            r.accepted = 0
        if new:
            self.out.release_calls += 1
            self.m.reset_replayssm_ring_trackers(*self.trackers, torch.tensor([r.slot for r in new], dtype=torch.int32,
                                                                              device=self.dev))

    def _query(self, layer: int, r: NumericRequest, q: int, accepted: int) -> dict[str, torch.Tensor]:
        """The query's tokens: its accepted prefix (the stream's next tokens), then rejected drafts."""
        real = self.streams.slice(layer, r.stream, r.n + 1, accepted)
        if q == accepted:
            return real
        junk = self.streams.garbage(q - accepted)
        return {k: torch.cat([real[k], junk[k]]) for k in real}

    def _flashinfer_row(self, r: NumericRequest, layer: int, query: dict[str, torch.Tensor], out: torch.Tensor,
                        before: torch.Tensor) -> None:
        s = self.streams
        state = self.caches[layer]["state"][r.slot]
        where = f"pass {self.out.passes}: request on stream {r.stream} (slot {r.slot}), layer {layer}"
        if not torch.equal(state, before[r.slot]):  # the kernel checkpointed: its committed rows folded in
            history = s.slice(layer, r.stream, r.ckpt + 1, r.n - r.ckpt)
            r.bounds[layer] = state_bound(s, layer, s.truth(layer, r.stream, r.ckpt), r.bounds[layer], history,
                                          FLASHINFER_SCALED, self.sdt)
            if layer == 0:
                self.out.checkpoints += 1
            r.ckpt = r.n if layer == len(self.caches) - 1 else r.ckpt
            self._check(where + f": the checkpoint after token {r.n}", state, s.truth(layer, r.stream, r.n),
                        r.bounds[layer], "state")
            ckpt = r.n
        else:
            ckpt = r.ckpt
            self._check(where + f": its checkpoint after token {ckpt}", state, s.truth(layer, r.stream, ckpt),
                        r.bounds[layer], "state")
        history = s.slice(layer, r.stream, ckpt + 1, r.n - ckpt)
        exact = s.truth(layer, r.stream, r.n)
        s0 = state.double()
        for j in range(query["x"].shape[0]):
            token = {k: v[j:j + 1] for k, v in query.items()}
            exact = advance_exact(s, layer, exact, token)
            data = {k: torch.cat([history[k], query[k][:j + 1]]) for k in query}
            y = output_truth(s, layer, exact, data)
            bound = output_bound(s, layer, s0, r.bounds[layer], data, FLASHINFER_SCALED, 2 * FLASHINFER_SCALED,
                                 self.idt, y)
            self._check(where + f": query token {j + 1} of {query['x'].shape[0]} after token {r.n}", out[j], y,
                        bound, "output")


def run(configs: list[ReleaseNumericConfig]) -> list[ReleaseNumericOutcome]:
    """Load the release's kernels once in a process of their own (CUDA for a CUDA campaign), set
    FlashInfer up there when a campaign uses it, run the campaigns one after the other, and end that
    process in order (it waits for the device and exits 0: a ``compute-sanitizer`` watching it
    reports on it), its exit status in each outcome's ``target_exit``."""
    from replayssm.base.isolation import load_isolated

    for config in configs:
        config.check()
    if any(c.backend == "flashinfer" and c.stand_in is None for c in configs):
        # FlashInfer's import sets CUTE_DSL_CACHE_DIR when it is unset (prims_ts/utils.py
        # configure_cute_dsl_cache_dir), which the target's process would report as a changed
        # environment: it gets the value FlashInfer would pick from the start.
        base = os.path.expanduser(os.environ.get("FLASHINFER_WORKSPACE_BASE", os.path.expanduser("~")))
        os.environ.setdefault("CUTE_DSL_CACHE_DIR", os.path.join(base, ".cache", "flashinfer", "cute_dsl"))
    module = load_isolated(TARGET, "--release", cuda=configs[0].device == "cuda")
    # which process runs the release's kernels (a tool watching every process, such as
    # compute-sanitizer, names its report by it)
    print(json.dumps({"target_pid": getattr(module._host.process, "pid", None)}), file=sys.stderr, flush=True)
    try:
        if any(c.backend == "flashinfer" for c in configs):
            module.use_flashinfer(next(c.stand_in for c in configs if c.backend == "flashinfer"))
        outcomes = [Campaign(config, module).run() for config in configs]
    except Exception:  # a fault of the target's process: it still ends in order where it can
        module.shutdown()
        raise
    except BaseException:  # interrupted: at once
        module.close()
        raise
    status = module.shutdown()
    for o in outcomes:
        o.target_exit = status
    return outcomes


def sweep(base: dict[str, Any], lists: dict[str, list[Any]]) -> tuple[list[ReleaseNumericConfig], list[str]]:
    """Every configuration of the product of ``lists`` over ``base``: those 0.33.0 accepts, and a line
    for each one it rejects (with the validator's rule)."""
    keys = list(lists)
    configs, rejected = [], []
    for values in product(*(lists[k] for k in keys)):
        config = ReleaseNumericConfig(**base, **dict(zip(keys, values)))
        try:
            config.check()
        except ValueError as e:
            if "rejects" not in str(e):
                raise
            rejected.append(f"{dict(zip(keys, values))}: {e}")
            continue
        configs.append(config)
    return configs, rejected


def main(argv: list[str] | None = None) -> int:
    """``python -m replayssm.fuzz.release_numeric``: campaigns over the product of the comma-separated
    lists given (one target process for them all); one JSON line per campaign, then a summary line.
    Exit 1 when a campaign failed or the target's process did not end in order, 2 on bad options
    (before any work)."""
    p = argparse.ArgumentParser(prog="python -m replayssm.fuzz.release_numeric", description=__doc__.splitlines()[0])
    p.add_argument("--backend", required=True, help=f"one of {', '.join(BACKENDS)}")
    p.add_argument("--device", default="cpu", help="cpu (Triton's interpreter) or cuda")
    p.add_argument("--passes", type=int, default=40, help="forward passes per campaign")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--requests", type=int, default=3, help="requests running at once")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--buffer-len", default="16", help="replayssm_buffer_len values (comma-separated)")
    p.add_argument("--query-len", default="1", help="1 + num_speculative_tokens values (comma-separated)")
    p.add_argument("--cache-mode", default="none", help="none and/or align (comma-separated)")
    p.add_argument("--state-dtype", default="float32", help=f"of {', '.join(DTYPES)} (comma-separated)")
    p.add_argument("--input-dtype", default="float32", help=f"the model dtype, one of {', '.join(DTYPES)}")
    p.add_argument("--plant", help=f"one of {', '.join(map(repr, PLANTS))}")
    p.add_argument("--stand-in", help="module:function standing for FlashInfer's checkpointing_ssu (CPU)")
    a = p.parse_args(argv)
    try:
        lists = {"buffer_len": [int(v) for v in a.buffer_len.split(",")],
                 "query_len": [int(v) for v in a.query_len.split(",")],
                 "cache_mode": a.cache_mode.split(","), "state_dtype": a.state_dtype.split(",")}
        base = {"backend": a.backend, "device": a.device, "passes": a.passes, "seed": a.seed,
                "input_dtype": a.input_dtype, "block_size": a.block_size, "requests": a.requests,
                "plant": a.plant, "stand_in": a.stand_in}
        configs, rejected = sweep(base, lists)
        if not configs:
            raise ValueError("0.33.0 rejects every configuration asked for: " + "; ".join(rejected))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    outcomes = run(configs)
    for o in outcomes:
        print(json.dumps(vars(o)), flush=True)
    failed = [o for o in outcomes if o.failure]
    status = outcomes[0].target_exit
    if status != 0:
        print(f"error: the release's process did not end in order (exit status {status}: after waiting for "
              "the device it exits 0)", file=sys.stderr)
    print(json.dumps({"campaigns": len(outcomes), "failed": len(failed), "rejected_by_0.33.0": rejected,
                      "target_exit": status, "release_calls": sum(o.release_calls for o in outcomes),
                      "outputs": sum(o.outputs for o in outcomes), "states": sum(o.states for o in outcomes),
                      "worst_output": max(o.worst_output for o in outcomes),
                      "worst_state": max(o.worst_state for o in outcomes)}))
    return 1 if failed or status != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
