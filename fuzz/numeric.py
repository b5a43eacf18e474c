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

Every tensor of the layer (states, bounds, rings, token data, the truth)
lives on the campaign's device; the host reads the trackers once per step and
one vector of worst ratios per check pass. A planted fault (``PLANTS``) breaks
one numeric operation while leaving every integer buffer as the spec says, so
only this layer can catch it. The campaign around it: :mod:`.numeric_campaign`.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

import torch
from hypothesis import strategies as hs
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import initialize

from replayssm.base.interrupts import raise_if_interrupted
from replayssm.base.isolation import ImportRef
from replayssm.spec.flashinfer import kernel_checkpoints

from .actions import Action, BlockCopy, Migrate, Postprocess
from .caller_shapes import Features, systems
from .launcher import ContextSide, Setup, _CacheSpec, _Layer, forget_previous
from .machine import ReplaySSMMachine
from .numeric_math import SIZINGS, Dims, Sizing, Tokens, TokenStreams, prefill, replay, replay_exact

PLANTS = ("plan one row short", "ring start off by one", "dropped checkpoint")
"""Numeric-only faults the teeth plant: the materialize call replays one row
fewer than the plan says, or starts one ring row late; the decode forward skips
the fold its checkpoint decision calls for (with FlashInfer's kernel: the
state it folded is put back)."""
MATERIALIZE_PLANTS = PLANTS[:2]
"""The plants that only show where materialize runs (align mode)."""


class BudgetSpent(KeyboardInterrupt):
    """The running convention combination's share of the time budget is spent.
    Hypothesis lets a KeyboardInterrupt through at once and, unlike any other
    exception, without recording the cut run in its tree of explored choices:
    a run that stopped where an earlier run of the same prefix went on reads
    as flaky data generation there (FlakyStrategyDefinition, seen on the H200
    with a BaseException). Caught by the campaign around each combination."""


@dataclass
class NumericStats:
    """What the numeric checks saw, merged over runs, and the first finding
    (kept in case the budget stops Hypothesis while it shrinks)."""

    checks: int = 0
    worst_ratio: float = 0.0
    worst_abs: float = 0.0
    forwards: dict[str, int] = field(default_factory=dict)
    first_failure: str | None = None

    def saw(self, ratios: list[float], diffs: list[float]) -> None:
        self.checks += len(ratios)
        self.worst_ratio = max([self.worst_ratio, *ratios])
        self.worst_abs = max([self.worst_abs, *diffs])

    def count(self, kind: str) -> None:
        self.forwards[kind] = self.forwards.get(kind, 0) + 1


@dataclass
class Budget:
    """The running combination's deadline (``time.perf_counter`` seconds, None:
    none) and the progress report every ``every`` seconds."""

    deadline: float | None = None
    report: Callable[[], None] | None = None
    every: float = 10.0
    last: float = field(default_factory=time.perf_counter)

    def tick(self) -> None:
        """Report when due; raise :class:`BudgetSpent` past the deadline, except
        while Hypothesis replays a failing example for its report (one example
        long: a stop there would read as a flaky test and lose the finding);
        raise :class:`~replayssm.base.interrupts.Interrupted` for a signal whose
        own exception was lost."""
        raise_if_interrupted()
        now = time.perf_counter()
        if self.report is not None and now - self.last >= self.every:
            self.last = now
            self.report()
        if self.deadline is not None and now > self.deadline and not _final_replay():
            raise BudgetSpent


def _final_replay() -> bool:
    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:  # not inside a Hypothesis example
        return False


def planted_materialize(ctx: Any, plant: str, ring_len: int) -> None:
    """A materialize plant (:data:`MATERIALIZE_PLANTS`), run as ``ctx``'s
    ``_materialize`` in the target's process: the plan as the integer side
    wrote it, with the fault applied to the copy materialize reads."""
    kept = ctx.plan_flush_count.clone(), ctx.plan_ring_start.clone()
    if plant == "plan one row short":
        ctx.plan_flush_count.sub_((ctx.plan_flush_count > 0).to(torch.int32))
    else:
        ctx.plan_ring_start.add_(1).remainder_(ring_len)
    try:
        ctx.materialize()
    finally:
        ctx.plan_flush_count.copy_(kept[0])
        ctx.plan_ring_start.copy_(kept[1])


Trackers = list[tuple[list[int], list[int]]]
"""Per group, the host copy of (ring_start, num_committed) per slot."""


