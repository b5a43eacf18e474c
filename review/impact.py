"""A finding's impact in vLLM's terms: whose state goes wrong, what the next forward pass computes, which input reaches it.

An :class:`Impact` is derived from the finding's own evidence, never from a
table per version:

- a lifecycle counterexample (:func:`of_trace`): its trace is run again on the
  version up to its failing step, and the state after that step is read against
  what vLLM expects of it (the trace's ``expect``: each running request's live
  slot, each published prefix block) on the ghost slot contents; the slot that
  went wrong is named by its owner: the request whose row was scheduled
  (``this request``), a request whose row was not, or whose row was scheduled
  but that is right when the failing step runs again with its row alone in the
  batch (``another request``, naming the row whose removal alone makes it right:
  another row's kernel program wrote its trackers), a published prefix block other
  requests' prefix hits will read (``a published prefix``), the null block
  (``the null block``) or a block no request holds (``a free block``); a store
  through a slot id read past a block-table row is followed to the id vLLM's
  row-major ``[max_num_reqs, num_cols]`` table holds there, the next batch row's
  block;
- a kernel finding (:func:`of_kernel_launch`): its counterexample's launch
  (the rows, the block table) and the obligation that failed.

What nobody reads (the null block, a free block, written again before any
read) is ``read: false``: a deviation, not a bug (:data:`WHOSE`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .arguments import CallerStep, Row

if TYPE_CHECKING:  # the launcher imports torch: loaded by the functions that read a trace, not by the CLI's start
    from replayssm.fuzz.launcher import Setup

    from .campaign import Version
    from .ghost import Ghost
    from .harness import Harness
    from .verdict_parts import Counterexample

WHOSE = {
    "this request": True,
    "another request": True,
    "a published prefix": True,
    "memory outside the buffers": True,
    "the null block": False,
    "a free block": False,
}
"""Whose state a finding puts wrong, and whether any consumer reads it (False: a deviation nobody reads)."""


@dataclass(frozen=True)
class Impact:
    """One finding's impact: ``whose`` (a :data:`WHOSE` key), ``who`` (the request, prefix block or
    slot), ``next_pass`` (what vLLM's next forward pass computes from it), ``shape`` (the input shape
    that reaches it)."""

    whose: str
    who: str
    next_pass: str
    shape: str

    @property
    def read(self) -> bool:
        """Whether any consumer reads the state that went wrong."""
        return WHOSE[self.whose]

    @property
    def sentence(self) -> str:
        return f"{self.who} ({self.whose}): {self.next_pass}; reached by {self.shape}"

    def as_json(self) -> dict:
        return {"whose": self.whose, "who": self.who, "read": self.read, "next_pass": self.next_pass,
                "shape": self.shape, "sentence": self.sentence}


def describe_shape(setup: Setup, rows: list[Row | None], focus: Row | None) -> str:
    """The input shape of one step in vLLM's terms: cache mode, block size, table width, the batch, and the row that matters."""
    real = [r for r in rows if r is not None]
    prefill = sum(r.prefilling for r in real)
    parts = [f"cache mode {setup.cache_mode} (block size {setup.geometry.block_size}, "
             f"{setup.num_cols}-column block table)",
             f"a batch of {len(real)} request row(s) ({prefill} prefill, {len(real) - prefill} decode"
             + (f", {len(rows) - len(real)} padding" if len(rows) > len(real) else "") + ")"]
    if focus is not None:
        parts.append(f"request {focus.rid}'s row a {_row(focus)}")
    return ", ".join(parts)


def _row(r: Row) -> str:
    if r.prefilling:
        return f"prefill chunk of {r.query_len} token(s) from N = {r.computed_before}"
    return f"decode of {r.query_len} token(s) accepting {r.accepted} at N = {r.computed_before}"


def _state_view(stands: tuple[int, int] | None, stream: int, n: int, trackers: tuple[int, int], window: int) -> str:
    s, c = trackers
    if not (c >= 0 and c <= window and s >= 0):
        return (f"FlashInfer replays trackers out of range (ring_start {s}, committed {c}): it reads ring rows "
                f"that hold none of its tokens")
    if stands is None:
        return f"it starts from a state that stands for no position of its tokens (wanted N = {n})"
    if stands[0] != stream:
        return f"it starts from another prompt's state (stream {stands[0]} at {stands[1]}, wanted N = {n})"
    if stands[1] < n:
        return f"it starts from the state at {stands[1]}, not {n}: {n - stands[1]} token(s) missing from its state"
    if stands[1] > n:
        return f"it starts from the state at {stands[1]}, not {n}: {stands[1] - n} token(s) applied twice"
    return f"its state in one layer is at {n} but another layer's is not"


