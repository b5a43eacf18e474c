"""The numeric fuzz layer: the stateful campaign with real Mamba2 numbers.

Each request's tokens carry Mamba2 inputs (:mod:`.numeric_math`); the system
under test is the context level (``ReplaySSMModelContext``: migration,
postprocess, compaction, materialize) over layers whose caches hold real
states and rings. Around the integer harness (whose spec comparison still
runs on every launch) this layer adds:

* the forward pass of each step, before its postprocess: a decode row runs the
  decode kernel's semantics on its live slot with the trackers the
  implementation holds (``checkpointing_ssu``: fold the committed rows into the
  state when ``committed + T > W``, append the step's ``T`` rows to the ring,
  the first ``accepted`` being the request's next tokens and the rest rejected
  draft tokens); a prefill chunk runs the float32 reference from the live
  slot's state and writes the state at each block end it passes (the chunk's
  end for its last block) into that block's slot (align mode) or its end into
  the live slot (mode none);
* block copies and live-column moves carry the state and ring pages with the
  trackers (the scheduler's copy-on-write);
* after each step, every running request's live slot, replayed over its
  committed ring rows, and every published slot is compared with the float64
  truth of its own token stream, elementwise within an error bound carried
  with every slot: the sum of the bounds of the operations that produced it.

A planted fault (``PLANTS``) breaks one numeric operation while leaving every
integer buffer as the spec says, so only this layer can catch it.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import reject
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from replayssm.spec.geometry import Conventions

from .actions import Action, BlockCopy, Migrate, Postprocess
from .launcher import ContextSide, Setup, _CacheSpec, _Layer
from .machine import Failure, ReplaySSMMachine, Statistics
from .numeric_math import CPU_DIMS, Dims, Tokens, TokenStreams, prefill, replay, replay_exact

PLANTS = ("plan one row short", "ring start off by one", "dropped checkpoint")
"""Numeric-only faults the teeth plant: the materialize call replays one row
fewer than the plan says, or starts one ring row late; the decode forward skips
the fold its checkpoint decision calls for."""


@dataclass
class NumericStats:
    """What the numeric checks saw, merged over runs."""

    checks: int = 0
    worst_ratio: float = 0.0
    worst_abs: float = 0.0
    forwards: dict[str, int] = field(default_factory=dict)

    def saw(self, ratio: float, diff: float) -> None:
        self.checks += 1
        self.worst_ratio = max(self.worst_ratio, ratio)
        self.worst_abs = max(self.worst_abs, diff)


class NumericContextSide(ContextSide):
    """The context level over layers with real caches, an error bound per slot
    and the forward pass of each step."""

    def __init__(self, setup: Setup, module: ModuleType, device: torch.device, dims: Dims,
                 streams: TokenStreams, plant: str | None = None, forward: str = "torch") -> None:
        self.setup, self.device, self.dims, self.streams, self.plant = setup, device, dims, streams, plant
        self.forward_backend = forward
        geo, slots = setup.geometry, setup.num_slots
        d, ring = dims, geo.ring_len
        spec = _CacheSpec(geo.block_size, setup.conventions.mode)
        self.tables, self.trackers, self.layers, grouped = [], [], [], []
        index = 0
        for layers in setup.layers_per_group:
            table = torch.full((geo.max_num_reqs, setup.num_cols), geo.pad_slot, dtype=torch.int32, device=device)
            pair = (torch.zeros(slots, dtype=torch.int32, device=device),
                    torch.zeros(slots, dtype=torch.int32, device=device))
            mixers = []
            for _ in range(layers):
                cache = [torch.zeros(slots, 1, device=device),
                         torch.zeros(slots, d.heads, d.dim, d.dstate, dtype=d.state_dtype, device=device),
                         torch.zeros(slots, d.heads, ring, d.dim, dtype=torch.bfloat16, device=device),
                         torch.zeros(slots, d.heads, ring, device=device),
                         torch.zeros(slots, d.groups, ring, d.dstate, dtype=torch.bfloat16, device=device)]
                mixers.append(_Layer(cache, streams.a[index].to(device), geo.window, pair))
                index += 1
            self.tables.append(table)
            self.trackers.append(pair)
            self.layers.append(mixers)
            grouped.append((mixers, spec, table))
        self.ctx = module.ReplaySSMModelContext.create(grouped, geo.max_num_reqs)
        self.ctx.materialize_backend = "torch" if device.type == "cpu" else "flashinfer"
        if plant in ("plan one row short", "ring start off by one"):
            self.ctx._materialize = self._planted_materialize
        self.bounds = [[torch.zeros(slots, d.heads, d.dim, d.dstate, dtype=torch.float64) for _ in g]
                       for g in self.layers]

    # -- pages ------------------------------------------------------------------
    def _copy_pages(self, group: int, src: int, dst: int) -> None:
        """A block copy of one slot's state and ring in every layer of ``group``."""
        for layer, bound in zip(self.layers[group], self.bounds[group]):
            for t in layer.kv_cache[1:]:
                t[dst] = t[src]
            bound[dst] = bound[src]

    def block_copy(self, action: BlockCopy) -> None:
        for g, src, dst in action.copies:
            self._copy_pages(g, src, dst)
        super().block_copy(action)

    def migrate(self, action: Migrate) -> None:
        """A live column that moves from a real slot takes its pages along (the
        scheduler copies them with the trackers; the kernel fixes the trackers)."""
        pad = self.setup.geometry.pad_slot
        for b in range(action.num_reqs):
            req = action.idx_mapping[b] if action.idx_mapping is not None else b
            if req < 0:
                continue
            src_col, dst_col = action.src_cols[req], action.dst_cols[req]
            if src_col < 0 or dst_col < 0 or src_col == dst_col:
                continue
            for g, table in enumerate(action.block_table):
                src, dst = table[b][src_col], table[b][dst_col]
                if src != pad and dst != pad and src != dst:
                    self._copy_pages(g, src, dst)
        super().migrate(action)

    def postprocess(self, action: Postprocess) -> None:
        """The launch, then the bound of every slot its materialize wrote."""
        before = [[(layer.kv_cache[1].clone(), bound.clone()) for layer, bound in zip(g, b)]
                  for g, b in zip(self.layers, self.bounds)]
        super().postprocess(action)
        if self.setup.conventions.materialize_prefixes and action.num_reqs:
            self._bound_materialized(before)

    # -- materialize -----------------------------------------------------------------
    def _planted_materialize(self) -> None:
        """The plan as the integer side wrote it, with the planted fault applied
        to the copy materialize reads."""
        ctx = self.ctx
        kept = ctx.plan_flush_count.clone(), ctx.plan_ring_start.clone()
        if self.plant == "plan one row short":
            ctx.plan_flush_count.sub_((ctx.plan_flush_count > 0).to(torch.int32))
        else:
            ctx.plan_ring_start.add_(1).remainder_(self.setup.geometry.ring_len)
        try:
            ctx.materialize()
        finally:
            ctx.plan_flush_count.copy_(kept[0])
            ctx.plan_ring_start.copy_(kept[1])

    def _ring_rows(self, layer: _Layer, slot: int, start: int, count: int) -> Tokens:
        """Ring rows ``start .. start + count - 1`` of ``slot`` (one conditional
        subtraction of R, as the kernels index)."""
        ring = self.setup.geometry.ring_len
        rows = [r - ring if r >= ring else r for r in range(start, start + count)]
        x, dt, b = layer.kv_cache[2][slot], layer.kv_cache[3][slot], layer.kv_cache[4][slot]
        return Tokens(x[:, rows].transpose(0, 1).float().cpu(), b[:, rows].transpose(0, 1).float().cpu(),
                      dt[:, rows].transpose(0, 1).float().cpu())

    def _bound_materialized(self, before: list) -> None:
        """The bound of each slot materialize wrote: its source's plus the replay's."""
        ctx, hpg = self.ctx, self.dims.heads_per_group
        active = ctx.active_request_indices.tolist()
        starts, counts = ctx.plan_ring_start.tolist(), ctx.plan_flush_count.tolist()
        src_rows, dst_rows = ctx.src_slots.tolist(), ctx.dst_slots.tolist()
        flat = [(g, i) for g, layers in enumerate(self.layers) for i in range(len(layers))]
        pad = self.setup.geometry.pad_slot
        for b in active[:active.index(-1) if -1 in active else len(active)]:
            for layer_index, (g, i) in enumerate(flat):
                src, dst = src_rows[layer_index][b], dst_rows[layer_index][b]
                if src == pad or dst == pad:
                    continue
                state, bound = before[g][i]
                layer = self.layers[g][i]
                rows = self._ring_rows(layer, src, starts[b], counts[b])
                _, added = replay(state[src].cpu(), rows, layer.A.cpu(), hpg, self.dims.state_dtype)
                self.bounds[g][i][dst] = bound[src] + added

    # -- the forward pass ------------------------------------------------------------
    def forward(self, rows: list[dict], stats: NumericStats) -> None:
        """Each scheduled row's forward pass on its live slot (see the module doc)."""
        for row in rows:
            kind = "prefill" if row["prefilling"] else "decode"
            stats.forwards[kind] = stats.forwards.get(kind, 0) + 1
            for g, layers in enumerate(self.layers):
                for i, layer in enumerate(layers):
                    index = sum(len(x) for x in self.layers[:g]) + i
                    if row["prefilling"]:
                        self._prefill(row, g, i, index, layer, stats)
                    elif self.forward_backend == "flashinfer":
                        self._decode_flashinfer(row, g, i, index, layer, stats)
                    else:
                        self._decode(row, g, i, index, layer, stats)

    def _live(self, row: dict, g: int) -> tuple[int, int, int]:
        slot = row["cols"][g][row["live_col"]]
        start, committed = self.trackers[g][0][slot].item(), self.trackers[g][1][slot].item()
        return slot, start, committed

    def _decode(self, row: dict, g: int, i: int, index: int, layer: _Layer, stats: NumericStats) -> None:
        geo, d = self.setup.geometry, self.dims
        slot, start, committed = self._live(row, g)
        state = layer.kv_cache[1]
        if committed + row["q"] > geo.window:
            stats.forwards["checkpoint"] = stats.forwards.get("checkpoint", 0) + 1
            if self.plant != "dropped checkpoint":
                rows = self._ring_rows(layer, slot, start, committed)
                folded, added = replay(state[slot].cpu(), rows, layer.A.cpu(), d.heads_per_group, d.state_dtype)
                state[slot] = folded.to(self.device)
                self.bounds[g][i][slot] += added
        accepted = row["accepted"]
        true = self.streams.tokens(index, row["stream"], row["computed"] + 1, accepted)
        junk = self.streams.garbage(row["q"] - accepted)
        for k in range(row["q"]):
            src, t = (true, k) if k < accepted else (junk, k - accepted)
            r = start + committed + k
            r = r - geo.ring_len if r >= geo.ring_len else r
            layer.kv_cache[2][slot, :, r] = src.x[t].to(self.device, torch.bfloat16)
            layer.kv_cache[3][slot, :, r] = src.dt[t].to(self.device)
            layer.kv_cache[4][slot, :, r] = src.B[t].to(self.device, torch.bfloat16)

    def _decode_flashinfer(self, row: dict, g: int, i: int, index: int, layer: _Layer, stats: NumericStats) -> None:
        """The decode row through FlashInfer's ``checkpointing_ssu`` (varlen, one
        row, the implementation's tracker tensors, the layer's caches)."""
        from flashinfer.mamba import checkpointing_ssu

        geo, d, dev = self.setup.geometry, self.dims, self.device
        slot, start, committed = self._live(row, g)
        q, accepted = row["q"], row["accepted"]
        if committed + q > geo.window:
            stats.forwards["checkpoint"] = stats.forwards.get("checkpoint", 0) + 1
            rows = self._ring_rows(layer, slot, start, committed)
            _, added = replay(layer.kv_cache[1][slot].cpu(), rows, layer.A.cpu(), d.heads_per_group, d.state_dtype)
            self.bounds[g][i][slot] += added
        true = self.streams.tokens(index, row["stream"], row["computed"] + 1, accepted)
        junk = self.streams.garbage(q - accepted)
        x = torch.cat([true.x, junk.x])[None].to(dev, torch.bfloat16)
        b = torch.cat([true.B, junk.B])[None].to(dev, torch.bfloat16)
        dt = torch.cat([true.dt, junk.dt])[None, :, :, None].to(dev).expand(1, q, d.heads, d.dim)
        a = layer.A[:, None, None].expand(d.heads, d.dim, d.dstate)
        out = torch.empty(1, q, d.heads, d.dim, dtype=torch.bfloat16, device=dev)
        start_t, committed_t = self.trackers[g]
        checkpointing_ssu(
            layer.kv_cache[1], layer.kv_cache[2], layer.kv_cache[4], layer.kv_cache[3], start_t, committed_t,
            x, dt, a, b, b.clone(), out, state_batch_indices=torch.tensor([slot], dtype=torch.int32, device=dev),
            pad_slot_id=geo.pad_slot, cu_seqlens=torch.tensor([0, q], dtype=torch.int32, device=dev),
            max_seqlen=geo.ring_len - geo.window, algorithm="monolith",
        )

    def _prefill(self, row: dict, g: int, i: int, index: int, layer: _Layer, stats: NumericStats) -> None:
        geo, d, conv = self.setup.geometry, self.dims, self.setup.conventions
        slot, start, committed = self._live(row, g)
        state, bound = layer.kv_cache[1], self.bounds[g][i]
        a = layer.A.cpu()
        before = row["computed"]
        if before > 0:
            rows = self._ring_rows(layer, slot, start, committed)
            s0, added = replay(state[slot].cpu(), rows, a, d.heads_per_group, d.state_dtype)
            b0 = bound[slot] + added
        else:
            s0 = torch.zeros(d.heads, d.dim, d.dstate, dtype=d.state_dtype)
            b0 = torch.zeros(s0.shape, dtype=torch.float64)
        tokens = self.streams.tokens(index, row["stream"], before + 1, row["q"])
        states, bounds = prefill(s0, tokens, a, d.heads_per_group, d.state_dtype, b0)
        end = before + row["q"]
        if conv.materialize_prefixes:
            bs = geo.block_size
            for col in range(before // bs, (end + bs - 1) // bs):
                target = row["cols"][g][col]
                if target != geo.pad_slot:
                    at = min((col + 1) * bs, end) - before - 1
                    state[target], bound[target] = states[at].to(self.device), bounds[at]
        else:
            state[slot], bound[slot] = states[-1].to(self.device), bounds[-1]

    # -- the checks --------------------------------------------------------------------
    def check(self, g: int, i: int, index: int, slot: int, stream: int, position: int, replayed: bool,
              what: str, stats: NumericStats) -> str | None:
        """Compare one slot (replayed over its committed rows when ``replayed``)
        with the truth at ``position``; a message when outside the bound."""
        layer = self.layers[g][i]
        state = layer.kv_cache[1][slot].cpu()
        if replayed:
            start, committed = self.trackers[g][0][slot].item(), self.trackers[g][1][slot].item()
            got = replay_exact(state, self._ring_rows(layer, slot, start, committed), layer.A.cpu(),
                               self.dims.heads_per_group)
        else:
            got = state.double()
        want = self.streams.truth[index, stream, position]
        diff = (got - want).abs()
        bound = self.bounds[g][i][slot] + 1e-12 * (1 + want.abs())
        ratio = float((diff / bound).max())
        stats.saw(ratio, float(diff.max()))
        if ratio > 1:
            worst = int((diff / bound).argmax())
            return (f"{what}: group {g} layer {i} slot {slot} (stream {stream}, position {position}) differs from "
                    f"the float64 truth by up to {float(diff.max()):.3e}, {ratio:.1f} times its bound "
                    f"(worst element {worst}: {float(diff.flatten()[worst]):.3e} > {float(bound.flatten()[worst]):.3e})")
        return None


class NumericMachine(ReplaySSMMachine):
    """The stateful machine with the numeric layer (set ``dims``, ``plant``,
    ``numeric_seed`` and ``numeric`` on a subclass; the level is the context's).
    The numeric side replaces the context side before the first launch; each
    postprocess action is preceded by the forward pass of its rows, read from
    the action and the callers' requests."""

    level = "context"
    dims: Dims = CPU_DIMS
    plant: str | None = None
    forward: str = "torch"
    windows: tuple[int, ...] | None = None
    """The logical windows to run (others are rejected): FlashInfer's kernels are built per window."""
    numeric_seed: int = 0
    numeric: NumericStats = NumericStats()

    def _numeric_side(self) -> NumericContextSide:
        if not isinstance(self.impl, NumericContextSide):
            geo, layers = self.setup.geometry, self.setup.layers_per_group
            if self.windows is not None and geo.window not in self.windows:
                reject()
            # Token data from the system's shape: the same example gets the same numbers when replayed.
            seed = zlib.crc32(repr((self.numeric_seed, geo, self.setup.conventions.label(), layers)).encode())
            streams = TokenStreams(self.dims, sum(layers), 2, self.setup.num_cols * geo.block_size, seed)
            self.impl = NumericContextSide(self.setup, self.target, self.device, self.dims, streams, self.plant,
                                           self.forward)
        return self.impl

    def _rows(self, action: Postprocess) -> list[dict]:
        """Each real batch row's step, with the stream and block-table row of its request."""
        conv = self.setup.conventions
        by_live_slot = {r.cols[0][r.live_col]: r for r in self.callers.requests.values() if r.live_col >= 0}
        rows = []
        for b in range(action.num_reqs):
            req = action.idx_mapping[b] if action.idx_mapping is not None else b
            if req < 0:
                continue
            q = (action.query_metadata[b + 1] - action.query_metadata[b] if conv.cumulative
                 else action.query_metadata[b])
            live_col = 0 if action.live_cols is None else action.live_cols[req]
            r = by_live_slot[action.block_table[0][b][live_col]]
            prefilling, accepted = action.is_prefilling[b], action.num_accepted_tokens[req]
            rows.append({"stream": r.stream, "computed": r.computed - (q if prefilling else accepted),
                         "cols": [t[b] for t in action.block_table],
                         "q": q, "accepted": accepted, "prefilling": prefilling, "live_col": live_col})
        return rows

    def execute(self, action: Action) -> None:
        side = self._numeric_side()
        if isinstance(action, Postprocess):
            t0 = time.perf_counter()
            side.forward(self._rows(action), self.numeric)
            self.stats.kernel_seconds += time.perf_counter() - t0
        super().execute(action)
        if isinstance(action, Postprocess):
            self._check_numbers()

    def _check_numbers(self) -> None:
        impl, geo = self.impl, self.setup.geometry
        flat = [(g, i) for g, n in enumerate(self.setup.layers_per_group) for i in range(n)]
        problems = []
        for r in self.callers.requests.values():
            if r.live_col < 0:
                continue
            for index, (g, i) in enumerate(flat):
                problems.append(impl.check(g, i, index, r.cols[g][r.live_col], r.stream, r.computed, True,
                                           f"request {r.rid}'s live slot", self.numeric))
        for (stream, col), slots in self.callers.published.items():
            for index, (g, i) in enumerate(flat):
                problems.append(impl.check(g, i, index, slots[g], stream, (col + 1) * geo.block_size, False,
                                           f"published block {col}", self.numeric))
        problems = [p for p in problems if p]
        if problems:
            raise Failure("numeric check failed:\n  " + "\n  ".join(problems[:6]), "numeric")


@dataclass(frozen=True)
class NumericConfig:
    """One numeric campaign."""

    impl: str | None
    device: str
    examples: int
    max_steps: int
    seed: int
    dims: Dims = CPU_DIMS
    plant: str | None = None
    shrink: bool = True
    forward: str = "torch"
    """The decode forward: ``torch`` (the reference) or ``flashinfer`` (``checkpointing_ssu``, CUDA)."""
    windows: tuple[int, ...] | None = None
    seconds: float | None = None
    """Start no further convention combination after this long (None: run them all)."""


def run_numeric(config: NumericConfig, conventions: list[Conventions] | None = None, progress: Any = None) -> dict:
    """Run the numeric campaign in this process (every convention combination,
    ``examples`` spread over them); returns its statistics, and the failure
    message when one was found (``failure`` is None otherwise). ``progress``:
    a stream that gets one line per finished combination."""
    from .target import load_target

    if config.plant is not None and config.plant not in PLANTS:
        raise ValueError(f"plant must be one of {PLANTS}, got {config.plant!r}")
    target = load_target(config.impl, cuda=config.device == "cuda", level="context")
    combos = conventions or Conventions.all()
    per_combo = max(1, -(-config.examples // len(combos)))
    stats, numeric = Statistics(), NumericStats()
    start = time.perf_counter()
    failure = None
    for n, conv in enumerate(combos):
        if config.seconds is not None and time.perf_counter() - start > config.seconds:
            break
        attrs = {"target": target, "device": torch.device(config.device), "stats": stats, "numeric": numeric,
                 "conventions": (conv,), "dims": config.dims, "plant": config.plant, "last_trace": None,
                 "numeric_seed": config.seed, "forward": config.forward, "windows": config.windows}
        machine = hypothesis_seed(config.seed * 1000 + n)(type("Numeric", (NumericMachine,), attrs))
        try:
            run_state_machine_as_test(machine, settings=settings(
                max_examples=per_combo, stateful_step_count=config.max_steps, deadline=None, database=None,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.generate, Phase.shrink] if config.shrink else [Phase.generate],
                report_multiple_bugs=False))
        except Failure as e:
            failure = f"{e.kind}: {e}"
            break
        finally:
            if progress is not None:
                print(f"  combination {n + 1}/{len(combos)} ({conv.label()}): {stats.examples} runs, "
                      f"{stats.request_steps} request-steps, {numeric.checks} slot checks, "
                      f"{time.perf_counter() - start:.1f} s", file=progress, flush=True)
    return {"combinations": n + 1 if combos else 0, "examples": stats.examples, "request_steps": stats.request_steps,
            "seconds": round(time.perf_counter() - start, 3), "checks": numeric.checks,
            "worst_error_over_bound": numeric.worst_ratio, "worst_abs_error": numeric.worst_abs,
            "forwards": numeric.forwards, "state_dtype": str(config.dims.state_dtype).replace("torch.", ""),
            "dims": [config.dims.heads, config.dims.dim, config.dims.dstate, config.dims.groups],
            "forward": config.forward, "device": config.device,
            "plant": config.plant, "failure": failure}


def run_numeric_command(args: Any, examples: int, max_steps: int) -> int:
    """``replayssm-verify fuzz --numeric`` (always the context level): run,
    print the summary (and write ``--json``); exit 0 passed, 1 a finding, 2 a
    set-up error."""
    import dataclasses
    import json
    import sys

    from .numeric_math import CUDA_DIMS

    dims = dataclasses.replace(CUDA_DIMS if args.device == "cuda" else CPU_DIMS,
                               state_dtype=getattr(torch, args.state_dtype))
    cuda = args.device == "cuda"
    # On CUDA: FlashInfer's decode kernel and materialize, built for the window of 16 only.
    config = NumericConfig(args.impl, args.device, examples, max_steps, args.seed, dims,
                           forward=args.numeric_forward or ("flashinfer" if cuda else "torch"),
                           windows=(16,) if cuda else None, seconds=args.numeric_seconds)
    try:
        result = run_numeric(config, progress=sys.stdout)
    except ValueError as e:  # a bad --impl or device
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"numeric campaign ({result['state_dtype']} state, {dims.heads} heads x {dims.dim} x {dims.dstate}, "
          f"{config.forward} decode forward on {config.device}): "
          f"{result['examples']} runs, {result['request_steps']} request-steps, {result['checks']} slot checks, "
          f"forward {result['forwards']}, worst error / bound {result['worst_error_over_bound']:.3f} "
          f"(worst |error| {result['worst_abs_error']:.3e}), {result['seconds']:.1f} s")
    print(f"FAILED: {result['failure']}" if result["failure"] else "PASSED")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 1 if result["failure"] else 0