class NumericContextSide(ContextSide):
    """The context level over layers with real caches, an error bound per slot
    and the forward pass of each step."""

    def __init__(self, setup: Setup, module: ModuleType, device: torch.device, dims: Dims,
                 streams: TokenStreams, plant: str | None = None, forward: str = "torch") -> None:
        self.setup, self.device, self.dims, self.streams, self.plant = setup, device, dims, streams, plant
        self.forward_backend = forward
        forget_previous(module)
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
                mixers.append(_Layer(cache, streams.a[index], geo.window, pair))
                index += 1
            self.tables.append(table)
            self.trackers.append(pair)
            self.layers.append(mixers)
            grouped.append((mixers, spec, table))
        self.flat = [(g, i, layer) for g, layers in enumerate(self.layers) for i, layer in enumerate(layers)]
        """Every layer with its group and index in the group, in stream-data order."""
        self.ctx = module.ReplaySSMModelContext.create(grouped, geo.max_num_reqs)
        self.ctx.materialize_backend = "torch" if device.type == "cpu" else "flashinfer"
        if plant in MATERIALIZE_PLANTS:  # planted in the target's process, where its context runs
            self.ctx._materialize = ImportRef(f"{__name__}:planted_materialize",
                                              (self.ctx, plant, setup.geometry.ring_len))
        self.bounds = [[torch.zeros(slots, d.heads, d.dim, d.dstate, dtype=torch.float64, device=device) for _ in g]
                       for g in self.layers]

    def host_trackers(self) -> Trackers:
        return [(start.tolist(), committed.tolist()) for start, committed in self.trackers]

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
        materializes = self.setup.conventions.materialize_prefixes and action.num_reqs
        before = [layer.kv_cache[1].clone() for _, _, layer in self.flat] if materializes else []
        super().postprocess(action)
        if materializes:
            self._bound_materialized(before)

    # -- materialize -----------------------------------------------------------------
    def _ring_rows(self, layer: _Layer, slot: int, start: int, count: int) -> Tokens:
        """Ring rows ``start .. start + count - 1`` of ``slot`` (one conditional
        subtraction of R, as the kernels index), as float32 on the device."""
        ring = self.setup.geometry.ring_len
        rows = [r - ring if r >= ring else r for r in range(start, start + count)]
        x, dt, b = layer.kv_cache[2][slot], layer.kv_cache[3][slot], layer.kv_cache[4][slot]
        return Tokens(x[:, rows].transpose(0, 1).float(), b[:, rows].transpose(0, 1).float(),
                      dt[:, rows].transpose(0, 1).float())

    def _bound_materialized(self, before: list[torch.Tensor]) -> None:
        """The bound of each slot materialize wrote: its source's plus the replay's."""
        ctx, hpg = self.ctx, self.dims.heads_per_group
        active = ctx.active_request_indices.tolist()
        starts, counts = ctx.plan_ring_start.tolist(), ctx.plan_flush_count.tolist()
        src_rows, dst_rows = ctx.src_slots.tolist(), ctx.dst_slots.tolist()
        pad = self.setup.geometry.pad_slot
        for b in active[:active.index(-1) if -1 in active else len(active)]:
            for layer_index, (g, i, layer) in enumerate(self.flat):
                src, dst = src_rows[layer_index][b], dst_rows[layer_index][b]
                if src == pad or dst == pad:
                    continue
                rows = self._ring_rows(layer, src, starts[b], counts[b])
                _, added = replay(before[layer_index][src], rows, layer.A, hpg, self.dims.state_dtype)
                self.bounds[g][i][dst] = self.bounds[g][i][src] + added

    # -- the forward pass ------------------------------------------------------------
    def forward(self, rows: list[dict], stats: NumericStats) -> None:
        """Each scheduled row's forward pass on its live slot (see the module doc)."""
        trackers = self.host_trackers()
        for row in rows:
            stats.count("prefill" if row["prefilling"] else "decode")
            for index, (g, i, layer) in enumerate(self.flat):
                slot = row["cols"][g][row["live_col"]]
                live = slot, trackers[g][0][slot], trackers[g][1][slot]
                if row["prefilling"]:
                    self._prefill(row, g, i, index, layer, live)
                elif self.forward_backend == "flashinfer":
                    self._decode_flashinfer(row, g, i, index, layer, live, stats)
                else:
                    self._decode(row, g, i, index, layer, live, stats)

    def _step_tokens(self, row: dict, index: int) -> Tokens:
        """A decode row's ``T`` inputs: the request's next ``accepted`` tokens, then rejected drafts."""
        true = self.streams.tokens(index, row["stream"], row["computed"] + 1, row["accepted"])
        junk = self.streams.garbage(row["q"] - row["accepted"])
        return Tokens(torch.cat([true.x, junk.x]), torch.cat([true.B, junk.B]), torch.cat([true.dt, junk.dt]))

    def _fold(self, layer: _Layer, live: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The live state with its committed rows folded in (the torch
        reference of the checkpoint) and the bound the fold adds."""
        slot, start, committed = live
        rows = self._ring_rows(layer, slot, start, committed)
        return replay(layer.kv_cache[1][slot], rows, layer.A, self.dims.heads_per_group, self.dims.state_dtype)

    def _decode(self, row: dict, g: int, i: int, index: int, layer: _Layer, live: tuple[int, int, int],
                stats: NumericStats) -> None:
        geo = self.setup.geometry
        slot, start, committed = live
        if kernel_checkpoints(committed, row["q"], geo.window):
            stats.count("checkpoint")
            if self.plant != "dropped checkpoint":
                layer.kv_cache[1][slot], added = self._fold(layer, live)
                self.bounds[g][i][slot] += added
        step = self._step_tokens(row, index)
        rows = [r - geo.ring_len if r >= geo.ring_len else r
                for r in range(start + committed, start + committed + row["q"])]
        layer.kv_cache[2][slot][:, rows] = step.x.transpose(0, 1).to(torch.bfloat16)
        layer.kv_cache[3][slot][:, rows] = step.dt.transpose(0, 1)
        layer.kv_cache[4][slot][:, rows] = step.B.transpose(0, 1).to(torch.bfloat16)

    def _decode_flashinfer(self, row: dict, g: int, i: int, index: int, layer: _Layer, live: tuple[int, int, int],
                           stats: NumericStats) -> None:
        """The decode row through FlashInfer's ``checkpointing_ssu`` (varlen, one
        row, the implementation's tracker tensors, the layer's caches)."""
        from flashinfer.mamba import checkpointing_ssu

        geo, d, dev = self.setup.geometry, self.dims, self.device
        slot, start, committed = live
        q = row["q"]
        kept = None
        if kernel_checkpoints(committed, q, geo.window):
            stats.count("checkpoint")
            if self.plant == "dropped checkpoint":
                kept = layer.kv_cache[1][slot].clone()
            else:
                self.bounds[g][i][slot] += self._fold(layer, live)[1]
        step = self._step_tokens(row, index)
        x, b = step.x[None].to(torch.bfloat16), step.B[None].to(torch.bfloat16)
        dt = step.dt[None, :, :, None].expand(1, q, d.heads, d.dim)
        a = layer.A[:, None, None].expand(d.heads, d.dim, d.dstate)
        out = torch.empty(1, q, d.heads, d.dim, dtype=torch.bfloat16, device=dev)
        start_t, committed_t = self.trackers[g]
        checkpointing_ssu(
            layer.kv_cache[1], layer.kv_cache[2], layer.kv_cache[4], layer.kv_cache[3], start_t, committed_t,
            x, dt, a, b, b.clone(), out, state_batch_indices=torch.tensor([slot], dtype=torch.int32, device=dev),
            pad_slot_id=geo.pad_slot, cu_seqlens=torch.tensor([0, q], dtype=torch.int32, device=dev),
            max_seqlen=geo.ring_len - geo.window, algorithm="monolith",
        )
        if kept is not None:
            layer.kv_cache[1][slot] = kept

    def _prefill(self, row: dict, g: int, i: int, index: int, layer: _Layer, live: tuple[int, int, int]) -> None:
        geo, d, conv = self.setup.geometry, self.dims, self.setup.conventions
        slot = live[0]
        state, bound = layer.kv_cache[1], self.bounds[g][i]
        before = row["computed"]
        if before > 0:
            s0, added = self._fold(layer, live)
            b0 = bound[slot] + added
        else:
            s0 = torch.zeros(d.heads, d.dim, d.dstate, dtype=d.state_dtype, device=self.device)
            b0 = torch.zeros(s0.shape, dtype=torch.float64, device=self.device)
        tokens = self.streams.tokens(index, row["stream"], before + 1, row["q"])
        states, bounds = prefill(s0, tokens, layer.A, d.heads_per_group, d.state_dtype, b0)
        end = before + row["q"]
        if conv.materialize_prefixes:
            bs = geo.block_size
            for col in range(before // bs, (end + bs - 1) // bs):
                target = row["cols"][g][col]
                if target != geo.pad_slot:
                    at = min((col + 1) * bs, end) - before - 1
                    state[target], bound[target] = states[at], bounds[at]
        else:
            state[slot], bound[slot] = states[-1], bounds[-1]

    # -- the checks --------------------------------------------------------------------
    def distance(self, g: int, i: int, index: int, slot: int, stream: int, position: int,
                 trackers: Trackers | None) -> tuple[torch.Tensor, torch.Tensor]:
        """One slot's elementwise distance from the truth at ``position`` and its
        bound (the slot replayed over its committed rows when ``trackers`` is given)."""
        layer = self.layers[g][i]
        state = layer.kv_cache[1][slot]
        if trackers is not None:
            rows = self._ring_rows(layer, slot, trackers[g][0][slot], trackers[g][1][slot])
            got = replay_exact(state, rows, layer.A, self.dims.heads_per_group)
        else:
            got = state.double()
        want = self.streams.truth(index, stream, position)
        return (got - want).abs(), self.bounds[g][i][slot] + 1e-12 * (1 + want.abs())


class NumericMachine(ReplaySSMMachine):
    """The stateful machine with the numeric layer (set ``sizing``, ``plant``,
    ``numeric_seed``, ``numeric`` and ``budget`` on a subclass; the level is
    the context's). Drawn systems are fitted to the sizing; the numeric side
    replaces the context side before the first launch; each postprocess
    action is preceded by the forward pass of its rows, read from the action
    and the callers' requests."""

    level = "context"
    sizing: Sizing = SIZINGS["small"]
    plant: str | None = None
    forward: str = "torch"
    numeric_seed: int = 0
    numeric: NumericStats = NumericStats()
    budget: Budget = Budget()

    @classmethod
    def fit(cls, system: tuple[Setup, Features]) -> tuple[Setup, Features]:
        """A drawn system within the sizing: one of its geometries
        (:meth:`Sizing.fit`) and capped layers."""
        setup, features = system
        layers = setup.layers_per_group
        if cls.sizing.layers_per_group is not None:
            layers = tuple(min(n, cap) for n, cap in zip(layers, cls.sizing.layers_per_group))
        # Re-sized for the fitted block size: the drawn model length in blocks, the table as vLLM sizes it
        # (keeping the old token count would let requests run past an align-mode table of larger blocks).
        total = setup.max_model_len
        assert total is not None  # Setup.__post_init__ sets it
        model_blocks = total // setup.geometry.block_size
        fitted = Setup.sized(cls.sizing.fit(setup.geometry), setup.conventions, layers, model_blocks, setup.num_slots)
        return fitted, features

    @initialize(system=hs.runner().flatmap(lambda machine: systems(machine.conventions).map(machine.fit)),
                data=hs.data())
    def build_system(self, system: tuple[Setup, Features], data: Any) -> None:
        self.budget.tick()
        super().build_system(system, data)

    def _fail(self, message: str, kind: str = "invariant") -> None:
        if self.numeric.first_failure is None:
            self.numeric.first_failure = f"{kind}: {message}"
        super()._fail(message, kind)

    def _numeric_side(self) -> NumericContextSide:
        if not isinstance(self.impl, NumericContextSide):
            geo, layers, dims = self.setup.geometry, self.setup.layers_per_group, self.sizing.dims
            # Token data from the system's shape: the same example gets the same numbers when replayed.
            seed = zlib.crc32(repr((self.numeric_seed, geo, self.setup.conventions.label(), layers)).encode())
            streams = TokenStreams(dims, sum(layers), 2, self.setup.max_model_len, seed, self.device)
            self.impl = NumericContextSide(self.setup, self.target, self.device, dims, streams, self.plant,
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
        self.budget.tick()
        side = self._numeric_side()
        if isinstance(action, Postprocess):
            t0 = time.perf_counter()
            side.forward(self._rows(action), self.numeric)
            self.stats.kernel_seconds += time.perf_counter() - t0
        super().execute(action)
        if isinstance(action, Postprocess):
            self._check_numbers()

    def _check_numbers(self) -> None:
        """Every live slot (replayed) and published slot against the truth: one
        host read of the worst ratios; the message names up to six slots outside."""
        impl, geo = self.impl, self.setup.geometry
        trackers = impl.host_trackers()
        checks = []
        for r in self.callers.requests.values():
            if r.live_col >= 0:
                checks += [(f"request {r.rid}'s live slot", g, i, index, r.cols[g][r.live_col], r.stream,
                            r.computed, trackers) for index, (g, i, _) in enumerate(impl.flat)]
        for (stream, col), slots in self.callers.published.items():
            checks += [(f"published block {col}", g, i, index, slots[g], stream, (col + 1) * geo.block_size, None)
                       for index, (g, i, _) in enumerate(impl.flat)]
        if not checks:
            return
        measured = [impl.distance(*c[1:]) for c in checks]
        ratios = torch.stack([(diff / bound).amax() for diff, bound in measured]).tolist()
        diffs = torch.stack([diff.amax() for diff, _ in measured]).tolist()
        self.numeric.saw(ratios, diffs)
        problems = []
        for (what, g, i, _, slot, stream, position, _), (diff, bound), ratio in zip(checks, measured, ratios):
            if ratio > 1 and len(problems) < 6:
                worst = int((diff / bound).argmax())
                problems.append(
                    f"{what}: group {g} layer {i} slot {slot} (stream {stream}, position {position}) differs from "
                    f"the float64 truth by up to {float(diff.max()):.3e}, {ratio:.1f} times its bound "
                    f"(worst element {worst}: {float(diff.flatten()[worst]):.3e} > "
                    f"{float(bound.flatten()[worst]):.3e})")
        if problems:
            self._fail("numeric check failed:\n  " + "\n  ".join(problems), "numeric")
