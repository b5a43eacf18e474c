"""The released (0.33.0) lifecycle campaign: its tracker kernels driven as 0.33.0's host drives them.

A seeded caller (``spec/release_caller.py``'s behaviours) runs forward passes
over a persistent batch of requests, each holding one slot (mode none: the
only mode FlashInfer ReplaySSM accepts): requests are admitted (a prefill,
then the reset of their slot), decode (the delayed MTP commit of the decode
rows before the layers, FlashInfer's pass on the ghost, the accepted counts;
or the single-token advance after the layers without speculation), finish
(the batch condenses: the last row moves into the hole) and are swapped
(the batch reorders rows). CUDA-graph padding rows (the null slot, one
accepted token) pad some commits.

The version's kernels run in a process of their own (``base/isolation.py``);
after every launch the judge compares every tracker entry with the spec
(``spec/release_trackers.py`` on numpy lanes) and checks, for every running
request, that its slot refines it (``spec/release_ghost.py``): the first
failure is a finding, with the whole run as its trace (:func:`replay` runs it
again on any version).

The host's ``order`` is how the accepted counts reach the commit:
``current_rows`` (0.33.0 without async scheduling: the counts move with the
rows) or ``previous_rows`` (the async-scheduling race of vLLM #53912: the
counts of pass n arrive in pass n's row order after pass n+1's batch was
reordered), the probe of the caller behaviour the corpus does not guarantee.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replayssm.base.traces import RELEASE_ID
from replayssm.spec.memory import VectorMemory
from replayssm.spec.release_ghost import (
    RingGhost, accept, flashinfer_pass, flashinfer_reads_ok, pending_consistent, prefill, refines,
)
from replayssm.spec.release_trackers import PROGRAMS, TRACKERS, ReleaseGeometry

ORDERS = ("current_rows", "previous_rows")
"""How the accepted counts reach the commit (see the module docstring)."""


@dataclass
class RunningRequest:
    """One running request: its slot, what its slot stands for, its query in flight."""

    name: str
    slot: int
    ghost: RingGhost
    query_len: int = 0
    accepted: int = 1
    prefilled: bool = False


@dataclass
class ReleaseViolation:
    """The first violation of a run: where it happened and what differs."""

    pass_index: int
    launch_index: int
    kind: str
    message: str


@dataclass
class Run:
    """A campaign's launches (the trace) and its outcome."""

    geometry: ReleaseGeometry
    order: str
    seed: int
    passes: int
    num_slots: int
    launches: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    finding: ReleaseViolation | None = None

    def trace(self, version: str) -> dict[str, Any]:
        """The run as a trace file: enough to run it again on ``version`` (or another)."""
        g = self.geometry
        out: dict[str, Any] = {
            "#meta": {"format": RELEASE_ID, "source": "review --vllm"}, "version": version, "seed": self.seed, "order": self.order,
            "geometry": {"window": g.window, "query_len": g.query_len, "ring_len": g.ring_len},
            "num_slots": self.num_slots, "passes": self.passes, "launches": self.launches, "events": self.events}
        if self.finding is not None:
            f = self.finding
            out["finding"] = {"pass": f.pass_index, "launch": f.launch_index, "kind": f.kind, "message": f.message}
        return out


class VersionError(RuntimeError):
    """The version failed to load or to launch in its own process."""


def run_on_version(file: str, num_slots: int, geo: ReleaseGeometry, launches: list[dict[str, Any]]
                   ) -> list[list[list[int]]]:
    """The trackers after each launch, from the version's own host wrappers
    (``reset_replayssm_ring_trackers``, ``update_replayssm_ring_trackers``,
    ``commit_replayssm_ring_trackers``) called in the version's own process
    (``base/isolation.py``) on int32 CPU tensors of ``num_slots + 1`` entries
    (slot 0 is the null block)."""
    import torch

    from replayssm.base.isolation import TargetFault, load_isolated

    def ints(values: list[int]) -> Any:
        return torch.tensor(values, dtype=torch.int32)

    try:
        module = load_isolated(file, "--vllm")
    except (TargetFault, ValueError) as e:
        raise VersionError(f"the version did not load: {e}") from None
    trackers = [torch.zeros(num_slots + 1, dtype=torch.int32) for _ in TRACKERS]
    after = []
    try:
        for launch in launches:
            slots = ints(launch["slots"])
            if launch["kernel"] == "reset":
                module.reset_replayssm_ring_trackers(*trackers, slots)
            elif launch["kernel"] == "advance":
                module.update_replayssm_ring_trackers(*trackers, slots, logical_window=geo.window,
                                                      ring_buffer_len=geo.ring_len)
            else:
                module.commit_replayssm_ring_trackers(*trackers, slots, ints(launch["accepted"]),
                                                      ints(launch["query_start_loc"]), logical_window=geo.window,
                                                      ring_buffer_len=geo.ring_len)
            after.append([t.tolist() for t in trackers])
    except TargetFault as e:
        raise VersionError(e.report()) from None
    finally:
        module.close()
    return after


