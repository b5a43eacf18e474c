"""Obligations of the tracker binding and of the block-copy tensor list.

Each obligation is proved for cache groups of 1 to 4 ReplaySSM layers (one
case per layer count) over symbolic tracker identities, lengths, devices,
layer indices, ``num_blocks`` and state device. The spec functions are looked
up on the module at proof time, so tests can plant bugs into them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from replayssm.spec import binding as spec
from replayssm.spec.vocab import conj, disj, implies, ite, negate

from .obligation import Claim, obligation
from .terms import Fact, Sym, Symbolic, named_bool, named_int

LAYER_COUNTS = (1, 2, 3, 4)


@dataclass
class GroupCase:
    """One symbolic cache group, bound."""

    prefix: str
    layers: list[spec.GroupLayer]
    num_blocks: Sym
    device: Sym
    fresh_start: Symbolic
    fresh_committed: Symbolic
    binding: spec.GroupBinding
    assumptions: list[Fact]

    def show(self) -> dict[str, Any]:
        p = self.prefix
        out: dict[str, Any] = {f"{p}num_blocks": self.num_blocks, f"{p}device": self.device,
                               f"{p}fresh_start": self.fresh_start, f"{p}fresh_committed": self.fresh_committed,
                               f"{p}kept": self.binding.kept}
        for i, layer in enumerate(self.layers):
            t = layer.trackers
            out.update({
                f"{p}layer{i}.index": layer.layer_index,
                f"{p}layer{i}.start": t.start, f"{p}layer{i}.committed": t.committed,
                f"{p}layer{i}.start_len": t.start_len, f"{p}layer{i}.committed_len": t.committed_len,
                f"{p}layer{i}.start_device": t.start_device, f"{p}layer{i}.committed_device": t.committed_device,
                f"{p}layer{i}.bound_start": self.binding.layers[i].start,
                f"{p}layer{i}.bound_committed": self.binding.layers[i].committed,
                f"{p}layer{i}.bound_start_len": self.binding.layers[i].start_len,
                f"{p}layer{i}.bound_committed_len": self.binding.layers[i].committed_len,
                f"{p}layer{i}.planner": self.binding.planner[i],
            })
        return out


def group_case(n: int, prefix: str = "") -> GroupCase:
    """A group of ``n`` layers with every input symbolic, bound by the spec."""
    p = prefix
    layers = [
        spec.GroupLayer(
            named_int(f"{p}index{i}"),
            spec.TrackerPair(
                named_int(f"{p}start{i}"), named_int(f"{p}committed{i}"),
                named_int(f"{p}start_len{i}"), named_int(f"{p}committed_len{i}"),
                named_int(f"{p}start_device{i}"), named_int(f"{p}committed_device{i}"),
            ),
        )
        for i in range(n)
    ]
    num_blocks, device = named_int(f"{p}num_blocks"), named_int(f"{p}device")
    fresh_start, fresh_committed = named_int(f"{p}fresh_start"), named_int(f"{p}fresh_committed")
    old = [x for layer in layers for x in (layer.trackers.start, layer.trackers.committed)]
    assumptions = [
        (spec.NUM_BLOCKS_NONNEGATIVE.name, spec.NUM_BLOCKS_NONNEGATIVE(num_blocks)),
        (spec.FRESH_PAIR_IS_NEW.name, spec.FRESH_PAIR_IS_NEW(fresh_start, fresh_committed, old)),
        (spec.OLD_PAIR_UNALIASED.name, conj(*[spec.OLD_PAIR_UNALIASED(layer.trackers) for layer in layers])),
    ]
    binding = spec.bind_group(layers, num_blocks, device, fresh_start, fresh_committed)
    return GroupCase(p, layers, num_blocks, device, fresh_start, fresh_committed, binding, assumptions)


def _claim(c: GroupCase, goal: Any, cover: Symbolic) -> Claim:
    return Claim(goal, list(c.assumptions), cover, f"{len(c.layers)} layers", c.show())


def reusable(c: GroupCase) -> Symbolic:
    """The situation in which captured addresses must survive, stated on the
    inputs: the first layer's pair is long enough, on the state's device, and
    is every layer's pair."""
    first = c.layers[0].trackers
    return conj(
        first.start_len >= c.num_blocks, first.committed_len >= c.num_blocks,
        first.start_device == c.device, first.committed_device == c.device,
        *[conj(layer.trackers.start == first.start, layer.trackers.committed == first.committed) for layer in c.layers],
    )


@obligation("binding.shared_per_group", "binding",
            "every layer of a group is bound to the same pair, which is two distinct tensors: the first layer's "
            "old pair or the fresh one")
