"""Wide verification: many requests per launch, for throughput.

The stateful machine explores small systems one caller decision at a time.
This runner verifies the same launch actions on one wide system instead:
every batch row is a request that owns its block-table row of slots, and each
step all rows prefill (chunks ending on boundaries or at the prompt's end) or decode (random T and
accepted count; a prompt tail half the time as a decode), their live columns move, and the kernels run once for all
rows. The caller decisions are drawn with numpy for all rows at once and
encoded with the spec's own ``encode_row``; the spec (numpy lanes) judges
every buffer, and FlashInfer's view of each live slot (ring start, ``N - P``)
is checked after every step. The target runs in a process of its own
(:mod:`replayssm.base.isolation`), each launch under a watchdog: a target
that ends, hangs, raises or changes its process, or writes outside its
buffers, stops the run with that ``fault`` (never a run without discrepancies).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from replayssm.base.isolation import TargetFault, TargetGone
from replayssm.spec.assumptions import GhostRow, encode_row
from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.flashinfer import kernel_window_after
from replayssm.spec.postprocess import running_position
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.system.rows import TAIL_ACCEPTED, RowRule

from .actions import Migrate, Postprocess
from .guards import GuardViolation
from .launcher import KernelSide, Setup, SpecSide, compare
from .target import load_target
from .wide_start import WATCHDOG_SECONDS


@dataclass
class WideResult:
    """What one wide run verified."""

    steps: int
    request_steps: int
    seconds: float
    kernel_seconds: float
    discrepancies: int
    fault: str | None = None
    """What the target did that stopped the run (its process ended or hung, it
    raised or changed its process, a guard caught a write): a finding; None: none."""
    start_up_seconds: float = 0.0
    """From the call to the first step: the target loaded in its own process, the system set up."""
    parts: dict[str, float] = field(default_factory=dict)
    """Seconds of the steps by part (:data:`STEP_PARTS`), summed over the steps."""


STEP_PARTS = ("decisions", "spec", "kernels", "compare", "refinement")
"""A wide step's parts: the caller decisions drawn and encoded into the two
launch actions, the spec's run of them, the target's (to completion, through
its process), the comparison of every buffer, FlashInfer's view checked."""


