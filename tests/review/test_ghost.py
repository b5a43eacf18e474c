"""Teeth of the lifecycle checks: FlashInfer's view, the materialize contract, the frame, the guarded memory."""

from __future__ import annotations

import numpy as np
import pytest

from replayssm.review.ghost import Ghost
from review_corpus import needs_corpus


def _ghost() -> Ghost:
    """One group of one layer, W = 4, R = 6; slot 1 holds stream 0's checkpoint at 3 and rows 4, 5 from row 5."""
    g = Ghost((1,), ring_len=6, window=4, pad_slot=0)
    g.state[(0, 1)] = (0, 3)
    ring = g._ring(0, 1)
    ring[5], ring[0] = (0, 4), (0, 5)
    return g


def _plan(src: int, dst: int, start: int, flush: int, active: list[int]) -> dict:
    return {"src_slots": np.array([[src, 0]]), "dst_slots": np.array([[dst, 0]]),
            "plan_ring_start": np.array([start, 0]), "plan_flush_count": np.array([flush, -1]),
            "active_request_indices": np.array(active)}


def test_decode_view_is_the_replayed_ring() -> None:
    g = _ghost()
    assert g.replayed(0, 1, 5, 2) == (0, 5)  # row 5 then row 0: one conditional subtraction of R
    assert g.decode(0, 1, (5, 2), stream=0, computed=5, query_len=2, accepted=1) is None
    assert g.decode(0, 1, (5, 1), stream=0, computed=7, query_len=1, accepted=1) is not None  # view at 4, not 7


def test_materialize_publishes_the_replayed_state() -> None:
    g = _ghost()
    assert g.materialize(_plan(1, 2, 5, 2, [0, -1]), [0], True, {0}) == []
    assert g.state[(0, 2)] == (0, 5)
    assert g.materialize(_plan(1, 3, 4, 1, [0, -1]), [0], True, {0}) == []
    assert g.state[(0, 3)] is None  # row 4 does not hold token 4: the copy stands for nothing exact


def test_materialize_contract_violations_are_problems() -> None:
    assert "flush_count 5" in _ghost().materialize(_plan(1, 2, 5, 5, [0, -1]), [0], True, {0})[0]
    stale = _ghost()  # FlashInfer stops at the first -1: a stale entry after it is a note, no problem
    assert stale.materialize(_plan(1, 2, 5, 2, [-1, 1]), [0], True, {0}) == []
    assert "after the first -1" in stale.notes[0]
    assert "no request" in _ghost().materialize(_plan(1, 2, 5, 2, [0, -1]), [0], True, set())[0]
    assert "no request" in _ghost().materialize(_plan(1, 2, 5, 2, [-1, -1]), [0], False, set())[0]  # no work list


def _a1_with_a_stray_write(stray) -> "Version":
    """A1 whose postprocess kernel also runs ``stray(kwargs)`` after each launch."""
    import types

    from replayssm.spec.generations import detect
    from replayssm.review.campaign import Version
    from replayssm.base.targets import load_target
    from review_corpus import version_path

    module = load_target(str(version_path("A1")))
    kernel = module._postprocess_replayssm_kernel

    class Stray:
        arg_names = kernel.arg_names

        def __getitem__(self, grid):
            def launch(**kwargs):
                kernel[grid](**kwargs)
                stray(kwargs)
            return launch

    planted = types.SimpleNamespace(**{k: getattr(module, k) for k in dir(module) if not k.startswith("__")})
    planted._postprocess_replayssm_kernel = Stray()
    return Version("A1-stray", "planted", planted, detect(module))


@needs_corpus
@pytest.mark.parametrize("stray, prop", [
    (lambda kw: kw["tracker_committed"].__setitem__(1, 3), "frame"),  # slot 1: the pool's last pick
    (lambda kw: kw["block_table"].__setitem__((0, 0), 4095), "memory"),  # an input modified
], ids=["unrelated-slot", "input-write"])
def test_stray_writes_are_found(stray, prop: str, tmp_path) -> None:
    from replayssm.review.campaign import campaign

    outcome = campaign((_a1_with_a_stray_write(stray),), budget=60, seed=0, out_dir=tmp_path, tag="stray",
                       examples=8, shrink=False)
    assert outcome.prop == prop, outcome.failure
