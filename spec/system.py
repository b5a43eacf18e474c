"""The whole-system model: scheduler, forward pass and worker kernels together.

One :class:`SystemParams` fixes a bounded world (requests, cache groups with
their layer counts, block-table columns, physical slots per group, token
streams, the kernel geometry and the caller's conventions). A state is a flat
record of integer variables (:class:`State`); every value is a vocabulary
value, so the same actions run on Python ints (the concrete simulation the
fuzzer drives) and on Z3 ``Sym`` terms (the proofs and the bounded model check).

Concrete state (what vLLM holds):

* per request ``r``: ``active``, ``stream`` (token-stream identity), ``prompt``
  (prompt length), ``N`` (computed position), ``live`` (the live column of its
  last step, -1 when none: the next migration's source column);
* ``table[g, r, c]``: physical slot of column ``c`` in cache group ``g``
  (0 = the null block);
* ``rs[g, s]``, ``nc[g, s]``: the trackers (``ring_start``, ``num_committed``);
* ``ref[g, s]`` (how many table entries name the slot) and ``reg[g, s]`` (the
  prefix the scheduler's prefix cache believes the slot holds, -1 none): the
  scheduler's block pool;
* the worker's persistent plan buffers (``plan_ring_start``,
  ``plan_flush_count``, ``active_request_indices``, ``src_slots``, ``dst_slots``).

Ghost state (what the slots *mean*), for every slot of every group:

* ``ck[g, s]``: the prefix its checkpoint state represents, as ``code(stream,
  P) = stream * K + P`` (the state after tokens ``0..P-1`` of that stream), or
  -1 for garbage;
* ``ring[g, s, i]``: which token ring row ``i`` holds, ``code(stream, t)``, or
  -1 (a rejected draft, never written, or garbage).

A slot *represents* ``(stream, N)`` when its checkpoint is ``code(stream, N -
nc)`` and its ``nc`` committed rows from ``rs`` hold tokens ``N - nc .. N - 1``:
replaying them gives exactly the request's state. A registered (published)
slot is *canonical*: trackers (0, 0) and checkpoint exactly at its boundary.

Actions (:data:`ACTIONS`) are the caller's: ``admit`` (with a prefix-cache hit
on published blocks), ``step`` (one engine step for every running request:
scheduling of prefill chunks and decode rows, padding rows, allocation and
copy-on-write, the live-column move by block copy plus tracker migration, the
forward pass with FlashInfer's checkpoint rule and ring append, then
postprocess, compaction and materialize), and ``free`` (finish or preempt).
Each action declares its nondeterministic *picks*, a *guard* (what the model
itself guarantees), the named caller *assumptions* it relies on (droppable one
by one in proofs), and returns the next state plus *checks*: safety conditions
of that step (no memory fault, the forward pass reads the right prefix, the
materialize contract, ...). The kernels are never re-implemented: the worker
side runs ``spec.postprocess.postprocess_program``,
``spec.migration.migrate_program`` and ``spec.compaction.compact_program`` on
kernel inputs laid out by ``spec.assumptions.encode_row``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import product
from typing import Any

from .assumptions import (
    ACCEPTED_WITHIN_ROW,
    DECODE_ROW_FITS,
    DECODE_WITHIN_BLOCK,
    FRESH_DISTINCT_DESTINATIONS,
    FRESH_SLOT_IS_FREE,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    LIVE_COL_IS_LAST_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    ROW_NONEMPTY,
    GhostRow,
    encode_row,
)
from .compaction import compact_program
from .flashinfer import kernel_checkpoints, materialize_ring_row, tracker_in_range
from .geometry import NULL_BLOCK_ID, Conventions, Geometry, require_int
from .launch import next_power_of_2
from .memory import MemoryFault
from .migration import migrate_program
from .postprocess import postprocess_program
from .vocab import conj, disj, implies, ite, negate, within

GARBAGE = -1
"""The ghost value of a state or ring row that represents no prefix."""


# --------------------------------------------------------------------------
# Parameters and state
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemParams:
    """A bounded world. Constexprs (geometry) are concrete so the Z3 problems
    stay linear; ``swap_rows`` packs the scheduled requests into batch rows in
    reverse request order (with every request scheduled, request ``r`` sits in
    row ``NR - 1 - r``; v2 passes the permutation as ``idx_mapping``, v1 reads
    per-request inputs by batch row)."""

    geo: Geometry
    conv: Conventions
    layers: tuple[int, ...] = (1, 2)
    num_cols: int = 4
    num_slots: int = 7
    num_streams: int = 2
    swap_rows: bool = False

    def __post_init__(self) -> None:
        """Reject a world the model cannot describe, naming the field and its
        range: slot 0 of every group is the null block (``geo.pad_slot``) and
        slots ``1 .. num_slots - 1`` are the real ones, so a world needs at
        least one real slot; every group has at least one layer."""
        if not isinstance(self.geo, Geometry):
            raise ValueError(f"geo must be a Geometry, got {self.geo!r}")
        if not isinstance(self.conv, Conventions):
            raise ValueError(f"conv must be a Conventions, got {self.conv!r}")
        try:
            self.geo.validated()
        except ValueError as e:
            raise ValueError(f"geo.{e}") from None
        if self.geo.pad_slot != NULL_BLOCK_ID:
            raise ValueError(f"geo.pad_slot must be {NULL_BLOCK_ID} (slot 0 is the null block of every group), "
                             f"got {self.geo.pad_slot}")
        layers = self.layers
        if not isinstance(layers, (tuple, list)) or not layers:
            raise ValueError(f"layers must be a non-empty tuple of layer counts >= 1 (one per cache group), "
                             f"got {layers!r}")
        for g, n in enumerate(layers):
            require_int(f"layers[{g}]", n, 1)
        object.__setattr__(self, "layers", tuple(layers))  # hashable: params key caches
        require_int("num_cols", self.num_cols, 1)
        require_int("num_slots", self.num_slots, 2)
        require_int("num_streams", self.num_streams, 1)
        if not isinstance(self.swap_rows, bool):
            raise ValueError(f"swap_rows must be a bool, got {self.swap_rows!r}")

    @property
    def num_reqs(self) -> int:
        return int(self.geo.max_num_reqs)

    @property
    def groups(self) -> int:
        return len(self.layers)

    @property
    def max_len(self) -> int:
        """``max_model_len``: one column per block."""
        return self.num_cols * int(self.geo.block_size)

    @property
    def K(self) -> int:
        """Stride of the ghost code ``stream * K + position``."""
        return self.max_len + 1

    @property
    def total_layers(self) -> int:
        return sum(self.layers)

    @property
    def max_step(self) -> int:
        return int(self.geo.max_step)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return _shapes(self)

    def _shapes(self) -> dict[str, tuple[int, ...]]:
        NR, G, C, S, R = self.num_reqs, self.groups, self.num_cols, self.num_slots, int(self.geo.ring_len)
        return {
            "active": (NR,), "stream": (NR,), "prompt": (NR,), "N": (NR,), "live": (NR,),
            "table": (G, NR, C),
            "rs": (G, S), "nc": (G, S), "ref": (G, S), "reg": (G, S), "ck": (G, S),
            "ring": (G, S, R),
            "plan_ring_start": (NR,), "plan_flush_count": (NR,), "active_request_indices": (NR,),
            "src_slots": (self.total_layers * NR,), "dst_slots": (self.total_layers * NR,),
        }

    def batch_of(self, r: int) -> int:
        return self.num_reqs - 1 - r if self.swap_rows else r

    def describe(self) -> dict:
        g = self.geo
        return {"max_num_reqs": g.max_num_reqs, "block_size": g.block_size, "window": g.window,
                "ring_len": g.ring_len, "conventions": self.conv.label(), "layers": list(self.layers),
                "num_cols": self.num_cols, "num_slots": self.num_slots, "num_streams": self.num_streams,
                "swap_rows": self.swap_rows}


@lru_cache(maxsize=None)
def _shapes(p: SystemParams) -> dict[str, tuple[int, ...]]:
    return p._shapes()


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _flat(shape: tuple[int, ...], index: tuple) -> Any:
    flat: Any = 0
    for i, n in zip(index, shape):
        flat = flat * n + i
    return flat


def _is_concrete(*xs: Any) -> bool:
    return all(isinstance(x, int) for x in xs)


def select(values: list, idx: Any, other: Any = 0) -> Any:
    """``values[idx]`` for a concrete or symbolic index (``other`` outside)."""
    if _is_concrete(idx):
        return values[idx] if 0 <= idx < len(values) else other
    out = other
    for i in range(len(values) - 1, -1, -1):
        out = _ite(idx == i, values[i], out)
    return out


def _and(*xs: Any) -> Any:
    """``conj`` with Python constants folded away (keeps Z3 terms small)."""
    rest = []
    for x in xs:
        if x is True:
            continue
        if x is False:
            return False
        rest.append(x)
    if not rest:
        return True
    return rest[0] if len(rest) == 1 else conj(*rest)


def _ite(c: Any, a: Any, b: Any) -> Any:
    """``ite`` with a constant condition or equal branches folded away."""
    if c is True:
        return a
    if c is False or a is b:
        return b
    return ite(c, a, b)


def _candidates(shape: tuple[int, ...], index: tuple) -> Iterator[tuple[tuple, Any]]:
    """Every concrete index ``index`` may denote, with the condition that it does."""
    if any(_is_concrete(i) and not (0 <= i < n) for i, n in zip(index, shape)):
        return
    ranges = [[i] if _is_concrete(i) else list(range(n)) for i, n in zip(index, shape)]
    eqs = [None if _is_concrete(i) else {v: i == v for v in range(n)} for i, n in zip(index, shape)]
    for idx in product(*ranges):
        yield idx, _and(*[eqs[d][v] for d, v in enumerate(idx) if eqs[d] is not None])


def _nested_select(vals: list, shape: tuple[int, ...], index: tuple, eqs: list, offset: int = 0, dim: int = 0,
                   other: Any = 0) -> Any:
    """``vals`` at ``index`` by one ``ite`` chain per symbolic dimension (no
    conjunctions); ``other`` where a component falls outside its dimension."""
    if dim == len(shape):
        return vals[offset]
    stride = 1
    for n in shape[dim + 1:]:
        stride *= n
    i = index[dim]
    if _is_concrete(i):
        if not 0 <= i < shape[dim]:
            return other
        return _nested_select(vals, shape, index, eqs, offset + i * stride, dim + 1, other)
    out: Any = other
    for v in range(shape[dim] - 1, -1, -1):
        out = _ite(eqs[dim][v], _nested_select(vals, shape, index, eqs, offset + v * stride, dim + 1, other), out)
    return out


def _check_rank(shape: tuple[int, ...], index: tuple) -> None:
    if len(index) != len(shape):
        raise ValueError(f"index {index!r} has {len(index)} components; the array has shape {shape}")


def lookup(vals: list, shape: tuple[int, ...], index: tuple, other: Any = 0) -> Any:
    """The entry of a flat row-major array at ``index``, each symbolic
    component selecting within its own dimension only (``other`` outside
    the shape): a symbolic slot of a concrete group never reaches another
    group's entries."""
    _check_rank(shape, index)
    if _is_concrete(*index):
        if not all(0 <= i < n for i, n in zip(index, shape)):
            return other
        return vals[_flat(shape, index)]
    eqs = [None if _is_concrete(i) else {v: i == v for v in range(n)} for i, n in zip(index, shape)]
    return _nested_select(vals, shape, index, eqs, other=other)


