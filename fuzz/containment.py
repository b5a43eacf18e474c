"""Outside the contract: one caller assumption broken on purpose, and containment.

``fuzz --drop NAME`` has the callers break the named per-request assumption
(``PER_REQUEST`` in ``spec/assumptions.py``) for some requests: their
rows keep every other assumption and break that one (:data:`BREAKERS` says
how). What the kernels do for such a request, a *violator*, is unspecified
from then on, so the property checked becomes containment: after every
launch, every state entry outside the violators' footprint equals the
spec's. The footprint of a launch (the action's ``contained``) is the batch
rows of violators (their plan row, their packed src/dst entries, their place
in the compaction list) and every slot their block-table rows name, in that
group. The compaction list must name the other rows as the spec does. After
the check both sides take the spec's state (a ``set_state`` action), so each
launch is judged from equal states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as hs

from replayssm.spec.geometry import chunks_on_boundary

from .launcher import Discrepancy, compare

Draw = Callable[[Any], Any]


def _decode_row_of_length(plan: Any, draw: Draw, lo: int, hi: int) -> bool:
    """Make a decode row schedule ``lo..hi`` tokens and accept ``1..query_len`` of them
    (False, the plan untouched, for a prefill row or an empty range)."""
    if plan.prefilling or lo > hi:
        return False
    plan.query_len = draw(hs.integers(lo, hi))
    plan.accepted = draw(hs.integers(1, plan.query_len))
    return True


def _decode_row_fits(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """A decode row longer than ``min(W, R - W)`` that still fits a block."""
    return _decode_row_of_length(plan, draw, min(c.geo.window, c.geo.max_step) + 1,
                                 min(c.geo.block_size, c.max_model_len - r.computed))


def _accepted_within_row(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """A decode row accepting none or one more than it scheduled (when the
    table holds it); a prefill row with a stale count above ``W``."""
    if plan.prefilling:
        plan.accepted = c.geo.window + 1
    elif r.computed + plan.query_len + 1 <= c.max_model_len and draw(hs.booleans()):
        plan.accepted = plan.query_len + 1
    else:
        plan.accepted = 0
    return True


def _row_nonempty(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """A request's first prefill row scheduling no token (a decode row cannot:
    it would also accept outside ``[1, query_len]``; a later chunk would also
    continue with fewer than 2 tokens)."""
    if not plan.prefilling or r.computed:
        return False
    plan.query_len = 0
    return True


def _decode_within_block(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """A decode row longer than a block that the ring still holds."""
    return _decode_row_of_length(plan, draw, c.geo.block_size + 1,
                                 min(c.geo.window, c.geo.max_step, c.max_model_len - r.computed))


def _live_col_is_last_block(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """A live column next to the right one (align and all mode) or past
    column 0 (mode none), inside the table."""
    if c.setup.conventions.live_col_is_zero:
        return False
    right = plan.live_col if c.moves else 0
    wrong = [col for col in (right - 1, right + 1) if 0 <= col < c.setup.num_cols]
    if not wrong:
        return False
    plan.live_col = draw(hs.sampled_from(wrong))
    return True


def _prefill_chunk_on_boundary(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """An align-mode prefill chunk that ends off a block boundary before the
    prompt's end."""
    bs = c.geo.block_size
    shortest = 2 if r.computed else 1  # a continuation keeps at least 2 tokens
    ends = [q for q in range(shortest, r.prompt_len - r.computed) if (r.computed + q) % bs]
    if not (chunks_on_boundary(c.mode) and plan.prefilling and ends):
        return False
    plan.query_len = draw(hs.sampled_from(ends))
    return True


def _is_prefilling_agrees(c: Any, r: Any, plan: Any, draw: Draw) -> bool:
    """An ``is_prefilling`` flag the opposite of how the forward pass ran the row."""
    plan.flag = not plan.prefilling
    return True


BREAKERS: dict[str, Callable[[Any, Any, Any, Draw], bool]] = {
    "decode_row_fits": _decode_row_fits,
    "accepted_within_row": _accepted_within_row,
    "row_nonempty": _row_nonempty,
    "decode_within_block": _decode_within_block,
    "live_col_is_last_block": _live_col_is_last_block,
    "prefill_chunk_on_boundary": _prefill_chunk_on_boundary,
    "is_prefilling_agrees": _is_prefilling_agrees,
}
"""How a caller breaks each per-request assumption in one planned row (the
row plan's ``query_len``, ``accepted``, ``live_col`` or ``flag``); False where this row
cannot break it and keep the others (a decode row cannot be empty, block
size 1 has no off-boundary chunk, ...)."""


def check_drop(name: str | None) -> None:
    """A ``ValueError`` naming ``--drop`` and the allowed names unless
    ``name`` is None or a per-request assumption."""
    if name is not None and name not in BREAKERS:
        raise ValueError(f"--drop must name a caller assumption the generators can break, one of "
                         f"{', '.join(BREAKERS)}; got {name!r}")


def compare_outside(spec: dict[str, np.ndarray], impl: dict[str, np.ndarray],
                    contained: dict | None) -> list[Discrepancy]:
    """:func:`compare`, without the entries of the footprint ``contained``
    (``{"rows": batch rows, "slots": [[group, slot], ...]}``) when given; the
    compaction list must then name the rows outside it as the spec does."""
    wrong = compare(spec, impl)
    if not contained:
        return wrong
    rows, slots = set(contained["rows"]), {tuple(s) for s in contained["slots"]}
    max_num_reqs = len(spec["plan_flush_count"])

    def inside(d: Discrepancy) -> bool:
        if d.buffer in ("ring_start", "num_committed"):
            return d.index in slots
        if d.buffer == "active_request_indices":
            return True
        return d.index[-1] % max_num_reqs in rows

    out = [d for d in wrong if not inside(d)]
    listed = [[int(x) for x in side["active_request_indices"].reshape(-1) if x >= 0 and int(x) not in rows]
              for side in (spec, impl)]
    if listed[0] != listed[1]:
        k = next((i for i, (a, b) in enumerate(zip(*listed)) if a != b), min(map(len, listed)))
        at = [lst[k] if k < len(lst) else -1 for lst in listed]
        out.append(Discrepancy("active_request_indices (rows outside the footprint)", (k,), at[0], at[1]))
    return out
