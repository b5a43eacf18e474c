"""The binding obligations prove, and each fails with a counterexample on a
planted bug (or a dropped assumption)."""

from __future__ import annotations

from typing import Any

import pytest

import replayssm.verify.binding_proofs  # noqa: F401  (registers the obligations)
from replayssm.spec import binding
from replayssm.spec.vocab import conj, imin
from replayssm.verify.obligation import REGISTRY, Claim, Obligation, prove

NAMES = [
    "binding.shared_per_group",
    "binding.sized_to_slots",
    "binding.addresses_kept",
    "binding.single_planner",
    "binding.block_copies_include_trackers",
]


@pytest.mark.parametrize("name", NAMES)
def test_obligation_proves(name: str) -> None:
    result = prove(REGISTRY[name])
    assert result.status == "proved", (result.detail, result.counterexample)
    assert result.cases == 4


def _fails(name: str, violated: str) -> dict:
    result = prove(REGISTRY[name])
    assert result.status == "failed", result.detail
    assert result.counterexample is not None
    assert any(violated in v for v in result.counterexample["violated"]), result.counterexample
    return result.counterexample


def _keep_with(first_ok: Any) -> Any:
    """A keep condition whose first-layer test is ``first_ok`` and which still
    checks that every layer holds the first layer's pair."""

    def can_keep(layers, num_blocks, device):
        first = layers[0].trackers
        return conj(first_ok(first, num_blocks, device),
                    *[conj(l.trackers.start == first.start, l.trackers.committed == first.committed) for l in layers])

    return can_keep


def test_planner_first_name_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "planner_flags", lambda idx: [pos == 0 for pos in range(len(idx))])
    cex = _fails("binding.single_planner", "plans only with the lowest index")
    assert cex["values"]["layer0.planner"] is True
    assert any(cex["values"][f"layer{i}.index"] < cex["values"]["layer0.index"] for i in range(1, 4)
               if f"layer{i}.index" in cex["values"])


def test_planner_on_every_layer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "planner_flags", lambda idx: [True for _ in idx])
    _fails("binding.single_planner", "exactly one planner")


def test_strict_length_check_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "can_keep", _keep_with(lambda f, n, d: conj(
        f.start_len > n, f.committed_len > n, f.start_device == d, f.committed_device == d)))
    cex = _fails("binding.addresses_kept", "kept when reusable")
    assert cex["values"]["layer0.start_len"] == cex["values"]["num_blocks"] or \
        cex["values"]["layer0.committed_len"] == cex["values"]["num_blocks"]


def test_keep_without_all_layers_sharing_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def can_keep(layers, num_blocks, device):
        f = layers[0].trackers
        return conj(f.start_len >= num_blocks, f.committed_len >= num_blocks,
                    f.start_device == device, f.committed_device == device)

    monkeypatch.setattr(binding, "can_keep", can_keep)
    _fails("binding.addresses_kept", "kept only when reusable")


def test_keep_unchecked_committed_device_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "can_keep", _keep_with(lambda f, n, d: conj(
        f.start_len >= n, f.committed_len >= n, f.start_device == d)))
    _fails("binding.sized_to_slots", "on the state's device")


def test_keep_unchecked_committed_length_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "can_keep", _keep_with(lambda f, n, d: conj(
        f.start_len >= n, f.start_device == d, f.committed_device == d)))
    _fails("binding.sized_to_slots", "committed has num_blocks entries")


def test_untrimmed_view_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "view_length", lambda length, n: length)
    cex = _fails("binding.sized_to_slots", "has num_blocks entries")
    assert cex["values"]["kept"] is True


def test_trimmed_view_model_is_faithful() -> None:
    # The spec's own view length is t[:n]'s: the planted bug above is the only
    # difference, so the proof is not passing for a trivial reason.
    assert binding.view_length(16, 8) == imin(16, 8) == 8


def test_per_layer_fresh_pairs_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = binding.bind_group

    def bind_group(layers, num_blocks, device, fresh_start, fresh_committed):
        b = real(layers, num_blocks, device, fresh_start, fresh_committed)
        # Layer 1 gets its own allocation (identity shifted) on the fresh path.
        shifted = [q if i != 1 else binding.BoundPair(
            binding.ite(b.kept, q.start, q.start + 1000), q.committed, q.start_len, q.committed_len,
            q.start_device, q.committed_device, q.zeroed) for i, q in enumerate(b.layers)]
        return binding.GroupBinding(b.kept, shifted, b.planner)

    monkeypatch.setattr(binding, "bind_group", bind_group)
    _fails("binding.shared_per_group", "layer1 shares layer0's pair")


def test_block_copies_without_committed_tracker_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "block_copy_tensors",
                        lambda layers: [(l.copied, l.start) for l in layers])
    _fails("binding.block_copies_include_trackers", "pair is copied")


def test_replayssm_layers_copied_is_necessary() -> None:
    ob = REGISTRY["binding.block_copies_include_trackers"]

    def build():
        for c in ob.build():
            kept = [(n, t) for n, t in c.assumptions if n != binding.REPLAYSSM_LAYERS_COPIED.name]
            yield Claim(c.goal, kept, c.cover, c.case, c.show)

    result = prove(Obligation(ob.name, ob.transition, ob.statement, build))
    assert result.status == "failed" and result.counterexample is not None
