"""Binding of each cache group's tracker pair, and the tensors block copies carry.

An abstract model of ``initialize_replayssm_ring_trackers`` (one call of
:func:`bind_group` per ReplaySSM cache group) and of
``get_replayssm_block_copy_tensors`` (:func:`block_copy_tensors`).

A tensor is abstract: an *identity* (an int standing for its storage, i.e. its
data address: two layers hold "the same tensor" iff the identities are equal;
a view ``t[:n]`` of ``t`` keeps ``t``'s identity, since it starts at the same
address), a *length* (``numel``) and a *device* (an int). Layer indices are
the ints ``extract_layer_index`` reads from the layer names.

Everything is written in the spec vocabulary over fixed-size Python lists, so
the same functions run on Python ints (the oracle) and on Z3 ``Sym`` terms.

Rules of one group's binding (layers in the group's ``layer_names`` order,
only ReplaySSM layers, at least one):

* the first layer's pair is *kept* iff both of its tensors have at least
  ``num_blocks`` entries, both are on the state cache's device, and every
  layer of the group holds exactly that pair (same start and committed
  identities); it is re-bound as a view of its first ``num_blocks`` entries,
  so captured CUDA-graph addresses survive;
* otherwise a fresh zeroed pair of exactly ``num_blocks`` entries is
  allocated on the state's device;
* every layer of the group is bound to the same pair;
* exactly one layer plans: the one with the lowest layer index (the first in
  name order among equal indices, as Python's ``min`` picks), not
  necessarily the first name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .assumptions import Assumption
from .provenance import PAGE, T6, cite, guaranteed, not_guaranteed
from .vocab import Cond, Value, conj, disj, imin, ite, negate


@dataclass(frozen=True)
class TrackerPair:
    """The two tracker tensors a layer refers to before binding."""

    start: Value
    """Identity of ``_replayssm_ring_start``."""
    committed: Value
    """Identity of ``_replayssm_prev_num_accepted`` (the committed counts)."""
    start_len: Value
    committed_len: Value
    start_device: Value
    committed_device: Value


@dataclass(frozen=True)
class GroupLayer:
    """One ReplaySSM layer of a cache group: its layer index and current pair."""

    layer_index: Value
    trackers: TrackerPair


@dataclass(frozen=True)
class BoundPair(TrackerPair):
    """The pair a layer holds after binding (two views, or two fresh tensors)."""

    zeroed: Cond
    """True where the pair was freshly allocated (all entries zero); on the
    keep path the entries are the old pair's first ``num_blocks`` values."""


@dataclass(frozen=True)
class GroupBinding:
    """The outcome of binding one cache group."""

    kept: Cond
    """Whether the first layer's existing pair was kept."""
    layers: list[BoundPair]
    """Each layer's bound pair, in the group's layer order."""
    planner: list[Cond]
    """Each layer's ``_plans_replayssm_decode`` flag, in the group's layer order."""


def view_length(length: Value, num_blocks: Value) -> Value:
    """Entries of ``t[:num_blocks]`` for a tensor of ``length`` entries
    (``num_blocks >= 0``: a state cache's first dimension)."""
    return imin(length, num_blocks)


def can_keep(layers: Sequence[GroupLayer], num_blocks: Value, device: Value) -> Cond:
    """The keep condition: the first layer's pair is long enough, on the
    state's device, and held by every layer of the group."""
    first = layers[0].trackers
    return conj(
        first.start_len >= num_blocks,
        first.committed_len >= num_blocks,
        first.start_device == device,
        first.committed_device == device,
        *[conj(layer.trackers.start == first.start, layer.trackers.committed == first.committed) for layer in layers],
    )


def planner_flags(layer_indices: Sequence[Value]) -> list[Cond]:
    """One flag per layer, set on exactly the first layer (in order) of lowest
    index: ``min(names, key=extract_layer_index)``."""
    best_pos: Value = 0
    best_index = layer_indices[0]
    for pos, index in enumerate(layer_indices[1:], start=1):
        better = index < best_index
        best_pos = ite(better, pos, best_pos)
        best_index = ite(better, index, best_index)
    return [best_pos == pos for pos in range(len(layer_indices))]


def bind_group(
    layers: Sequence[GroupLayer],
    num_blocks: Value,
    device: Value,
    fresh_start: Value,
    fresh_committed: Value,
) -> GroupBinding:
    """Bind one cache group.

    ``layers`` are the group's ReplaySSM layers in ``layer_names`` order (at
    least one); ``num_blocks`` and ``device`` are the first dimension and
    device of the first layer's state cache; ``fresh_start`` and
    ``fresh_committed`` are the identities a fresh allocation would get.
    Returns the pair every layer is bound to and the planner flags.
    """
    if not layers:
        raise ValueError("a group without ReplaySSM layers is skipped, not bound")
    first = layers[0].trackers
    keep = can_keep(layers, num_blocks, device)
    pair = BoundPair(
        start=ite(keep, first.start, fresh_start),
        committed=ite(keep, first.committed, fresh_committed),
        start_len=ite(keep, view_length(first.start_len, num_blocks), num_blocks),
        committed_len=ite(keep, view_length(first.committed_len, num_blocks), num_blocks),
        start_device=ite(keep, first.start_device, device),
        committed_device=ite(keep, first.committed_device, device),
        zeroed=negate(keep),
    )
    return GroupBinding(keep, [pair for _ in layers], planner_flags([layer.layer_index for layer in layers]))