def _spec_launch(state: list[np.ndarray], launch: dict[str, Any], geo: ReleaseGeometry) -> None:
    n = len(launch["slots"])
    if n == 0:
        return
    lanes = 128 * -(-n // 128)
    buffers = {"state_batch_indices": np.array(launch["slots"], dtype=np.int32),
               "num_accepted_tokens": np.array(launch.get("accepted") or [0] * n, dtype=np.int32),
               "query_start_loc": np.array(launch.get("query_start_loc") or [0] * (n + 1), dtype=np.int32),
               **dict(zip(TRACKERS, state))}
    PROGRAMS[launch["kernel"]](VectorMemory(buffers, lanes), geo, np.arange(lanes), n, len(state[0]))


def plan(geo: ReleaseGeometry, order: str, seed: int, passes: int, num_slots: int = 6) -> Run:
    """A seeded run of ``passes`` forward passes: the launches 0.33.0's host makes
    and the ghost events between them (FlashInfer's passes and acceptances are
    the ghost's, replayed by :func:`judge`)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    rng = random.Random(seed)
    run = Run(geo, order, seed, passes, num_slots)
    batch: list[RunningRequest] = []
    counts_by_row: list[int] = []  # the accepted counts as the last pass left them, in its row order
    made = 0
    for p in range(passes):
        free = sorted(set(range(1, num_slots + 1)) - {r.slot for r in batch})
        if batch and rng.random() < 0.15:  # a request finishes: the last row fills its hole (condense)
            gone = rng.randrange(len(batch))
            run.events.append({"pass": p, "event": "finish", "request": batch[gone].name})
            last = batch.pop()
            if gone < len(batch):
                batch[gone] = last
        if len(batch) >= 2 and rng.random() < 0.4:  # the persistent batch reorders two rows
            i, j = rng.sample(range(len(batch)), 2)
            batch[i], batch[j] = batch[j], batch[i]
            run.events.append({"pass": p, "event": "swap", "rows": [i, j]})
        new = []
        if free and (not batch or rng.random() < 0.35):
            made += 1
            req = RunningRequest(f"req{made}", rng.choice(free), RingGhost(0, 0, tuple([-1] * geo.ring_len)))
            new.append(req)
            run.events.append({"pass": p, "event": "admit", "request": req.name, "slot": req.slot,
                               "prompt": 5 + rng.randrange(40)})
        decodes = [r for r in batch if r.prefilled]
        if decodes:
            queries = [rng.randint(1, geo.query_len) if geo.speculative else 1 for _ in decodes]
            if geo.speculative:
                own = [r.accepted for r in decodes]
                counts = own if order == "current_rows" else [
                    counts_by_row[i] if i < len(counts_by_row) else own[i] for i in range(len(decodes))]
                pad = rng.choice((0, 0, 2))
                starts = np.concatenate([[0], np.cumsum(queries)]).tolist()
                run.launches.append({"pass": p, "kernel": "commit", "slots": [r.slot for r in decodes] + [0] * pad,
                                     "accepted": counts + [1] * pad,
                                     "query_start_loc": starts + [starts[-1]] * pad,
                                     "requests": [r.name for r in decodes]})
            accepted = [rng.randint(1, q) for q in queries]
            run.events.append({"pass": p, "event": "decode", "requests": [r.name for r in decodes],
                               "query_lens": queries, "accepted": accepted})
            for r, q, a in zip(decodes, queries, accepted):
                r.query_len, r.accepted = q, a
            counts_by_row = accepted
            if not geo.speculative:
                run.launches.append({"pass": p, "kernel": "advance", "slots": [r.slot for r in decodes],
                                     "requests": [r.name for r in decodes]})
        if new:
            run.launches.append({"pass": p, "kernel": "reset", "slots": [r.slot for r in new],
                                 "requests": [r.name for r in new]})
            for r in new:
                r.prefilled = True
            batch += new
            counts_by_row = counts_by_row + [1] * len(new)
    return run


def judge(run: Run, after: list[list[list[int]]]) -> ReleaseViolation | None:
    """Replay the run's launches and ghost events against the version's trackers
    ``after`` each launch: the first discrepancy with the spec or broken refinement."""
    geo = run.geometry
    spec: list[np.ndarray] = [np.zeros(run.num_slots + 1, dtype=np.int32) for _ in TRACKERS]
    ghosts: dict[str, RingGhost] = {}
    slots: dict[str, int] = {}
    prompts: dict[str, int] = {}
    events = {p: [e for e in run.events if e["pass"] == p] for p in range(run.passes)}
    launches = {p: [(i, x) for i, x in enumerate(run.launches) if x["pass"] == p] for p in range(run.passes)}
    for p in range(run.passes):
        for e in events[p]:
            if e["event"] == "admit":
                slots[e["request"]] = e["slot"]
                prompts[e["request"]] = e["prompt"]
                ghosts[e["request"]] = RingGhost(0, 0, tuple([-1] * geo.ring_len))
            elif e["event"] == "finish":
                slots.pop(e["request"], None)
                ghosts.pop(e["request"], None)
        decode = next((e for e in events[p] if e["event"] == "decode"), None)
        for i, launch in launches[p]:
            _spec_launch(spec, launch, geo)
            got = after[i]
            for name, expected, g in zip(TRACKERS, spec, got):
                if expected.tolist() != list(g):
                    slot = next(k for k in range(len(g)) if int(expected[k]) != g[k])
                    return ReleaseViolation(p, i, "discrepancy",
                                   f"pass {p}: after the {launch['kernel']} launch, {name}[{slot}] is {g[slot]}, "
                                   f"the spec says {int(expected[slot])}")
            if launch["kernel"] == "reset":
                for name in launch["requests"]:
                    ghosts[name] = prefill(ghosts[name], prompts[name])
            if launch["kernel"] in ("commit", "reset"):
                problem = _refinement(ghosts, slots, got, geo, launch["requests"], p)
                if problem:
                    return ReleaseViolation(p, i, "refinement", problem)
            if launch["kernel"] == "commit" and decode is not None:  # FlashInfer's pass, then the acceptance
                for name, q, a in zip(decode["requests"], decode["query_lens"], decode["accepted"]):
                    s = slots[name]
                    ghosts[name] = accept(flashinfer_pass(ghosts[name], got[0][s], got[1][s], q, geo), a)
        if not geo.speculative and decode is not None:
            i, launch = next((i, x) for i, x in launches[p] if x["kernel"] == "advance")
            before = after[i - 1] if i else [[0] * (run.num_slots + 1)] * 3
            for name in decode["requests"]:
                s = slots[name]
                ghosts[name] = accept(flashinfer_pass(ghosts[name], before[0][s], before[1][s], 1, geo), 1)
            problem = _refinement(ghosts, slots, after[i], geo, decode["requests"], p)
            if problem:
                return ReleaseViolation(p, i, "refinement", problem)
    return None


def _refinement(ghosts: dict[str, RingGhost], slots: dict[str, int], trackers: list[list[int]],
                geo: ReleaseGeometry, names: list[str], p: int) -> str | None:
    for name in names:
        s = slots[name]
        start, prev, pending = (trackers[k][s] for k in range(3))
        g = ghosts[name]
        if not refines(g, start, prev, geo):
            return (f"pass {p}: {name} (slot {s}) has {g.position - g.checkpoint} tokens since its checkpoint but "
                    f"its trackers commit {prev} ring rows from row {start}; the next decode reads another state")
        if geo.speculative and not (pending_consistent(prev, pending) and flashinfer_reads_ok(start, prev, pending, geo)):
            return (f"pass {p}: {name} (slot {s}): trackers ({start}, {prev}, {pending}) are outside FlashInfer's "
                    f"contract (ring start < {geo.ring_len}, committed rows <= {geo.window})")
    return None


def campaign(file: str, geo: ReleaseGeometry, order: str, seed: int, passes: int) -> Run:
    """Plan a run, run it on the version ``file``, judge it (a launch that raises
    in the version's process is a ``fault`` finding)."""
    run = plan(geo, order, seed, passes)
    try:
        run.finding = judge(run, run_on_version(file, run.num_slots, geo, run.launches))
    except VersionError as e:
        run.finding = ReleaseViolation(-1, -1, "fault", f"the version's kernels failed on this run: {e}")
    return run


def replay(trace: dict[str, Any], file: str) -> ReleaseViolation | None:
    """Run a saved trace's launches again on the version ``file`` and judge them."""
    g = trace["geometry"]
    run = Run(ReleaseGeometry(g["window"], g["query_len"], g["ring_len"]), trace["order"], trace["seed"],
              trace["passes"], trace["num_slots"], trace["launches"], trace["events"])
    return judge(run, run_on_version(file, run.num_slots, run.geometry, run.launches))