class WideSystem:
    """``rows`` requests, each with exclusive slots ``1 + row * cols + col``."""

    def __init__(self, setup: Setup, module, device: torch.device, seed: int) -> None:
        self.setup, self.geo, self.conv = setup, setup.geometry, setup.conventions
        self.rows = self.geo.max_num_reqs
        self.rng = np.random.default_rng(seed)
        self.spec = SpecSide(setup)
        self.impl = KernelSide(setup, module, device)
        cols = setup.num_cols
        slots = 1 + np.arange(self.rows)[:, None] * cols + np.arange(cols)[None, :]
        self.table = np.broadcast_to(slots, (len(setup.layers_per_group), self.rows, cols)).astype(np.int32).tolist()
        self.computed = np.zeros(self.rows, dtype=np.int64)
        self.prompt = self._new_prompts(self.rows)
        self.live = np.full(self.rows, -1, dtype=np.int64)
        self.start = np.zeros(self.rows, dtype=np.int64)
        self.position = np.zeros(self.rows, dtype=np.int64)
        self.rule = RowRule(self.geo, self.conv, int(setup.max_model_len))
        self.max_step = self.rule.longest_decode
        self.kernel_seconds = 0.0
        self.parts = dict.fromkeys(STEP_PARTS, 0.0)

    def _new_prompts(self, n: int) -> np.ndarray:
        """Prompts of 1 to 3 blocks and a token; a quarter of them one token past a
        boundary, so that a chunk ending there leaves a prompt tail."""
        bs = self.geo.block_size
        free = self.rng.integers(1, 3 * bs + 2, size=n)
        past_boundary = self.rng.integers(1, 4, size=n) * bs + 1
        return np.where(self.rng.random(n) < 0.25, past_boundary, free)

    def _decisions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's phase, query length and accepted count: a prompt tail
        runs as a decode half the time (accepting its one real token)."""
        rule = self.rule
        tail = rule.is_tail(self.computed, self.prompt) & (self.rng.random(self.rows) < 0.5)
        prefilling = (self.computed < self.prompt) & ~tail
        # a chunk ends on the next boundary, on the last one before the prompt's end, or at its end
        nxt = rule.next_chunk_end(self.computed, self.prompt)
        last = (self.prompt - 1) // self.geo.block_size * self.geo.block_size
        ends = np.stack([nxt, np.where(last > self.computed, last, nxt), self.prompt])
        chunk = ends[self.rng.integers(0, 3, size=self.rows), np.arange(self.rows)]
        q_decode = self.rng.integers(1, self.max_step + 1, size=self.rows)
        q = np.where(prefilling, chunk - self.computed, q_decode)
        accepted = np.where(prefilling,
                            self.rng.integers(rule.accepted_lo(True), rule.accepted_hi(True, 0) + 1, size=self.rows),
                            np.where(tail, TAIL_ACCEPTED.start,
                                     self.rng.integers(rule.accepted_lo(False), rule.accepted_hi(False, q_decode) + 1)))
        return prefilling, q, accepted

    def step(self) -> list:
        """One step of every row; returns the discrepancies found."""
        parts, t0 = self.parts, time.perf_counter()
        bs = self.geo.block_size
        full = self.computed + self.max_step > self.rule.max_len
        self.computed[full], self.prompt[full], self.live[full] = 0, self._new_prompts(int(full.sum())), -1
        prefilling, q, accepted = self._decisions()
        batch = np.arange(self.rows)
        live = self.rule.live_col(self.computed, q)
        ghost = GhostRow(self.computed, q, accepted, prefilling, live, batch, np.cumsum(q) - q)
        src = np.where(self.live >= 0, self.live, np.where(self.computed > 0, (self.computed - 1) // bs, -1))
        maxr = self.rows
        migrate = Migrate(maxr, batch.tolist() if self.conv.has_idx_mapping else None, src.tolist(), live.tolist(),
                          self.table)
        inputs = {"query_metadata": np.zeros(maxr + 1 if self.conv.cumulative else maxr, np.int64),
                  "idx_mapping": np.zeros(maxr, np.int64), "num_computed_tokens": np.zeros(maxr, np.int64),
                  "num_accepted_tokens": np.zeros(maxr, np.int64), "is_prefilling": np.zeros(maxr, np.int64),
                  "live_cols": np.zeros(maxr, np.int64)}
        for buf, (idx,), value in encode_row(self.conv, batch, ghost):
            inputs[buf][idx] = value
        picks = {k: v.tolist() for k, v in inputs.items()}
        picks["is_prefilling"] = [bool(x) for x in inputs["is_prefilling"]]
        if not self.conv.has_idx_mapping:
            picks["idx_mapping"] = None
        postprocess = Postprocess(maxr, **picks, block_table=self.table)
        wrong = []
        t1 = time.perf_counter()
        parts["decisions"] += t1 - t0
        for action in (migrate, postprocess):
            self.spec.run(action)
            t2 = time.perf_counter()
            parts["spec"] += t2 - t1
            self.impl.run(action)
            if self.impl.device.type == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            parts["kernels"] += t1 - t2
            wrong += compare(self.spec.state(), self.impl.state())
            t2 = time.perf_counter()
            parts["compare"] += t2 - t1
            t1 = t2
        self.kernel_seconds = parts["kernels"]
        self._advance(prefilling, q, accepted, live)
        wrong += self._check_refinement()
        parts["refinement"] += time.perf_counter() - t1
        return wrong

    def _advance(self, prefilling: np.ndarray, q: np.ndarray, accepted: np.ndarray, live: np.ndarray) -> None:
        """FlashInfer's view of each live slot after the step."""
        bs, W, R = self.geo.block_size, self.geo.window, self.geo.ring_len
        pnat = self.computed - self.position
        start, committed = kernel_window_after(self.start, pnat, q, accepted, W, R)
        after = np.where(prefilling, self.computed + q, self.computed + accepted)
        boundary = mamba_state_copy_boundary(running_position(prefilling, after, accepted), after, bs)
        in_place = boundary.needs_copy & (boundary.dst_col >= 0) & (boundary.dst_col == live)
        self.start = np.where(prefilling | in_place, 0, start)
        self.position = np.where(prefilling, after, np.where(in_place, boundary.aligned, after - committed))
        self.computed, self.live = after, live

    def _check_refinement(self) -> list:
        rows = np.arange(self.rows)
        slots = np.asarray(self.table)[0, rows, self.live]
        out = []
        for g in range(len(self.setup.layers_per_group)):
            got_start = self.spec.buffers["ring_start"][g, slots]
            got_committed = self.spec.buffers["num_committed"][g, slots]
            bad = (got_start != self.start) | (got_committed != self.computed - self.position)
            out += [f"row {r} group {g}: trackers ({got_start[r]}, {got_committed[r]}), FlashInfer's view "
                    f"({self.start[r]}, {self.computed[r] - self.position[r]})" for r in np.nonzero(bad)[0][:5]]
        return out