def of_trace(trace: dict, version: Version, device: str = "cpu") -> Impact | None:
    """The impact of a review trace's failure on ``version`` (a
    :class:`~replayssm.review.campaign.Version`): its steps run again up to the one that breaks a
    property, then the state after it read against the trace's expectation (None: it breaks nothing).
    A scheduled request whose live slot went wrong in a batch of several rows is ``this request`` only
    where it goes wrong with its row alone in the batch (:func:`_written_by_another_row`)."""
    from .lifecycle import PropertyBroken, run_step

    setup, h, ghost, copies = _start(trace, version, device)
    for n, s in enumerate(trace["steps"]):
        step = CallerStep.from_json(s)
        before = h.tracker_arrays()
        before = (before[0].copy(), before[1].copy())
        before_ghost = ghost.snapshot()
        try:
            run_step(h, ghost, step, s["expect"], state_copies=copies)
        except PropertyBroken as broken:
            impact = _damage(setup, h, ghost, step, s["expect"], broken.prop, before, before_ghost)
            wrong = _wrong_live(setup, h, ghost, s["expect"]) if broken.prop not in ("memory", "process") else None
            if impact.whose == "this request" and wrong is not None:
                return _written_by_another_row(trace, n, wrong, impact, version, device) or impact
            return impact
    return None


def _start(trace: dict, version: Version, device: str) -> tuple[Setup, Harness, Ghost, bool]:
    """A fresh harness and ghost for ``trace`` on ``version``, and whether state copies are played."""
    import torch

    from .campaign import _state_copies
    from .ghost import Ghost
    from .harness import Harness

    from replayssm.fuzz.launcher import Setup

    setup = Setup.from_json(trace["params"])
    geo = setup.geometry
    h = Harness(setup, version.module, version.api, torch.device(device))
    ghost = Ghost(setup.layers_per_group, geo.ring_len, geo.window, geo.pad_slot)
    return setup, h, ghost, _state_copies(frozenset(trace["#meta"].get("dropped", [])))


def _wrong_live(setup: Setup, h: Harness, ghost: Ghost, expect: dict) -> tuple | None:
    """The first running request of ``expect`` whose live slot's trackers do not stand for its position:
    ``(entry, group, slot, trackers, stands)`` (``stands``: what the ghost replays, None out of range)."""
    geo = setup.geometry
    for entry in expect["running"]:
        _rid, stream, computed, live_col, cols = entry
        if live_col < 0 or live_col >= len(cols[0]):
            continue
        for g, group in enumerate(cols):
            slot = group[live_col]
            if slot == geo.pad_slot:  # no block holds its state in this group, as the lifecycle check reads it
                continue
            s, c = trackers = h.trackers(g, slot)
            in_range = 0 <= s < geo.ring_len and 0 <= c <= geo.window
            for layer in ghost.group_layers[g]:
                stands = ghost.replayed(layer, slot, s, c) if in_range else None
                if stands != (stream, computed):
                    return entry, g, slot, trackers, stands
    return None


def _written_by_another_row(trace: dict, n: int, wrong: tuple, impact: Impact, version: Version,
                            device: str) -> Impact | None:
    """When the scheduled request of ``wrong`` (:func:`_wrong_live`) is right with its row alone in the
    failing step ``n`` (the schedule before it the same), another row of the batch put its state wrong:
    ``another request``, naming the row whose removal alone makes it right. None: its own row does it."""
    from replayssm.fuzz.launcher import Setup

    entry, g, slot, trackers, stands = wrong
    rid = entry[0]
    rows = trace["steps"][n]["rows"]
    mine = next(b for b, r in enumerate(rows) if r is not None and r["rid"] == rid)
    others = [b for b, r in enumerate(rows) if r is not None and b != mine]
    if not others or not _right_without(trace, n, set(others), entry, version, device):
        return None
    writer = (others[0] if len(others) == 1 else
              next((b for b in others if _right_without(trace, n, {b}, entry, version, device)), None))
    setup = Setup.from_json(trace["params"])
    view = _state_view(stands, entry[1], entry[2], trackers, setup.geometry.window)
    if writer is None:
        return replace(impact, whose="another request",
                       next_pass=f"other rows of this batch put its trackers wrong (with its row alone in the "
                       f"batch they are right); its next decode: {view}")
    w = Row(**rows[writer])
    return Impact("another request", f"request {rid} (live slot {slot}, cache group {g})",
                  f"request {w.rid}'s row (batch row {writer}, a {_row(w)}) puts request {rid}'s trackers wrong "
                  f"(without that row in the batch they are right): request {rid}'s next decode: {view}",
                  describe_shape(setup, CallerStep.from_json(trace["steps"][n]).rows, w))