def update(vals: list, shape: tuple[int, ...], index: tuple, value: Any, guard: Any = True) -> None:
    """Store ``value`` at ``index`` where ``guard`` holds (nothing outside
    the shape), per dimension as :func:`lookup` reads."""
    _check_rank(shape, index)
    if _is_concrete(*index):
        if all(0 <= i < n for i, n in zip(index, shape)):
            f = _flat(shape, index)
            vals[f] = value if guard is True else _ite(guard, value, vals[f])
        return
    for idx, cond in _candidates(shape, index):
        f = _flat(shape, idx)
        vals[f] = _ite(_and(guard, cond), value, vals[f])


@dataclass
class State:
    """Flat integer variables by name; ``p`` gives their shapes."""

    p: SystemParams
    v: dict[str, list]
    cut: Any = None
    """Set by proofs: ``cut(name, value)`` names an intermediate value with a
    fresh variable (keeping Z3 terms small); concrete runs leave it unset."""

    def copy(self) -> "State":
        return State(self.p, {k: list(x) for k, x in self.v.items()}, self.cut)

    def checkpoint(self, phase: str) -> "State":
        """The same state with every symbolic entry renamed at ``phase``."""
        if self.cut is None:
            return self
        return State(self.p, {k: [x if _is_concrete(x) else self.cut(f"{phase}.{k}[{i}]", x)
                                  for i, x in enumerate(vals)] for k, vals in self.v.items()}, self.cut)

    def get(self, name: str, *index: Any) -> Any:
        """The entry at ``index``; a symbolic component selects among the
        entries of its dimension only (0 outside the shape)."""
        return lookup(self.v[name], _shapes(self.p)[name], index)

    def set(self, name: str, index: tuple, value: Any, guard: Any = True) -> None:
        """Store ``value`` at ``index`` where ``guard`` holds (nothing outside the shape)."""
        update(self.v[name], self.p.shapes()[name], index, value, guard)

    def as_json(self) -> dict:
        return {k: [int(x) for x in vals] for k, vals in self.v.items()}


def initial_state(p: SystemParams) -> State:
    """No request, every slot free and garbage, the buffers as ``allocate`` leaves them."""
    pad = int(p.geo.pad_slot)
    init = {"live": -1, "table": pad, "reg": -1, "ck": GARBAGE, "ring": GARBAGE,
            "plan_flush_count": -1, "active_request_indices": -1, "src_slots": pad, "dst_slots": pad}
    return State(p, {k: [init.get(k, 0)] * _size(s) for k, s in p.shapes().items()})


def code(p: SystemParams, stream: Any, pos: Any) -> Any:
    """The ghost name of ``stream``'s prefix (or token) at ``pos``."""
    return stream * p.K + pos


# --------------------------------------------------------------------------
# The kernels' memory over the system state
# --------------------------------------------------------------------------


@dataclass
class TableMemory:
    """A ``spec.memory.Memory`` over small lists of vocabulary values.

    Shapes are concrete; indices, guards and values may be ints or Z3 terms.
    On concrete inputs an executed out-of-bounds access raises
    :class:`MemoryFault` (the oracle's behaviour); on symbolic ones it is
    recorded in ``faults`` as a condition, which the proofs require false.
    Loops over a symbolic range iterate the concrete range ``[0, loop_bound)``
    under a mask; a range reaching outside it is a fault too.
    """

    buffers: dict[str, tuple[tuple[int, ...], list]]
    loop_bound: int
    faults: list[tuple[str, Any]] = field(default_factory=list)
    _masks: list[Any] = field(default_factory=list)

    def _guard(self, guard: Any) -> Any:
        return _and(guard, *self._masks) if self._masks else guard

    @contextmanager
    def masked(self, guard: Any) -> Iterator[None]:
        if guard is True:
            yield
            return
        self._masks.append(guard)
        try:
            yield
        finally:
            self._masks.pop()

    def _check_bounds(self, buffer: str, index: tuple, guard: Any) -> tuple[int, ...]:
        shape, _ = self.buffers[buffer]
        if len(index) != len(shape):
            raise MemoryFault(buffer, index, shape)
        inside = conj(*[conj(i >= 0, i < n) for i, n in zip(index, shape)])
        if _is_concrete(guard, inside):
            if guard and not inside:
                raise MemoryFault(buffer, index, shape)
        else:
            self.faults.append((f"{buffer} index in bounds", conj(guard, negate(inside))))
        return shape

    def load(self, buffer: str, index: tuple, guard: Any = True, other: Any = 0) -> Any:
        """The entry at ``index`` (``other`` where ``guard`` is off). A
        symbolic component selects within its own dimension: where the
        bounds checks hold this is the flat address the kernel computes."""
        g = self._guard(guard)
        if g is False:
            return other
        shape = self._check_bounds(buffer, index, g)
        return _ite(g, lookup(self.buffers[buffer][1], shape, index, other), other)

    def store(self, buffer: str, index: tuple, value: Any, guard: Any = True) -> None:
        g = self._guard(guard)
        if g is False:
            return
        shape = self._check_bounds(buffer, index, g)
        update(self.buffers[buffer][1], shape, index, value, g)

    def each(self, lo: Any, hi: Any, guard: Any = True) -> Iterator[Any]:
        g = self._guard(guard)
        if _is_concrete(lo, hi, g):
            if g:
                yield from range(lo, hi)
            return
        self.faults.append(("loop range within the bound", conj(g, lo < hi, disj(lo < 0, hi > self.loop_bound))))
        for v in range(self.loop_bound):
            self._masks.append(conj(g, lo <= v, v < hi))
            try:
                yield v
            finally:
                self._masks.pop()