WIDE_CONVENTIONS = Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=True,
                               live_col_is_zero=False)
"""The caller the wide runner models (vLLM v2 in align mode): its model of
FlashInfer's view (``WideSystem._advance``) publishes prefixes in place and
moves live columns, which holds in align mode only (mode none, whose one
live column holds a request of any length, is the stateful fuzzer's and the
system model's)."""

WIDE_LAYERS = (2, 1)
"""Layers per cache group."""


def run_wide(impl: str | None, device: str, rows: int, steps: int, seed: int = 0,
             watchdog: float | None = None, forked: bool = False) -> WideResult:
    """Verify ``steps`` steps of a ``rows``-request system (block size 8, W = 16,
    R = 20, 8 columns, :data:`WIDE_CONVENTIONS`), each launch within
    ``watchdog`` seconds (None: :data:`.wide_start.WATCHDOG_SECONDS`); returns the counts
    and the target's ``fault``, if any (the steps counted are those it finished).
    ``forked``: the target's process is forked from this one (which must not
    have made a CUDA context: a wide process of :func:`.wide_start.wide_context`); then this process
    asks torch about CUDA only after that fork (``torch.cuda.is_available()`` counts the devices, after
    which torch refuses CUDA in every process forked since: seen on the H100, 2026-12-06)."""
    _check_arguments(device, rows, steps, seed, watchdog)
    if not forked:
        _check_cuda(device)
    geo = Geometry(max_num_reqs=rows, block_size=8, window=16, ring_len=20).validated()
    setup = Setup.sized(geo, WIDE_CONVENTIONS, WIDE_LAYERS, model_blocks=8, num_slots=1 + rows * 8)
    bad, done, fault, kernel_seconds, start_up = 0, 0, None, 0.0, 0.0
    start = time.perf_counter()
    module, system = None, None
    try:
        module = load_target(impl, cuda=device == "cuda", launch_seconds=watchdog or WATCHDOG_SECONDS[device],
                             forked=forked)
        _check_cuda(device)
        system = WideSystem(setup, module, torch.device(device), seed)
        start_up = time.perf_counter() - start
        for _ in range(steps):
            bad += len(system.step())
            done += 1
            kernel_seconds = system.kernel_seconds
    except (TargetFault, GuardViolation) as e:  # the target's finding: it stops the run
        fault = f"{e.kind}: {e.report() if isinstance(e, TargetFault) else e}"
    except TargetGone as e:
        fault = f"{e.fault.kind}: {e.fault.report()}"
    finally:
        if module is not None:
            module.close()
    parts = {k: round(v, 4) for k, v in system.parts.items()} if system is not None else {}
    return WideResult(done, done * rows, time.perf_counter() - start, kernel_seconds, bad, fault, start_up, parts)


def _check_cuda(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda: this torch sees no CUDA device")


def _check_arguments(device: str, rows: int, steps: int, seed: int, watchdog: float | None) -> None:
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"rows must be an int >= 1, got {rows!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if watchdog is not None and not watchdog > 0:
        raise ValueError(f"watchdog must be a number of seconds > 0, got {watchdog!r}")
