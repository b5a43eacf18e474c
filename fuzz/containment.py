"""Outside the contract: one caller assumption broken on purpose, and containment.

``fuzz --drop NAME`` has the callers break the named per-request assumption
(one of :func:`drop_choices`) for some requests: their rows keep every other
assumption and break that one (its record's ``breaker`` says how,
``spec/row_assumptions.py``). What the kernels do for such a request, a
*violator*, is unspecified from then on, so the property checked becomes containment: after every
launch, every state entry outside the violators' footprint equals the
spec's. The footprint of a launch (the action's ``contained``) is the batch
rows of violators (their plan row, their packed src/dst entries, their place
in the compaction list) and every slot their block-table rows name, in that
group. The compaction list must name the other rows as the spec does. After
the check both sides take the spec's state (a ``set_state`` action), so each
launch is judged from equal states.
"""

from __future__ import annotations

import numpy as np

from replayssm.spec.assumptions import per_request_drops

from .launcher import Discrepancy, compare


def drop_choices() -> list[str]:
    """The names ``--drop`` takes: the caller assumptions one row can break
    (``spec.assumptions.per_request_drops``)."""
    return [a.name for a in per_request_drops()]


def check_drop(name: str | None) -> None:
    """A ``ValueError`` naming ``--drop`` and the allowed names unless
    ``name`` is None or one of :func:`drop_choices`."""
    choices = drop_choices()
    if name is not None and name not in choices:
        raise ValueError(f"--drop must name a caller assumption the generators can break, one of "
                         f"{', '.join(choices)}; got {name!r}")


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