def _right_without(trace: dict, n: int, drop: set[int], entry: list, version: Version, device: str) -> bool:
    """Whether ``entry``'s request is right after step ``n`` run without batch rows ``drop`` (the
    others laid out again as the callers do: :func:`~replayssm.review.attribution.lay_out`), the
    steps before it as they ran."""
    from replayssm.fuzz.launcher import Setup

    from .attribution import lay_out
    from .lifecycle import PropertyBroken, run_step

    cut = json.loads(json.dumps(trace))
    cut["steps"] = cut["steps"][:n + 1]
    s = cut["steps"][n]
    flags = s["postprocess"]["is_prefilling"]
    lay_out(s, [(b, None if r is None else Row(**r), None if r is None else bool(flags[b]))
                for b, r in enumerate(s["rows"]) if b not in drop], Setup.from_json(cut["params"]))
    setup, h, ghost, copies = _start(cut, version, device)
    for k, step in enumerate(cut["steps"]):
        try:
            run_step(h, ghost, CallerStep.from_json(step), step["expect"], state_copies=copies)
        except PropertyBroken:
            if k < n:
                return False
    return _wrong_live(setup, h, ghost, {"running": [entry]}) is None


def _damage(setup: Setup, h: Harness, ghost: Ghost, step: CallerStep, expect: dict, prop: str,
            before: tuple, before_ghost: dict) -> Impact:
    """Whose state the failing ``step`` put wrong, from the state after it (``h``'s trackers, ``ghost``)."""
    geo = setup.geometry
    rows = step.rows
    scheduled = {r.rid: r for r in rows if r is not None}
    shape = lambda focus: describe_shape(setup, rows, focus)  # noqa: E731
    if prop == "memory":
        return _past_the_row(setup, rows, step.table, shape)
    if prop == "process":  # the version's process may be gone: its trackers are not read
        return _this_step(prop, shape)
    wrong = _wrong_live(setup, h, ghost, expect)
    if wrong is not None:
        (rid, stream, computed, _live, _cols), g, slot, trackers, stands = wrong
        whose = "this request" if rid in scheduled else "another request"
        what = (f"request {rid}" + ("" if rid in scheduled else ", not scheduled in this step")
                + f" (live slot {slot}, cache group {g})")
        return Impact(whose, what, "its next decode: " + _state_view(stands, stream, computed, trackers, geo.window),
                      shape(scheduled.get(rid) or _writer(rows, step.table, g, slot)))
    for stream, col, slots in expect["published"]:
        aligned = (col + 1) * geo.block_size
        for g, slot in enumerate(slots):
            contents = {ghost.state.get((layer, slot)) for layer in ghost.group_layers[g]}
            trackers = h.trackers(g, slot)
            if trackers == (0, 0) and contents == {(stream, aligned)}:
                continue
            held = ", ".join(str(x) for x in sorted(contents, key=str))
            return Impact("a published prefix", f"prefix block (stream {stream}, column {col}), slot {slot} of cache "
                          f"group {g}",
                          f"every request admitted with this prefix starts its prefill from trackers {trackers} on "
                          f"{held} instead of the state after {aligned} tokens: its outputs are wrong from its "
                          f"first token", shape(_writer(rows, step.table, g, slot)))
    return _frame(setup, h, ghost, step, expect, before, before_ghost, shape, prop)


READ_BY_THE_STEP = ("forward", "process")
"""Properties whose failure is what the step's requests compute (the forward pass read a wrong state; the
version's kernel raised, hung or ended its process): read whatever slots changed beside them."""