SYSTEM_ASSUMPTIONS = [
    LIVE_COL_IS_LAST_BLOCK,
    DECODE_ROW_FITS,
    ACCEPTED_WITHIN_ROW,
    ROW_NONEMPTY,
    DECODE_WITHIN_BLOCK,
    PREFILL_CHUNK_ON_BOUNDARY,
    FRESH_DISTINCT_DESTINATIONS,
    GROUPS_AGREE_ON_NULL,
    IS_PREFILLING_AGREES,
    FRESH_SLOT_IS_FREE,
]
"""Every caller assumption the system actions name."""


def check_dropped(dropped: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the entries of ``dropped`` that name no system
    assumption (a misspelt name would otherwise drop nothing, silently)."""
    known = {x.name for x in SYSTEM_ASSUMPTIONS}
    unknown = sorted(set(dropped) - known)
    if unknown:
        raise ValueError(f"dropped names no system assumption: {unknown}; the assumptions are "
                         f"{', '.join(sorted(known))}")


# --------------------------------------------------------------------------
# Actions
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PickSpec:
    """One nondeterministic choice of an action, with its domain ``[lo, hi]``."""

    name: str
    lo: int
    hi: int


@dataclass
class Outcome:
    """An action's result: the next state, its safety checks, and what it did."""

    state: State
    checks: list[tuple[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    """A caller action: picks, model guard, named assumptions, effect."""

    name: str
    picks: Callable[[SystemParams], list[PickSpec]]
    guard: Callable[[State, dict], Any]
    assumptions: Callable[[State, dict], list[tuple[str, Any]]]
    apply: Callable[[State, dict], Outcome]


def _b(x: Any) -> Any:
    """An int flag as a vocabulary boolean."""
    return x != 0


# ---- admit ---------------------------------------------------------------


def admit_picks(p: SystemParams) -> list[PickSpec]:
    out = [PickSpec("req", 0, p.num_reqs - 1), PickSpec("stream", 0, p.num_streams - 1),
           PickSpec("prompt", 1, p.max_len), PickSpec("hit", 0, p.num_cols - 1)]
    for g in range(p.groups):
        for c in range(p.num_cols - 1):
            out.append(PickSpec(f"hit_slot_{g}_{c}", 1, p.num_slots - 1))
    return out


def admit_guard(st: State, k: dict) -> Any:
    """A waiting request with a prompt arrives; the scheduler's prefix cache
    finds ``hit`` full blocks of its stream, each registered in every group.
    At least one prompt token is left to compute; mode none has no prefix cache."""
    p = st.p
    bs = p.geo.block_size
    r = k["req"]
    parts = [within(r, 0, p.num_reqs - 1), st.get("active", r) == 0,
             within(k["stream"], 0, p.num_streams - 1), within(k["prompt"], 1, p.max_len),
             within(k["hit"], 0, p.num_cols - 1), k["hit"] * bs < k["prompt"]]
    if not p.conv.materialize_prefixes:
        parts.append(k["hit"] == 0)
    for g in range(p.groups):
        for c in range(p.num_cols - 1):
            s = k[f"hit_slot_{g}_{c}"]
            parts.append(implies(c < k["hit"], conj(
                within(s, 1, p.num_slots - 1), st.get("reg", g, s) == code(p, k["stream"], (c + 1) * bs))))
    return conj(*parts)


def admit_assumptions(st: State, k: dict) -> list[tuple[str, Any]]:
    return []


def admit_apply(st: State, k: dict) -> Outcome:
    p = st.p
    out = st.copy()
    r, hit = k["req"], k["hit"]
    N = hit * p.geo.block_size
    for name, value in (("active", 1), ("stream", k["stream"]), ("prompt", k["prompt"]), ("N", N),
                        ("live", hit - 1)):
        out.set(name, (r,), value)
    for g in range(p.groups):
        for c in range(p.num_cols):
            s = k[f"hit_slot_{g}_{c}"] if c < p.num_cols - 1 else p.geo.pad_slot
            use = c < hit
            out.set("table", (g, r, c), ite(use, s, p.geo.pad_slot))
            out.set("ref", (g, s), out.get("ref", g, s) + 1, use)
    return Outcome(out, [], {"computed": N})


# ---- free ----------------------------------------------------------------


def free_picks(p: SystemParams) -> list[PickSpec]:
    return [PickSpec("req", 0, p.num_reqs - 1)]


def free_guard(st: State, k: dict) -> Any:
    """A running request finishes or is preempted (a preempted request comes
    back later through ``admit``, recomputing or hitting its published prefix)."""
    return conj(within(k["req"], 0, st.p.num_reqs - 1), st.get("active", k["req"]) == 1)


def free_apply(st: State, k: dict) -> Outcome:
    p = st.p
    out = st.copy()
    r = k["req"]
    pad = p.geo.pad_slot
    for g in range(p.groups):
        for c in range(p.num_cols):
            s = st.get("table", g, r, c)
            out.set("ref", (g, s), out.get("ref", g, s) - 1, s != pad)
            out.set("table", (g, r, c), pad)
    out.set("active", (r,), 0)
    out.set("live", (r,), -1)
    return Outcome(out, [])


# ---- step ----------------------------------------------------------------


def step_picks(p: SystemParams) -> list[PickSpec]:
    out = []
    for r in range(p.num_reqs):
        out += [PickSpec(f"sched_{r}", 0, 1), PickSpec(f"q_{r}", 0, p.max_len),
                PickSpec(f"acc_{r}", 0, int(p.geo.window)), PickSpec(f"live_col_{r}", 0, p.num_cols - 1),
                PickSpec(f"is_prefilling_{r}", 0, 1)]
        for g in range(p.groups):
            out += [PickSpec(f"slot_{g}_{r}", 1, p.num_slots - 1), PickSpec(f"null_{g}_{r}", 0, 1)]
    return out


@dataclass
class RowPlan:
    """The scheduler's decision for one request in one step."""

    r: int
    sched: Any
    prefill: Any
    q: Any
    acc: Any
    live_col: Any
    flag: Any
    final_chunk: Any
    ghost: GhostRow


def in_prefill(st: State, r: int) -> Any:
    """Request ``r`` has not computed its whole prompt: its next row is a prefill chunk."""
    return st.get("N", r) < st.get("prompt", r)


def _rows(st: State, k: dict) -> list[RowPlan]:
    p = st.p
    rows = []
    for r in range(p.num_reqs):
        N, prompt = st.get("N", r), st.get("prompt", r)
        sched = _b(k[f"sched_{r}"])
        prefill = in_prefill(st, r)
        q, acc = k[f"q_{r}"], k[f"acc_{r}"]
        live_col = k[f"live_col_{r}"] if p.conv.materialize_prefixes else 0
        flag = _b(k[f"is_prefilling_{r}"])
        ghost = GhostRow(N, q, acc, flag, live_col, r)
        rows.append(RowPlan(r, sched, prefill, q, acc, live_col, flag, N + q == prompt, ghost))
    return rows


def step_guard(st: State, k: dict) -> Any:
    """What the scheduler guarantees by construction: a step schedules at least
    one request (the model runner returns before any kernel when none is),
    and only running ones; a prefill row schedules at most the rest of its prompt; a decode
    row stays within the model length and accepts at most what it scheduled
    (at least one token is the assumption ``accepted_within_row``); the live
    column and the fresh slots are in range; a slot the pool hands out is a
    real slot."""
    p = st.p
    rows = _rows(st, k)
    parts = [disj(*[row.sched for row in rows])]
    for row in rows:
        r = row.r
        N, prompt = st.get("N", r), st.get("prompt", r)
        parts += [
            within(k[f"sched_{r}"], 0, 1), implies(row.sched, st.get("active", r) == 1),
            within(k[f"is_prefilling_{r}"], 0, 1),
            within(row.live_col, 0, p.num_cols - 1), within(row.q, 0, p.max_len), within(row.acc, 0, p.geo.window),
            implies(row.sched, ite(row.prefill, N + row.q <= prompt,
                                   conj(N + row.q <= p.max_len, row.acc <= row.q))),
        ]
        for g in range(p.groups):
            parts += [within(k[f"slot_{g}_{r}"], 1, p.num_slots - 1), within(k[f"null_{g}_{r}"], 0, 1)]
    return conj(*parts)


def shared_block(st: State, g: int, slot: Any, sched: Any) -> Any:
    """A scheduled row's live block ``slot`` (of group ``g``) is named by
    another table too (``ref > 1``): the step copies it on write."""
    return conj(sched, slot != st.p.geo.pad_slot, st.get("ref", g, slot) > 1)


def needs_fresh_slot(st: State, g: int, slot: Any, sched: Any, null: Any) -> Any:
    """A scheduled row takes a fresh slot in group ``g`` for its live column,
    whose slot is ``slot`` now: the column holds the null block and the
    row's ``null`` pick does not keep it null, or the block is shared
    (:func:`shared_block`). On ints a Python bool, on Z3 terms a term."""
    return disj(conj(sched, slot == st.p.geo.pad_slot, null == 0), shared_block(st, g, slot, sched))


def step_assumptions(st: State, k: dict) -> list[tuple[str, Any]]:
    """The caller assumptions one engine step relies on, named."""
    p, geo, conv = st.p, st.p.geo, st.p.conv
    out: list[tuple[str, Any]] = []
    rows = _rows(st, k)
    fresh = {(g, row.r): needs_fresh_slot(st, g, st.get("table", g, row.r, row.live_col), row.sched,
                                          k[f"null_{g}_{row.r}"])
             for row in rows for g in range(p.groups)}
    for row in rows:
        r, gh = row.r, row.ghost
        fwd = GhostRow(gh.computed_before, gh.query_len, gh.accepted, row.prefill, gh.live_col, r)
        s = row.sched
        out += [
            (LIVE_COL_IS_LAST_BLOCK.name, implies(s, LIVE_COL_IS_LAST_BLOCK(geo, conv, fwd))),
            (DECODE_ROW_FITS.name, implies(s, DECODE_ROW_FITS(geo, fwd))),
            (ACCEPTED_WITHIN_ROW.name, implies(s, ACCEPTED_WITHIN_ROW(geo, fwd))),
            (ROW_NONEMPTY.name, implies(s, ROW_NONEMPTY(geo, fwd))),
            (DECODE_WITHIN_BLOCK.name, implies(s, DECODE_WITHIN_BLOCK(geo, fwd))),
            (PREFILL_CHUNK_ON_BOUNDARY.name, implies(s, PREFILL_CHUNK_ON_BOUNDARY(geo, conv, fwd, row.final_chunk))),
            (IS_PREFILLING_AGREES.name, implies(s, IS_PREFILLING_AGREES(row.flag, row.prefill))),
            (GROUPS_AGREE_ON_NULL.name, implies(s, GROUPS_AGREE_ON_NULL([k[f"null_{g}_{r}"] for g in range(p.groups)]))),
        ]
        for g in range(p.groups):
            needs = fresh[g, r]
            slot = k[f"slot_{g}_{r}"]
            out.append((FRESH_SLOT_IS_FREE.name, implies(needs, FRESH_SLOT_IS_FREE(st.get("ref", g, slot)))))
            for other in rows:
                if other.r > r:
                    out.append((FRESH_DISTINCT_DESTINATIONS.name, implies(conj(needs, fresh[g, other.r]), FRESH_DISTINCT_DESTINATIONS(
                        slot, k[f"slot_{g}_{other.r}"], geo.pad_slot))))
    return out


def represents(st: State, g: int, slot: Any, stream: Any, n: Any) -> Any:
    """Slot ``slot`` of group ``g`` holds exactly ``stream``'s state after
    ``n`` tokens: checkpoint at ``n - nc`` and its committed rows hold the rest."""
    p = st.p
    R, W = int(p.geo.ring_len), int(p.geo.window)
    nc, rs, ck = st.get("nc", g, slot), st.get("rs", g, slot), st.get("ck", g, slot)
    base = n - nc
    parts = [base >= 0, ck == code(p, stream, base), nc >= 0, nc <= W]
    for j in range(W):
        row = materialize_ring_row(rs, j, R)
        parts.append(implies(j < nc, st.get("ring", g, slot, row) == code(p, stream, base + j)))
    return conj(*parts)


def replay(st: State, g: int, slot: Any, start: Any, count: Any, limit: int) -> Any:
    """The ghost of ``slot``'s checkpoint advanced by ``count`` ring rows from
    ``start`` (rows ``start + j`` by one conditional subtraction, as FlashInfer
    reads them): the prefix it then represents, or garbage."""
    p = st.p
    R = int(p.geo.ring_len)
    ck = st.get("ck", g, slot)
    ok = [ck >= 0, count >= 0, count <= limit]
    for j in range(limit):
        row = materialize_ring_row(start, j, R)
        ok.append(implies(j < count, st.get("ring", g, slot, row) == ck + j))
    return ite(conj(*ok), ck + count, GARBAGE)


def _copy_slot(out: State, src_state: State, g: int, src: Any, dst: Any, guard: Any) -> None:
    """A scheduler block copy: state, ring and trackers of ``src`` onto ``dst``."""
    R = int(out.p.geo.ring_len)
    for name in ("ck", "rs", "nc"):
        out.set(name, (g, dst), src_state.get(name, g, src), guard)
    for i in range(R):
        out.set("ring", (g, dst, i), src_state.get("ring", g, src, i), guard)


def batch_layout(p: SystemParams, rows: list[RowPlan]) -> tuple[dict[int, Any], Any, Any]:
    """Where each scheduled request sits in the batch: scheduled requests are
    packed into rows ``0..n-1`` in request order (reversed with
    ``swap_rows``). v1 launches ``n`` programs per group; v2 launches
    ``MAX_NUM_REQS`` rows, the ones past ``n`` being padding rows (CUDA-graph
    padding, ``idx_mapping = -1``). Returns (row of each request, rows
    scheduled, launch size)."""
    order = sorted(rows, key=lambda rw: p.batch_of(rw.r))
    where: dict[int, Any] = {}
    n: Any = 0
    for row in order:
        where[row.r] = n
        n = ite(row.sched, n + 1, n)
    launch = p.num_reqs if p.conv.has_idx_mapping else n
    return where, n, launch


def _kernel_buffers(st: State, rows: list[RowPlan], live_cols: list, src_cols: list) -> dict:
    """The worker's inputs in the kernels' layout, laid out by ``encode_row``."""
    p = st.p
    NR, G, C, S = p.num_reqs, p.groups, p.num_cols, p.num_slots
    conv = p.conv
    shapes = p.shapes()
    bufs: dict[str, tuple[tuple[int, ...], list]] = {
        "idx_mapping": ((NR,), [-1] * NR),
        "query_metadata": ((NR + 1,) if conv.cumulative else (NR,), [0] * (NR + 1 if conv.cumulative else NR)),
        "num_computed_tokens": ((NR,), [0] * NR),
        "num_accepted_tokens": ((NR,), [0] * NR),
        "is_prefilling": ((NR,), [0] * NR),
        "live_cols": ((NR,), [0] * NR),
        "src_cols": ((NR,), [-1] * NR),
        "dst_cols": ((NR,), [-1] * NR),
        "block_table": ((G, NR, C), [p.geo.pad_slot] * (G * NR * C)),
        "ring_start": ((G, S), list(st.v["rs"])),
        "num_committed": ((G, S), list(st.v["nc"])),
        "packed_base": ((G,), [sum(p.layers[:g]) * NR for g in range(G)]),
        "num_layers": ((G,), list(p.layers)),
    }
    for name in ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots"):
        bufs[name] = (shapes[name], list(st.v[name]))
    mem = TableMemory(bufs, max(C, max(p.layers)))
    where, n, _ = batch_layout(p, rows)
    cum: Any = 0
    for row in sorted(rows, key=lambda rw: p.batch_of(rw.r)):
        b = where[row.r]
        kreq = row.r if conv.has_idx_mapping else b
        ghost = replace(row.ghost, req=kreq, cum_base=cum)
        with mem.masked(row.sched):
            for buf, idx, value in encode_row(conv, b, ghost):
                mem.store(buf, idx, value)
            mem.store("live_cols", (kreq,), live_cols[row.r])
            mem.store("src_cols", (kreq,), src_cols[row.r])
            mem.store("dst_cols", (kreq,), live_cols[row.r])
            for g in range(G):
                for c in range(C):
                    mem.store("block_table", (g, b, c), st.get("table", g, row.r, c))
        if conv.cumulative:
            cum = ite(row.sched, cum + row.q, cum)
    if conv.cumulative:
        # padding rows past the scheduled ones have empty queries
        for b in range(NR + 1):
            mem.store("query_metadata", (b,), cum, b > n)
    return bufs


def _snapshot(bufs: dict) -> dict[str, tuple[tuple[int, ...], list]]:
    """The kernel inputs and state buffers as a launch found them."""
    return {name: (shape, list(values)) for name, (shape, values) in bufs.items()}


def _launch(p: SystemParams, mem: "TableMemory", launch: Any, program: Callable[[int, int], Any]) -> list:
    """Run ``program(batch, group)`` over the grid ``(launch, groups)``."""
    out = []
    for b in range(p.num_reqs):
        with mem.masked(b < launch):
            for g in range(p.groups):
                out.append(program(b, g))
    return out


def step_apply(st: State, k: dict) -> Outcome:
    """One engine step, in vLLM's order: schedule and allocate (with
    copy-on-write of a shared live block), block copies of moved live columns
    and tracker migration, the forward pass in every group, postprocess (commit
    and plan), compaction and materialize, then the scheduler's bookkeeping."""
    p, geo, conv = st.p, st.p.geo, st.p.conv
    pad, R, W = geo.pad_slot, int(geo.ring_len), int(geo.window)
    rows = _rows(st, k)
    checks: list[tuple[str, Any]] = []
    out = st.copy()

    # 1. allocation: a scheduled request's live column gets a fresh block in
    #    every group where it has none (or a null block when the scheduler
    #    says so); a live block shared with another table is copied first
    #    (copy-on-write: state, ring and trackers travel with the copy).
    for row in rows:
        for g in range(p.groups):
            cur = st.get("table", g, row.r, row.live_col)
            fresh = k[f"slot_{g}_{row.r}"]
            cow = shared_block(st, g, cur, row.sched)
            alloc = needs_fresh_slot(st, g, cur, row.sched, k[f"null_{g}_{row.r}"])
            out.set("table", (g, row.r, row.live_col), fresh, alloc)
            out.set("ref", (g, cur), out.get("ref", g, cur) - 1, cow)
            out.set("ref", (g, fresh), out.get("ref", g, fresh) + 1, alloc)
            out.set("reg", (g, fresh), -1, alloc)  # evicted from the prefix cache
            _copy_slot(out, st, g, cur, fresh, cow)

    out = out.checkpoint("alloc")
    # 2. live-column move: block copy (state, ring, trackers) then migration.
    src_cols = [ite(row.sched, st.get("live", row.r), -1) for row in rows]
    live_cols = [ite(row.sched, row.live_col, -1) for row in rows]
    before_copy = out.copy()
    for row in rows:
        for g in range(p.groups):
            src = before_copy.get("table", g, row.r, src_cols[row.r])
            dst = before_copy.get("table", g, row.r, row.live_col)
            moved = conj(row.sched, src_cols[row.r] >= 0, src_cols[row.r] != row.live_col, src != pad, dst != pad, src != dst)
            _copy_slot(out, before_copy, g, src, dst, moved)
    _, _, launch = batch_layout(p, rows)
    bufs = _kernel_buffers(out, rows, live_cols, src_cols)
    launches = [("migrate", _snapshot(bufs), launch)]
    mem = TableMemory(bufs, max(p.num_cols, max(p.layers)))
    _launch(p, mem, launch, lambda b, g: migrate_program(mem, pad, conv.has_idx_mapping, b, g))
    migration_faults = list(mem.faults)
    _sync_trackers(out, bufs)

    out = out.checkpoint("move")
    # 3. the forward pass, group by group, on each scheduled row's live slot.
    fwd = out.copy()
    for row in rows:
        r, N, stream = row.r, out.get("N", row.r), out.get("stream", row.r)
        for g in range(p.groups):
            slot = out.get("table", g, r, row.live_col)
            real = conj(row.sched, slot != pad)
            pnat, start, ck = out.get("nc", g, slot), out.get("rs", g, slot), out.get("ck", g, slot)
            # prefill: the chunked scan starts from the checkpoint alone (or from
            # zeros at position 0) and leaves the state after the chunk in it.
            pre = conj(real, row.prefill)
            start_ok = disj(N == 0, conj(ck == code(p, stream, N), pnat == 0))
            checks.append(("forward reads the request's prefix", implies(pre, start_ok)))
            fwd.set("ck", (g, slot), ite(start_ok, code(p, stream, N + row.q), GARBAGE), pre)
            # decode: FlashInfer's checkpoint rule and ring append.
            dec = conj(real, negate(row.prefill))
            checks.append(("forward reads the request's prefix", implies(dec, represents(out, g, slot, stream, N))))
            checks.append(("capacity: appended rows never overwrite committed rows", implies(dec, pnat + row.q <= R)))
            cp = kernel_checkpoints(pnat, row.q, W)
            folded = replay(out, g, slot, start, pnat, W)
            fwd.set("ck", (g, slot), folded, conj(dec, cp))
            base = materialize_ring_row(start, pnat, R)  # the append row (kernel_window_after)
            for j in range(p.max_step):
                tok = ite(j < row.acc, code(p, stream, N + j), GARBAGE)
                fwd.set("ring", (g, slot, materialize_ring_row(base, j, R)), tok, conj(dec, j < row.q))
        # a row the caller scheduled in no group is not run at all
    out = fwd.checkpoint("forward")

    # 4. postprocess (commit + plan), compaction, materialize.
    bufs = _kernel_buffers(out, rows, live_cols, src_cols)
    launches.append(("postprocess", _snapshot(bufs), launch))
    mem = TableMemory(bufs, max(p.num_cols, max(p.layers)))
    traces = _launch(p, mem, launch, lambda b, g: postprocess_program(mem, geo, conv, b, g))
    G = p.groups
    for b in range(p.num_reqs):
        first = traces[b * G].materialize
        checks += [("a publish happens in every group or in none", implies(b < launch, tr.materialize == first))
                   for tr in traces[b * G + 1:(b + 1) * G]]
    if conv.materialize_prefixes:
        lanes = next_power_of_2(p.num_reqs)
        with mem.masked(launch > 0):
            compact_program(mem, geo.max_num_reqs, launch, lanes)
    _sync_trackers(out, bufs)
    for name in ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots"):
        out.v[name] = list(bufs[name][1])
    checks += [(name, negate(f)) for name, f in migration_faults + mem.faults]
    out = out.checkpoint("postprocess")
    if conv.materialize_prefixes:
        checks += _materialize(out, bufs, launch)
    out = out.checkpoint("materialize")

    # 5. the scheduler's bookkeeping: positions, live columns, and the prefix
    #    cache registers every block this step filled.
    after = out.copy()
    for row in rows:
        r = row.r
        N = out.get("N", r)
        new_n = ite(row.prefill, N + row.q, N + row.acc)
        after.set("N", (r,), new_n, row.sched)
        after.set("live", (r,), row.live_col, row.sched)
        if conv.materialize_prefixes:
            register_filled_blocks(out, after, r, row.sched, N, new_n)
    return Outcome(after, checks, {"traces": traces, "launches": launches})


def register_filled_blocks(out: State, after: State, r: int, sched: Any, before: Any, now: Any) -> None:
    """The prefix cache registers each non-null block the step filled (its end
    in ``(before, now]``) under its stream and boundary."""
    p = out.p
    bs, pad = p.geo.block_size, p.geo.pad_slot
    stream = out.get("stream", r)
    for c in range(p.num_cols):
        end = (c + 1) * bs
        filled = conj(sched, before < end, end <= now)
        for g in range(p.groups):
            s = out.get("table", g, r, c)
            after.set("reg", (g, s), code(p, stream, end), conj(filled, s != pad))


def _sync_trackers(out: State, bufs: dict) -> None:
    out.v["rs"] = list(bufs["ring_start"][1])
    out.v["nc"] = list(bufs["num_committed"][1])


def _materialize(out: State, bufs: dict, launch: Any) -> list[tuple[str, Any]]:
    """FlashInfer's ``replayssm_materialize`` on the ghost. The work list is
    the compaction's output; the check ``work list is the active rows`` ties
    it to the rows whose plan is active (``plan_flush_count >= 0``, row below
    the launch size), in increasing order, so the pairs below are taken row by
    row. For each such row and each layer the destination's state becomes the
    source's checkpoint advanced by the plan's rows. Every layer of a group
    holds the same slots, so the group's ghost takes layer 0's pair and the
    check demands the other layers agree. All sources are read before any
    destination is written (one launch); a destination another pair reads,
    or writes with a different result, is a race."""
    p = out.p
    geo, NR, pad = p.geo, p.num_reqs, p.geo.pad_slot
    R, W = int(geo.ring_len), int(geo.window)
    before = out.copy()
    checks: list[tuple[str, Any]] = []
    work = bufs["active_request_indices"][1]
    src_t, dst_t = bufs["src_slots"][1], bufs["dst_slots"][1]
    starts, flushes = bufs["plan_ring_start"][1], bufs["plan_flush_count"][1]
    rows_active = [conj(b < launch, flushes[b] >= 0) for b in range(NR)]
    position: Any = 0
    for b in range(NR):
        checks.append(("work list is the active rows", implies(rows_active[b], select(work, position, -2) == b)))
        position = ite(rows_active[b], position + 1, position)
    for v in range(NR):
        checks.append(("work list is the active rows", implies(v >= position, work[v] == -1)))
    pairs = []
    for b in range(NR):
        start, flush = starts[b], flushes[b]
        for g in range(p.groups):
            base = sum(p.layers[:g]) * NR
            src, dst = src_t[base + b], dst_t[base + b]
            run = conj(rows_active[b], src != pad, dst != pad)
            for layer in range(1, p.layers[g]):
                e = base + layer * NR + b
                checks.append(("layers of a group publish the same pair", implies(rows_active[b], conj(
                    src_t[e] == src, dst_t[e] == dst))))
            checks.append(("materialize contract", implies(run, conj(
                start >= 0, start < R, flush >= 0, flush <= W, start + flush <= 2 * R))))
            value = replay(before, g, src, start, flush, W)
            pairs.append((g, run, src, dst, value))
            out.set("ck", (g, dst), value, run)
    for i, (g, run, src, dst, value) in enumerate(pairs):
        for j, (g2, run2, src2, dst2, value2) in enumerate(pairs):
            if i < j and g == g2:
                checks.append(("materialize pairs do not race", implies(conj(run, run2, dst == dst2), value == value2)))
            if i != j and g == g2:
                checks.append(("materialize pairs do not race", negate(conj(run, run2, dst == src2, src != dst))))
    return checks


ADMIT = Action("admit", admit_picks, admit_guard, admit_assumptions, admit_apply)
STEP = Action("step", step_picks, step_guard, step_assumptions, step_apply)
FREE = Action("free", free_picks, free_guard, lambda st, k: [], free_apply)
ACTIONS: dict[str, Action] = {a.name: a for a in (ADMIT, STEP, FREE)}


# --------------------------------------------------------------------------
# Invariants
# --------------------------------------------------------------------------


def live_slot(st: State, g: int, r: int) -> Any:
    return st.get("table", g, r, st.get("live", r))


def invariants(st: State) -> list[tuple[str, Any]]:
    """The system invariants as labelled conjuncts: properties first, then the
    auxiliary ones that make them inductive."""
    p = st.p
    geo, pad = p.geo, p.geo.pad_slot
    NR, G, S = p.num_reqs, p.groups, p.num_slots
    out: list[tuple[str, Any]] = []
    for g in range(G):
        for s in range(S):
            out.append(("range", conj(tracker_in_range("ring_start", st.get("rs", g, s), geo),
                                       tracker_in_range("num_committed", st.get("nc", g, s), geo))))
    for r in range(NR):
        act = st.get("active", r) == 1
        N, live, stream = st.get("N", r), st.get("live", r), st.get("stream", r)
        has_live = conj(act, live >= 0)
        for g in range(G):
            slot = live_slot(st, g, r)
            out.append(("refinement", implies(has_live, conj(
                slot != pad, st.get("ck", g, slot) == code(p, stream, N - st.get("nc", g, slot))))))
            out.append(("no_token_dropped", implies(has_live, represents(st, g, slot, stream, N))))
        for g in range(1, G):
            s0, sg = live_slot(st, 0, r), live_slot(st, g, r)
            out.append(("groups_agree", implies(has_live, conj(
                st.get("rs", 0, s0) == st.get("rs", g, sg), st.get("nc", 0, s0) == st.get("nc", g, sg)))))
    for g in range(G):
        for s in range(1, S):
            reg = st.get("reg", g, s)
            out.append(("canonical", implies(reg != -1, conj(
                st.get("rs", g, s) == 0, st.get("nc", g, s) == 0, st.get("ck", g, s) == reg))))
    return out


def auxiliary_invariants(st: State) -> list[tuple[str, Any]]:
    """What makes :func:`invariants` inductive: request shape, the block-table
    layout of a running request (columns past the live one null; the live one
    real; earlier ones null, published, or the one pending block the next
    boundary publishes), reference counts, and the prefill phase."""
    p = st.p
    geo, pad, conv = p.geo, p.geo.pad_slot, p.conv
    bs, T = geo.block_size, min(p.max_step, int(geo.window))
    NR, G, C, S = p.num_reqs, p.groups, p.num_cols, p.num_slots
    out: list[tuple[str, Any]] = []
    for g in range(G):
        for s in range(S):
            count = 0
            for r in range(NR):
                for c in range(C):
                    count = count + ite(conj(st.get("active", r) == 1, st.get("table", g, r, c) == s), 1, 0)
            if s != pad:
                out.append(("aux.refcount", st.get("ref", g, s) == count))
            reg = st.get("reg", g, s)
            out.append(("aux.registry", disj(reg == -1, conj(reg >= 0, s != pad))))
            if not conv.materialize_prefixes:
                out.append(("aux.registry", reg == -1))
        for r in range(NR):
            for c in range(C):
                out.append(("aux.table_range", within(st.get("table", g, r, c), 0, S - 1)))
    for r in range(NR):
        act, N, live = st.get("active", r), st.get("N", r), st.get("live", r)
        stream, prompt = st.get("stream", r), st.get("prompt", r)
        on = act == 1
        out.append(("aux.request", disj(act == 0, act == 1)))
        out.append(("aux.request", implies(negate(on), conj(live == -1, *[
            st.get("table", g, r, c) == pad for g in range(G) for c in range(C)]))))
        out.append(("aux.request", implies(on, conj(
            within(N, 0, p.max_len), within(prompt, 1, p.max_len), within(stream, 0, p.num_streams - 1),
            within(live, -1, C - 1), (live == -1) == (N == 0)))))
        if conv.materialize_prefixes:
            out.append(("aux.live_column", implies(conj(on, live >= 0), conj(
                N <= (live + 1) * bs, live * bs <= N + T - 2))))
        else:
            out.append(("aux.live_column", implies(on, live <= 0)))
        out.append(("aux.prefill_phase", implies(conj(on, in_prefill(st, r), live >= 0), conj(*[
            st.get("nc", g, live_slot(st, g, r)) == 0 for g in range(G)]))))
        for c in range(C):
            slots = [st.get("table", g, r, c) for g in range(G)]
            full = code(p, stream, (c + 1) * bs)
            for g in range(G):
                s = slots[g]
                reg, ref = st.get("reg", g, s), st.get("ref", g, s)
                null = s == pad
                out.append(("aux.groups_agree_on_null", implies(on, (slots[0] == pad) == null)))
                published = conj(negate(null), reg == full, (c + 1) * bs <= N)
                private = conj(negate(null), reg == -1, ref == 1)
                if not conv.materialize_prefixes:
                    # mode none: one private live slot per request, in column 0
                    out.append(("aux.table_layout", implies(on, ite(c > live, null, private))))
                    continue
                out.append(("aux.table_layout", implies(on, ite(
                    c > live, null,
                    ite(c == live, disj(published, conj(private, N < (c + 1) * bs)),
                        disj(null, published, conj(private, c == live - 1, N < live * bs)))))))
    return out


def check_invariants(st: State) -> list[str]:
    """The names of the invariant conjuncts a concrete state violates."""
    return sorted({n for n, t in invariants(st) + auxiliary_invariants(st) if not t})


# --------------------------------------------------------------------------
# Concrete simulation
# --------------------------------------------------------------------------


class StepRefused(ValueError):
    """An action whose guard or assumptions do not hold in this state."""


def _action(name: str) -> Action:
    """The action called ``name``; an unknown name is a ``ValueError`` naming the known ones."""
    if name not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {name!r}")
    return ACTIONS[name]


@lru_cache(maxsize=None)
def _pick_specs(p: SystemParams, action: str) -> dict[str, PickSpec]:
    return {s.name: s for s in _action(action).picks(p)}


def checked_picks(p: SystemParams, action: str, picks: dict) -> dict:
    """``picks`` over every pick of ``action`` (defaults filled in). A name the
    action does not declare (a misspelt pick would otherwise be ignored
    silently), a value that is not an int or lies outside the pick's domain
    ``[lo, hi]`` (the guard would refuse it without naming the pick) is a
    ``ValueError`` naming it; so is an unknown action."""
    specs = _pick_specs(p, action)
    unknown = [k for k in picks if k not in specs]
    if unknown:
        raise ValueError(f"{action}: unknown pick{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; the picks of {action} are {', '.join(specs)}")
    for name, value in picks.items():
        require_int(f"{action}: pick {name}", value, specs[name].lo, specs[name].hi)
    return {**{name: s.lo for name, s in specs.items()}, **picks}


def default_picks(p: SystemParams, action: str, **given: int) -> dict:
    """Every pick of ``action`` (defaults filled in), for hand-written runs."""
    return checked_picks(p, action, given)


def run_action(st: State, action: str, picks: dict, *, check_assumptions: bool = True,
               dropped: tuple[str, ...] = ()) -> Outcome:
    """Run one action on a concrete state; refuses it (``StepRefused``) when its
    guard or a (non-dropped) assumption fails. An unknown action, pick name or
    dropped assumption is a ``ValueError`` (see :func:`checked_picks`). Failed safety checks come
    back in ``Outcome.checks`` (see :func:`failed_checks`); only a concrete
    out-of-bounds access raises (``MemoryFault``)."""
    a = _action(action)
    picks = checked_picks(st.p, action, picks)
    check_dropped(dropped)
    if not a.guard(st, picks):
        raise StepRefused(f"{action}: guard does not hold for {picks}")
    if check_assumptions:
        bad = sorted({n for n, t in a.assumptions(st, picks) if n not in dropped and not t})
        if bad:
            raise StepRefused(f"{action}: caller assumptions violated: {', '.join(bad)}")
    return a.apply(st, picks)


def failed_checks(outcome: Outcome) -> list[str]:
    return sorted({n for n, t in outcome.checks if not t})


def system_conventions() -> list[Conventions]:
    """The conventions a caller can combine: align mode always passes live columns."""
    return [c for c in Conventions.all() if not (c.materialize_prefixes and c.live_col_is_zero)]


def _free_slots(st: State, g: int) -> list[int]:
    return [s for s in range(1, st.p.num_slots) if st.get("ref", g, s) == 0]


def prefix_hit_levels(st: State, stream: int, prompt: int) -> list[dict[str, int]]:
    """The prefix hits the prefix cache can serve a new request of ``stream``
    with ``prompt`` tokens: entry ``h - 1`` holds the ``hit_slot`` picks of a
    hit on blocks ``0 .. h - 1`` (each registered in every group)."""
    p, bs = st.p, st.p.geo.block_size
    levels: list[dict[str, int]] = []
    picks: dict[str, int] = {}
    hit = 0
    while p.conv.materialize_prefixes and (hit + 1) * bs < prompt and hit < p.num_cols - 1:
        found = []
        for g in range(p.groups):
            slots = [s for s in range(1, p.num_slots) if st.get("reg", g, s) == code(p, stream, (hit + 1) * bs)]
            found.append(slots[0] if slots else None)
        if None in found:
            break
        for g, slot in enumerate(found):
            picks[f"hit_slot_{g}_{hit}"] = slot
        hit += 1
        levels.append(dict(picks))
    return levels


@dataclass(frozen=True)
class RowOption:
    """One row a running request may schedule in a step under every caller
    assumption: query length ``q``, the accepted counts it allows (``1 .. q``
    for a decode row; ``0 .. W`` for a prefill row, which the step ignores),
    the ``is_prefilling`` flag and the live column the row ends in."""

    q: int
    accepted: range
    prefilling: int
    live_col: int

    def picks(self, r: int, acc: int) -> dict[str, int]:
        """The step picks of request ``r`` taking this row with ``acc`` accepted."""
        return {f"sched_{r}": 1, f"q_{r}": self.q, f"acc_{r}": acc, f"live_col_{r}": self.live_col,
                f"is_prefilling_{r}": self.prefilling}


def row_options(st: State, r: int) -> list[RowOption]:
    """Every row running request ``r`` may take in the next step: a prefill
    chunk ending on a block boundary or at the prompt's end (any length up
    to the rest of the prompt in mode none), or a decode row of 1 .. T
    tokens within the window, the ring's step room, the block and the model
    length (none left: no option)."""
    p = st.p
    bs, W = int(p.geo.block_size), int(p.geo.window)
    N, prompt = st.get("N", r), st.get("prompt", r)
    if in_prefill(st, r):
        rest = prompt - N
        if p.conv.materialize_prefixes:
            qs = [rest] + [m * bs - N for m in range(N // bs + 1, p.num_cols + 1) if N < m * bs < prompt]
        else:
            qs = list(range(1, rest + 1))
        rows = [(q, range(0, W + 1), 1) for q in qs]
    else:
        top = min(p.max_step, W, bs, p.max_len - N)
        rows = [(q, range(1, q + 1), 0) for q in range(1, top + 1)]
    return [RowOption(q, acc, flag, (N + q + bs - 1) // bs - 1 if p.conv.materialize_prefixes else 0)
            for q, acc, flag in rows]


def _fresh_slots(st: State, r: int, live_col: int, taken: dict[int, set],
                 choose: Callable[[list[int]], int]) -> dict[int, int] | None:
    """A fresh slot for each group where request ``r``'s row ending in
    ``live_col`` needs one (:func:`needs_fresh_slot`; these generators never
    keep a column null), chosen by ``choose`` among the free slots not
    ``taken`` by an earlier row; None when some group has none left."""
    slots = {}
    for g in range(st.p.groups):
        if needs_fresh_slot(st, g, st.get("table", g, r, live_col), True, 0):
            free = [s for s in _free_slots(st, g) if s not in taken[g]]
            if not free:
                return None
            slots[g] = choose(free)
    return slots


def sample_picks(st: State, rng: Any, *, weights: tuple[int, int, int] = (2, 8, 1)) -> tuple[str, dict]:
    """A random action with picks that satisfy its guard and every caller
    assumption: the generator the concrete walks (and later the fuzzer) use."""
    p = st.p
    active = [r for r in range(p.num_reqs) if st.get("active", r) == 1]
    waiting = [r for r in range(p.num_reqs) if st.get("active", r) == 0]
    choices = [a for a, ok in zip(("admit", "step", "free"), (waiting, active, active)) if ok]
    while True:
        action = rng.choices(choices, [dict(zip(("admit", "step", "free"), weights))[a] for a in choices])[0]
        if action == "admit":
            r = rng.choice(waiting)
            stream = rng.randrange(p.num_streams)
            prompt = rng.randint(1, p.max_len)
            picks = default_picks(p, "admit", req=r, stream=stream, prompt=prompt)
            levels = prefix_hit_levels(st, stream, prompt)
            picks.update(levels[-1] if levels else {})
            picks["hit"] = rng.randint(0, len(levels))
            return action, picks
        if action == "free":
            return action, default_picks(p, "free", req=rng.choice(active))
        picks = default_picks(p, "step")
        taken: dict[int, set] = {g: set() for g in range(p.groups)}
        any_sched = False
        for r in active:
            if rng.random() < 0.2:
                continue
            options = row_options(st, r)
            if not options:
                continue
            row = rng.choice(options)
            acc = rng.choice(row.accepted)
            slots = _fresh_slots(st, r, row.live_col, taken, rng.choice)
            if slots is None:
                continue
            for g, s in slots.items():
                taken[g].add(s)
                picks[f"slot_{g}_{r}"] = s
            picks.update(row.picks(r, acc))
            any_sched = True
        if any_sched:
            return action, picks
        choices = [a for a in choices if a != "step"] or ["free"]


def enumerate_picks(st: State, *, prompts: tuple[int, ...] | None = None) -> Iterator[tuple[str, dict]]:
    """Every action a caller may take in ``st`` under every caller assumption,
    for exhaustive bounded exploration. Two reductions keep it finite and
    small, both sound by symmetry of slot ids (they are only compared for
    equality): a fresh block is the lowest free slot of each group, and a
    prefix hit takes the lowest matching registered slot. A prefill row's
    accepted count is 0 (the step ignores it). ``prompts`` limits the prompt
    lengths admitted (default: all)."""
    p = st.p
    for r in range(p.num_reqs):
        if st.get("active", r) == 1:
            yield "free", default_picks(p, "free", req=r)
            continue
        for stream in range(p.num_streams):
            for prompt in prompts or range(1, p.max_len + 1):
                picks = default_picks(p, "admit", req=r, stream=stream, prompt=prompt)
                yield "admit", dict(picks)
                for hit, level in enumerate(prefix_hit_levels(st, stream, prompt), 1):
                    yield "admit", {**picks, **level, "hit": hit}
    options: list[list[tuple[RowOption, int] | None]] = []
    for r in range(p.num_reqs):
        mine: list[tuple[RowOption, int] | None] = [None]
        if st.get("active", r) == 1:
            mine += [(row, acc) for row in row_options(st, r)
                     for acc in (row.accepted[:1] if row.prefilling else row.accepted)]
        options.append(mine)
    for combo in product(*options):
        if not any(combo):
            continue
        picks = default_picks(p, "step")
        taken: dict[int, set] = {g: set() for g in range(p.groups)}
        for r, choice in enumerate(combo):
            if choice is None:
                continue
            row, acc = choice
            picks.update(row.picks(r, acc))
            slots = _fresh_slots(st, r, row.live_col, taken, lambda free: free[0])
            if slots is None:
                break
            for g, s in slots.items():
                taken[g].add(s)
                picks[f"slot_{g}_{r}"] = s
        else:
            yield "step", picks


def shares_a_block(st: State) -> bool:
    """Two running requests name one physical slot (a prefix-cache hit)."""
    p = st.p
    rows = [{st.get("table", 0, r, c) for c in range(p.num_cols)} - {p.geo.pad_slot}
            for r in range(p.num_reqs) if st.get("active", r) == 1]
    return any(a & b for i, a in enumerate(rows) for b in rows[i + 1:])


def explore(p: SystemParams, depth: int, *, prompts: tuple[int, ...] | None = None,
            dropped: tuple[str, ...] = (), extra: Callable[[State], Iterator[tuple[str, dict]]] | None = None,
            budget: int | None = None) -> dict:
    """Exhaustive breadth-first exploration of every run of at most ``depth``
    actions from the initial state (states deduplicated). Returns statistics
    and, on the first violated check or invariant, the run that reaches it as
    a list of (action, picks) together with what broke."""

    start = initial_state(p)
    key = lambda s: tuple(tuple(v) for v in s.v.values())
    seen = {key(start): None}
    parent: dict[tuple, tuple] = {}
    frontier = [start]
    stats = {"states": 1, "transitions": 0, "depth": 0, "actions": {}}
    for d in range(depth):
        nxt = []
        for st in frontier:
            moves = list(enumerate_picks(st, prompts=prompts))
            if extra is not None:
                moves += list(extra(st))
            for action, picks in moves:
                try:
                    out = run_action(st, action, picks, dropped=dropped)
                except StepRefused:
                    continue
                stats["transitions"] += 1
                stats["actions"][action] = stats["actions"].get(action, 0) + 1
                k = key(out.state)
                bad = failed_checks(out)
                if k not in seen:  # a state's invariants are checked when it is first reached
                    bad += [f"inv: {n}" for n in sorted({n for n, x in invariants(out.state) if not x})]
                if bad:
                    run = [(action, picks)]
                    cur = key(st)
                    while cur in parent:
                        prev, a, pk = parent[cur]
                        run.append((a, pk))
                        cur = prev
                    stats["depth"] = d + 1
                    return {**stats, "status": "failed", "violated": bad, "run": run[::-1]}
                if k not in seen:
                    seen[k] = None
                    parent[k] = (key(st), action, picks)
                    nxt.append(out.state)
                    stats["states"] += 1
                    if shares_a_block(out.state):
                        stats["shared_states"] = stats.get("shared_states", 0) + 1
                    if budget is not None and stats["states"] > budget:
                        return {**stats, "status": "budget", "depth": d}
        frontier = nxt
        stats["depth"] = d + 1
        if not frontier:
            break
    return {**stats, "status": "proved"}