def shared_per_group() -> Iterator[Claim]:
    for n in LAYER_COUNTS:
        c = group_case(n)
        b, first = c.binding, c.layers[0].trackers
        p0 = b.layers[0]
        goal = [(f"layer{i} shares layer0's pair", conj(q.start == p0.start, q.committed == p0.committed))
                for i, q in enumerate(b.layers)]
        goal.append(("pair is two distinct tensors", p0.start != p0.committed))
        goal.append(("pair is the old or the fresh one",
                     disj(conj(p0.start == first.start, p0.committed == first.committed),
                          conj(p0.start == c.fresh_start, p0.committed == c.fresh_committed))))
        disagree = disj(False, *[layer.trackers.start != first.start for layer in c.layers[1:]])
        yield _claim(c, goal, conj(negate(b.kept), disagree))


@obligation("binding.sized_to_slots", "binding",
            "every layer's bound trackers have exactly num_blocks entries and lie on the state cache's device")
def sized_to_slots() -> Iterator[Claim]:
    for n in LAYER_COUNTS:
        c = group_case(n)
        goal = []
        for i, q in enumerate(c.binding.layers):
            goal.append((f"layer{i} start has num_blocks entries", q.start_len == c.num_blocks))
            goal.append((f"layer{i} committed has num_blocks entries", q.committed_len == c.num_blocks))
            goal.append((f"layer{i} on the state's device",
                         conj(q.start_device == c.device, q.committed_device == c.device)))
        first = c.layers[0].trackers
        yield _claim(c, goal, conj(c.binding.kept, first.start_len > c.num_blocks, first.committed_len > c.num_blocks))


@obligation("binding.addresses_kept", "binding",
            "re-binding keeps the existing pair (CUDA-graph addresses survive) whenever it is long enough, on the "
            "state's device and shared by every layer; otherwise every layer gets a fresh zeroed pair, so no layer "
            "inherits another layer's tracker values")
def addresses_kept() -> Iterator[Claim]:
    for n in LAYER_COUNTS:
        c = group_case(n)
        b, first = c.binding, c.layers[0].trackers
        ok = reusable(c)
        goal = [
            ("kept when reusable", implies(ok, conj(*[conj(q.start == first.start, q.committed == first.committed,
                                                           negate(q.zeroed)) for q in b.layers]))),
            ("kept only when reusable", implies(b.layers[0].start == first.start, ok)),
        ]
        for i, (layer, q) in enumerate(zip(c.layers, b.layers)):
            own = conj(q.start == layer.trackers.start, q.committed == layer.trackers.committed)
            fresh = conj(q.start == c.fresh_start, q.committed == c.fresh_committed, q.zeroed)
            goal.append((f"layer{i} keeps its own pair or gets a fresh zeroed one", disj(own, fresh)))
        yield _claim(c, goal, b.kept)


@obligation("binding.single_planner", "binding",
            "exactly one layer of a group plans, and it has the group's lowest layer index")
def single_planner() -> Iterator[Claim]:
    for n in LAYER_COUNTS:
        c = group_case(n)
        flags = c.binding.planner
        idx = [layer.layer_index for layer in c.layers]
        count: Symbolic = 0
        for f in flags:
            count = count + ite(f, 1, 0)
        goal = [("exactly one planner", count == 1)]
        for i, f in enumerate(flags):
            goal.append((f"layer{i} plans only with the lowest index", implies(f, conj(*[idx[i] <= j for j in idx]))))
        cover = disj(False, *[j < idx[0] for j in idx[1:]])
        yield _claim(c, goal, cover)


@obligation("binding.block_copies_include_trackers", "binding",
            "after binding, the block-copy tensor list holds both trackers of every group's bound pair")
def block_copies_include_trackers() -> Iterator[Claim]:
    for n in LAYER_COUNTS:
        a, other = group_case(n, "a."), group_case(1, "b.")
        # A forward context: group a's layers, group b's layer and one
        # non-ReplaySSM layer, each after binding.
        copy_layers: list[spec.CopyLayer] = []
        copied_facts = []
        for g in (a, other):
            for i, q in enumerate(g.binding.layers):
                flag = named_bool(f"{g.prefix}copied{i}")
                copied_facts.append(spec.REPLAYSSM_LAYERS_COPIED(flag))
                copy_layers.append(spec.CopyLayer(flag, q.start, q.committed))
        copy_layers.append(spec.CopyLayer(named_bool("plain.copied"), named_int("plain.start"),
                                          named_int("plain.committed")))
        tensors = spec.block_copy_tensors(copy_layers)
        goal = [(f"group {g.prefix[:-1]}'s pair is copied", spec.block_copies_include(tensors, [g.binding]))
                for g in (a, other)]
        assumptions = a.assumptions + other.assumptions + [(spec.REPLAYSSM_LAYERS_COPIED.name, conj(*copied_facts))]
        yield Claim(goal, assumptions, conj(a.binding.kept, negate(other.binding.kept)), f"{n}+1 layers",
                    {**a.show(), **other.show()})