def _frame(setup: Setup, h: Harness, ghost: Ghost, step: CallerStep, expect: dict, before: tuple,
           before_ghost: dict, shape, prop: str) -> Impact:
    """Whose state a failure that left no running request's live slot and no published prefix wrong put
    wrong: a ``forward`` or ``process`` failure is this step's rows' (:data:`READ_BY_THE_STEP`); else every
    slot no row of the step names whose trackers or contents changed, the worst impact of them all (a block a
    running request holds before a free block, before the null block: :func:`_worst`)."""
    if prop in READ_BY_THE_STEP:
        return _this_step(prop, shape)
    start, committed = h.tracker_arrays()
    held = {(g, s) for e in expect["running"] for g, group in enumerate(e[4]) for s in group}
    changed = []
    for g in range(len(setup.layers_per_group)):
        for slot in range(setup.num_slots):
            moved = (int(before[0][g, slot]), int(before[1][g, slot])) != (int(start[g, slot]), int(committed[g, slot]))
            moved |= any(ghost.state.get((layer, slot)) != before_ghost.get((layer, slot))
                         for layer in ghost.group_layers[g])
            if moved and not any(slot in row for row in _rows_tables(step, g)):
                changed.append(_slot_impact(g, slot, (g, slot) in held, setup.geometry.pad_slot, shape))
    return _worst(changed) if changed else _this_step(prop, shape)


def _this_step(prop: str, shape) -> Impact:
    if prop == "process":
        return Impact("this request", "the rows of this step", "the version's kernel raised, hung or ended its "
                      "process in this step's launch: vLLM's engine step fails for every request of the batch",
                      shape(None))
    return Impact("this request", "the rows of this step", f"this forward pass reads inexact state ({prop})",
                  shape(None))


def _slot_impact(g: int, slot: int, held: bool, pad: int, shape) -> Impact:
    """The impact of a change to ``slot`` of cache group ``g`` that no row of the step names."""
    if slot == pad:
        return Impact("the null block", f"the null block (slot {slot}, cache group {g})",
                      "nothing: no request's state is read from the null block", shape(None))
    if held:
        return Impact("another request", f"a block of a running request (slot {slot}, cache group {g}) "
                      f"no row of this step names", "that request's next pass reads a block it did not write",
                      shape(None))
    return Impact("a free block", f"free slot {slot} of cache group {g}",
                  "nothing: a free block is reset or overwritten before a request reads it", shape(None))


_SEVERITY = ("another request", "a free block", "the null block")
"""The order :func:`_worst` ranks slot impacts in: the read one first, then the unread ones."""


def _worst(impacts: list[Impact]) -> Impact:
    """The impact of ``impacts`` whose state matters most (:data:`_SEVERITY`; the first of equals)."""
    return min(impacts, key=lambda i: _SEVERITY.index(i.whose))


def _rows_tables(step: CallerStep, g: int) -> list[list[int]]:
    return [step.table[g][b] for b, r in enumerate(step.rows) if r is not None]


def _writer(rows: list[Row | None], table: list, g: int, slot: int) -> Row | None:
    return next((r for b, r in enumerate(rows) if r is not None and slot in table[g][b]), None)


