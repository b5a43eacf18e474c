"""The worlds the system obligations run in, and the symbolic states and picks they use.

The geometry, sizes and conventions are concrete (constexprs stay concrete so
the problems stay linear); every state variable and pick is symbolic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replayssm.spec.assumptions import block_table_width
from replayssm.spec.geometry import Conventions, Geometry
from replayssm.spec.system import ACTIONS, INVARIANTS, Named, Picks, State, SystemParams, initial_state, picks_from_flat
from replayssm.spec.vocab import conj

from .terms import named_int

EVERY_INVARIANT = tuple(inv.name for inv in INVARIANTS)
"""What an obligation proving the whole inductive invariant (or checking every invariant) proves,
by invariant name (``prove --invariant NAME``)."""

SYSTEM_GEOMETRY = Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=4)
"""Two requests, block size 2, W = 2, R = 4 (decode rows of up to 2 tokens)."""

SYSTEM_CONVENTIONS: dict[str, Conventions] = {
    "v1-align": Conventions(cumulative=False, post_step=False, has_idx_mapping=False,
                            materialize_prefixes=True, live_col_is_zero=False),
    "v2-align": Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                            materialize_prefixes=True, live_col_is_zero=False),
    "v1-none": Conventions(cumulative=False, post_step=False, has_idx_mapping=False,
                           materialize_prefixes=False, live_col_is_zero=True),
    "v2-none": Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                           materialize_prefixes=False, live_col_is_zero=True),
    "v2-all": Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                          materialize_prefixes=True, live_col_is_zero=False),
}
"""Both callers in modes none and align (each step picks its batch order,
so a v2 ``idx_mapping`` is any permutation of the scheduled requests), and
the v2 caller in mode ``all`` under an A1-era host, which publishes in it
(the flags of align: ``all_mode_materializes_as_align``).
``postprocess.conventions_agree`` covers the remaining query/count
combinations at the kernel level."""

SYSTEM_MODES: dict[str, str] = {"v2-all": "all", "v2-all-unpublished": "all"}
"""The cache mode of each world whose mode is not the one its conventions
serve by default (``Conventions.mode``)."""

UNPUBLISHED_ALL: dict[str, Conventions] = {
    "v2-all-unpublished": Conventions(cumulative=True, post_step=True, has_idx_mapping=True,
                                      materialize_prefixes=False, live_col_is_zero=False),
}
"""Mode ``all`` under the reference's (and A3's) host, which publishes in
align mode only (``all_mode_unpublished_in_reference``): the flags of mode
none but live columns given, a table as wide as align's, prefill chunks
anywhere, the prefix cache registering what the steps fill. Not a world of
the proofs: its counterexample is a finding about the reference
(``docs/assumptions.md`` "Cache modes", ``verify.system_findings``)."""


_WORLDS = {**SYSTEM_CONVENTIONS, **UNPUBLISHED_ALL}


def system_params(conv: Conventions, geo: Geometry = SYSTEM_GEOMETRY, model_blocks: int = 2,
                  cache_mode: str | None = None, **kw: Any) -> SystemParams:
    """The world of ``conv`` in ``cache_mode`` (``None``: the one ``conv``
    serves by default): requests of up to ``model_blocks`` blocks in a block
    table as vLLM sizes it (``block_table_width``: a column per block in
    align and all mode, one live column in mode none, where chunks past the
    first block then run in that column)."""
    bs = int(geo.block_size)
    mode = conv.mode if cache_mode is None else cache_mode
    kw = {"num_cols": block_table_width(mode, model_blocks * bs, bs), "max_model_len": model_blocks * bs,
          "num_slots": 7, **kw}
    return SystemParams(geo, conv, cache_mode=mode, **kw)


def world_params(label: str, geo: Geometry = SYSTEM_GEOMETRY, model_blocks: int = 2, **kw: Any) -> SystemParams:
    """:func:`system_params` of the world ``label`` (of :data:`SYSTEM_CONVENTIONS`
    or :data:`UNPUBLISHED_ALL`), in its cache mode."""
    return system_params(_WORLDS[label], geo, model_blocks, SYSTEM_MODES.get(label), **kw)


def symbolic_state(p: SystemParams, tag: str) -> State:
    """A state whose every variable is the Z3 integer ``<tag>.<name>[i]``."""
    return State(p, {k: [named_int(f"{tag}.{k}[{i}]") for i in range(len(v))]
                      for k, v in initial_state(p).v.items()})


def symbolic_picks(p: SystemParams, action: str, tag: str) -> Picks:
    """``action``'s picks record with every leaf the Z3 integer ``<tag>.<path>``."""
    a = ACTIONS[action]
    return picks_from_flat(a.record, {s.name: named_int(f"{tag}.{s.name}") for s in a.picks(p)})


def group_parts(parts: Iterable[Named], prefix: str = "") -> list[Named]:
    """Labelled conjuncts with one name merged into one goal part."""
    merged: dict[str, list] = {}
    for n, t in parts:
        merged.setdefault(prefix + n, []).append(t)
    return [(n, conj(*ts)) for n, ts in merged.items()]



REFERENCE_CALLER: dict[str, str] = {"v1-align": "v2-align", "v1-none": "v2-none"}
"""A v1 step shape is proved through the v2 step of the same shape and mode
(``system_proofs.reference_claim``): v1 and v2 differ only in how the worker
lays the rows out for the kernels (per-row or cumulative queries, counts
before or after the step, per-request inputs at the batch row or through
``idx_mapping``)."""

DIRECT = tuple(label for label in SYSTEM_CONVENTIONS if label not in REFERENCE_CALLER)
"""The callers whose step shapes are proved against the invariant itself."""

ALIGN = tuple(label for label, conv in SYSTEM_CONVENTIONS.items() if conv.materialize_prefixes)
"""The system worlds that publish and plan (align mode, and all mode under an A1-era host)."""


def world_label(p: SystemParams) -> str:
    """The name of ``p``'s world in :data:`SYSTEM_CONVENTIONS` or :data:`UNPUBLISHED_ALL`
    (its conventions and cache mode)."""
    return next(label for label, c in _WORLDS.items() if c == p.conv and SYSTEM_MODES.get(label, c.mode) == p.mode)

