"""The system model's world and state.

:class:`SystemParams` fixes a bounded world; :class:`State` holds every
variable of the model as a flat list of vocabulary values (Python ints in the
concrete simulation, Z3 terms in the proofs). The variables, concrete and
ghost, are listed in the package docstring (``spec.system``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..assumptions import MODEL_FITS_TABLE
from ..arrays import int_offset, is_concrete, lookup, size, update
from ..geometry import NULL_BLOCK_ID, Conventions, Geometry, check_cache_mode, require_int
from ..vocab import PLAIN_TYPES, Cond, Value

GARBAGE = -1
"""The ghost value of a state or ring row that represents no prefix."""

WORKER_BUFFERS = ("plan_ring_start", "plan_flush_count", "active_request_indices", "src_slots", "dst_slots")
"""The worker's per-step buffers (the plan, the work list, the packed source
and destination tables), kept by batch row: a step writes every entry of
them it reads, and no invariant reads them."""



@dataclass(frozen=True)
class SystemParams:
    """A bounded world. Constexprs (geometry) are concrete so the Z3 problems
    stay linear. The batch order is no part of the world: each engine step
    picks its own (``StepPicks.order``)."""

    geo: Geometry
    conv: Conventions
    layers: tuple[int, ...] = (1, 2)
    num_cols: int = 4
    num_slots: int = 7
    num_streams: int = 2
    max_model_len: int | None = None
    """The longest request; ``None``: ``num_cols * block_size`` (the table
    full). Align and all mode need a column per block of it
    (``model_fits_table``); in mode none the table's one live column holds
    any length, as vLLM sizes it (``spec.assumptions.block_table_width``)."""
    cache_mode: str | None = None
    """vLLM's cache mode (``spec.geometry.CACHE_MODES``); ``None``: the one
    ``conv`` serves by default (``Conventions.mode``). ``all`` runs under
    either host: with ``materialize_prefixes`` on (A1-era hosts publish in
    it) or off (the reference's and A3's do not); the caller's rules (live
    column, chunks, table width, covered blocks, prefix cache) follow the
    mode, the kernels' flags ``conv``."""

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
        if self.cache_mode is None:
            object.__setattr__(self, "cache_mode", self.conv.mode)
        check_cache_mode(self.cache_mode, self.conv)
        if self.max_model_len is None:
            object.__setattr__(self, "max_model_len", self.num_cols * int(self.geo.block_size))
        require_int("max_model_len", self.max_model_len, 1)
        if not MODEL_FITS_TABLE(self.mode, self.max_model_len, int(self.geo.block_size), self.num_cols):
            raise ValueError(f"max_model_len must be at most num_cols * block_size = "
                             f"{self.num_cols * int(self.geo.block_size)} in {self.mode} mode, "
                             f"got {self.max_model_len}")
        # computed once per world: reading it must not hash the params (the hot path of concrete runs)
        object.__setattr__(self, "_shape_table", self._shapes())

    @property
    def mode(self) -> str:
        """``cache_mode``, resolved."""
        return self.cache_mode  # type: ignore[return-value]

    @property
    def num_reqs(self) -> int:
        return int(self.geo.max_num_reqs)

    @property
    def groups(self) -> int:
        return len(self.layers)

    @property
    def max_len(self) -> int:
        """``max_model_len``: the longest request."""
        return int(self.max_model_len)  # type: ignore[arg-type]

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
        return self._shape_table  # type: ignore[attr-defined]

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

    def describe(self) -> dict[str, object]:
        g = self.geo
        return {"max_num_reqs": g.max_num_reqs, "block_size": g.block_size, "window": g.window,
                "ring_len": g.ring_len, "conventions": self.conv.label(), "layers": list(self.layers),
                "num_cols": self.num_cols, "num_slots": self.num_slots, "num_streams": self.num_streams,
                "max_model_len": self.max_model_len, "cache_mode": self.cache_mode}


@dataclass
class State:
    """Flat integer variables by name; ``p`` gives their shapes."""

    p: SystemParams
    v: dict[str, list[Value]]
    cut: Callable[[str, Value], Value] | None = None
    """Set by proofs: ``cut(name, value)`` names an intermediate value with a
    fresh variable (keeping Z3 terms small); concrete runs leave it unset."""

    def copy(self) -> "State":
        return State(self.p, {k: list(x) for k, x in self.v.items()}, self.cut)

    def checkpoint(self, phase: str) -> "State":
        """The same state with every symbolic entry renamed at ``phase``."""
        if self.cut is None:
            return self
        return State(self.p, {k: [x if is_concrete(x) else self.cut(f"{phase}.{k}[{i}]", x)
                                  for i, x in enumerate(vals)] for k, vals in self.v.items()}, self.cut)

    def get(self, name: str, *index: Value) -> Value:
        """The entry at ``index``; a symbolic component selects among the
        entries of its dimension only (0 outside the shape)."""
        shape = self.p._shape_table[name]  # type: ignore[attr-defined]
        # the concrete fast path: int_offset inlined (the hottest call of the explicit BMC)
        if len(index) == len(shape) and PLAIN_TYPES.issuperset(map(type, index)):
            flat = 0
            for i, n in zip(index, shape):
                if not 0 <= i < n:
                    return 0
                flat = flat * n + i
            return self.v[name][flat]
        return lookup(self.v[name], shape, index)

    def set(self, name: str, index: tuple[Value, ...], value: Value, guard: Cond = True) -> None:
        """Store ``value`` at ``index`` where ``guard`` holds (nothing outside the shape)."""
        shape = self.p._shape_table[name]  # type: ignore[attr-defined]
        if guard is True or guard is False:
            flat = int_offset(shape, index)
            if flat is not None:
                if guard and flat >= 0:
                    self.v[name][flat] = value
                return
        update(self.v[name], shape, index, value, guard)

    def as_json(self) -> dict[str, list[int]]:
        return {k: [int(x) for x in vals] for k, vals in self.v.items()}


def initial_state(p: SystemParams) -> State:
    """No request, every slot free and garbage, the buffers as ``allocate`` leaves them."""
    pad = int(p.geo.pad_slot)
    init = {"live": -1, "table": pad, "reg": -1, "ck": GARBAGE, "ring": GARBAGE,
            "plan_flush_count": -1, "active_request_indices": -1, "src_slots": pad, "dst_slots": pad}
    return State(p, {k: [init.get(k, 0)] * size(s) for k, s in p.shapes().items()})


def code(p: SystemParams, stream: Value, pos: Value) -> Value:
    """The ghost name of ``stream``'s prefix (or token) at ``pos``."""
    return stream * p.K + pos