def _past_the_row(setup: Setup, rows: list[Row | None], table: list, shape) -> Impact:
    """A store through a slot id read past a block-table row: the id vLLM's row-major table holds there."""
    bs, cols, maxr = setup.geometry.block_size, setup.num_cols, setup.geometry.max_num_reqs
    for b, r in enumerate(rows):
        if r is None:
            continue
        last = max((r.computed_after + bs - 1) // bs - 1, 0)
        if last < cols:
            continue
        victim = b + max(r.computed_before // bs, cols) // cols  # the first entry read past the row
        if victim < len(rows) and rows[victim] is not None:
            other = rows[victim]
            assert other is not None
            return Impact("another request", f"request {other.rid} (batch row {victim})",
                          f"request {r.rid}'s kernel program reads past its {cols}-column block-table row into batch "
                          f"row {victim}'s blocks and stores into their trackers: request {other.rid}'s next decode "
                          f"starts from trackers it did not write (tokens lost or repeated)", shape(r))
        if victim < maxr:
            return Impact("another request", f"the block ids in batch row {victim} of vLLM's persistent block table",
                          f"request {r.rid}'s kernel program reads past its {cols}-column block-table row into a row "
                          f"past the batch, whose stale block ids may now be another request's blocks or a published "
                          f"prefix, and stores into their trackers", shape(r))
        return Impact("memory outside the buffers", f"memory past vLLM's block table ({maxr} rows)",
                      f"request {r.rid}'s kernel program reads past the last block-table row and stores through "
                      f"whatever it finds there", shape(r))
    return Impact("memory outside the buffers", "the tensor next to a buffer the kernel writes",
                  "a store outside its buffer lands in whatever tensor vLLM allocated beside it", shape(None))


def of_kernel_launch(trace: dict, prop: str, cell: list | None = None, null_block_only: bool = False) -> Impact:
    """The impact of a kernel obligation ``prop`` (``memory_safety``, ``frame``, ``conflicts``,
    ``equivalence``, ``int32``) failing on the launch of a kernel trace (``verify/kernels/report.py``);
    ``cell``: the index its violated part names (for ``frame``, a tracker store's ``[group, slot]``).
    A frame store to the null block is ``the null block`` (nobody reads it) only with ``null_block_only``:
    the frame obligation proved with the null block's cells in every program's frame
    (:func:`.kernel_proofs.beside_the_null_block`); one model storing there does not show the kernel
    cannot store to a held block for another input."""
    from replayssm.fuzz.launcher import Setup

    setup = Setup.from_json(trace["params"])
    launch = next(a["picks"] for a in trace["actions"] if a["name"] == "launch")
    rows = _launch_rows(setup, launch)
    table = launch["block_table"]
    shape = lambda focus: describe_shape(setup, rows, focus)  # noqa: E731
    if prop == "frame" and cell is not None and len(cell) == 2 and cell[1] == setup.geometry.pad_slot:
        focus = next((r for r in rows if r), None)
        if null_block_only:
            return Impact("the null block", f"the null block (slot {cell[1]}, cache group {cell[0]})",
                          "nothing: a kernel program stores to the null block's trackers, which no request's state "
                          "is read from (FlashInfer skips PAD_SLOT_ID), and the proof shows it stores outside its "
                          "row's blocks nowhere else", shape(focus))
        return Impact("another request", f"the null block (slot {cell[1]}, cache group {cell[0]}) here, and "
                      f"possibly a block a request holds", "a kernel program stores outside its own row's blocks; "
                      "that it does so only to the null block is not proved: a request's next decode may start "
                      "from trackers it did not write", shape(focus))
    if prop in ("memory_safety", "frame"):
        past = _past_the_row(setup, rows, table, shape)
        if past.whose != "memory outside the buffers" or cell is None or len(cell) != 2 or prop != "frame":
            return past
        g, slot = cell
        owner = next((b for b, r in enumerate(rows) if r is not None and slot in table[g][b]), None)
        who = (f"request {rows[owner].rid} (batch row {owner}, slot {slot})" if owner is not None  # type: ignore[union-attr]
               else f"slot {slot} of cache group {g}, named by no row of this launch (a request not scheduled in it)")
        return Impact("another request", who, "a kernel program stores to trackers outside its own row's blocks: "
                      "that request's next decode starts from trackers it did not write", shape(None))
    if prop == "conflicts":
        real = [r for r in rows if r is not None]
        return Impact("another request", f"the requests in batch rows {', '.join(str(b) for b, r in enumerate(rows) if r)}",
                      "two rows' kernel programs read and write one slot's trackers in one launch: which value a "
                      "request's next decode starts from depends on the order the GPU runs them",
                      shape(real[0] if real else None))
    first = next((r for r in rows if r is not None), None)
    return Impact("this request", f"request {first.rid if first else '?'} (batch row 0)",
                  f"its trackers after this launch differ from the spec's ({prop}): its next decode starts from a "
                  f"state not at its position", shape(first))


def _launch_rows(setup: Setup, launch: dict) -> list[Row | None]:
    """A kernel trace's launch as batch rows (the spec's encoding read back: ``encode_row``)."""
    conv = setup.conventions
    n, qm = launch["num_reqs"], launch["query_metadata"]
    idx = launch.get("idx_mapping")
    out: list[Row | None] = []
    for b in range(n):
        req = idx[b] if conv.has_idx_mapping and idx is not None else b
        if req < 0:
            out.append(None)
            continue
        q = qm[b + 1] - qm[b] if conv.cumulative else qm[b]
        prefilling = bool(launch["is_prefilling"][b])
        accepted = launch["num_accepted_tokens"][req]
        computed = launch["num_computed_tokens"][req]
        if conv.post_step:
            computed -= q if prefilling else accepted
        live = launch["live_cols"][req] if launch.get("live_cols") is not None else 0
        out.append(Row(req, 0, req, computed, q, accepted, prefilling, live, live))
    return out


def with_impact(c: Counterexample, version: Version, device: str = "cpu") -> Counterexample:
    """``c`` with its impact, read from its trace run again on ``version`` (``c`` as it is without a
    trace, or when the trace no longer breaks a property)."""
    if c.trace is None:
        return c
    try:
        found = of_trace(json.loads(Path(c.trace).read_text()), version, device)
    except (OSError, ValueError, KeyError):
        return c
    return replace(c, impact=found) if found is not None else c