@dataclass(frozen=True)
class CopyLayer:
    """A layer of the forward context as the block-copy collector sees it."""

    copied: Cond
    """``isinstance(layer, MambaBase) and layer.use_flashinfer_replayssm``."""
    start: Value
    committed: Value


def block_copy_tensors(layers: Sequence[CopyLayer]) -> list[tuple[Cond, Value]]:
    """The tracker tensors block copies include, as ``(present, identity)``
    entries: each listed layer contributes its start then its committed tensor
    (a fixed-size list; an entry is absent where its layer is not listed)."""
    out: list[tuple[Cond, Value]] = []
    for layer in layers:
        out.append((layer.copied, layer.start))
        out.append((layer.copied, layer.committed))
    return out


def includes(tensors: Sequence[tuple[Cond, Value]], identity: Value) -> Cond:
    """Whether the tensor ``identity`` is among the present entries."""
    return disj(False, *[conj(present, ident == identity) for present, ident in tensors])


def block_copies_include(tensors: Sequence[tuple[Cond, Value]], bindings: Sequence[GroupBinding]) -> Cond:
    """Every group's bound pair (both tensors) is among the block-copy tensors."""
    return conj(True, *[conj(includes(tensors, b.layers[0].start), includes(tensors, b.layers[0].committed))
                        for b in bindings])


# Caller assumptions of the binding (listed in ``ALL`` below).


def _fresh_pair_is_new(fresh_start: Value, fresh_committed: Value, old: Sequence[Value]) -> Cond:
    return conj(fresh_start != fresh_committed, *[conj(fresh_start != o, fresh_committed != o) for o in old])


FRESH_PAIR_IS_NEW = Assumption(
    "fresh_pair_is_new",
    "a fresh allocation gives two distinct tensors, neither of them a tensor any layer already holds",
    _fresh_pair_is_new,
    guaranteed(
        cite(PAGE, "num_committed = torch.zeros_like(ring_start)",
             "a fresh pair is two new allocations (torch.zeros, then torch.zeros_like), distinct from every tensor."),
    ),
)


def _old_pair_unaliased(pair: TrackerPair) -> Cond:
    return pair.start != pair.committed


OLD_PAIR_UNALIASED = Assumption(
    "old_pair_unaliased",
    "a layer's start and committed trackers are two different tensors",
    _old_pair_unaliased,
    not_guaranteed(
        "the pair this binding allocates is two tensors, but a layer's first pair comes from the mixer's "
        "constructor, which is not in the corpus; vLLM would have to promise the mixer allocates two tensors",
        cite(T6, "layer._replayssm_ring_start = torch.tensor([0, 1, 2, 3], dtype=torch.int32)",
             "vLLM's test gives a layer two separately allocated trackers."),
    ),
)


def _num_blocks_nonnegative(num_blocks: Value) -> Cond:
    return num_blocks >= 0


NUM_BLOCKS_NONNEGATIVE = Assumption(
    "num_blocks_nonnegative",
    "num_blocks is a tensor dimension (>= 0), so t[:num_blocks] has min(numel, num_blocks) entries",
    _num_blocks_nonnegative,
    guaranteed(
        cite(PAGE, "num_blocks, device = state.shape[0], state.device",
             "num_blocks is the state cache's first dimension, never negative."),
    ),
)


def _replayssm_layers_copied(copied: Cond) -> Cond:
    return copied


REPLAYSSM_LAYERS_COPIED = Assumption(
    "replayssm_layers_copied",
    "every layer the binding binds (use_replayssm) is one block copies list (use_flashinfer_replayssm)",
    _replayssm_layers_copied,
    not_guaranteed(
        "the binding selects layers by use_replayssm, the block-copy list by use_flashinfer_replayssm: vLLM "
        "would have to promise the first implies the second (its test sets both)",
        cite(PAGE, "if isinstance(layer, MambaBase) and layer.use_flashinfer_replayssm:",
             "the block-copy list takes layers with use_flashinfer_replayssm."),
        cite(PAGE, "and layer.use_replayssm", "the binding takes layers with use_replayssm."),
    ),
)


ALL = [FRESH_PAIR_IS_NEW, OLD_PAIR_UNALIASED, NUM_BLOCKS_NONNEGATIVE, REPLAYSSM_LAYERS_COPIED]
"""The binding's caller assumptions."""
