"""FlashInfer's side of the lifecycle, on ghost slot contents.

For every (layer, physical slot) the ghost keeps what the slot's bytes stand
for: the checkpoint state as ``(stream, position)`` (the state after that many
tokens of that token stream; ``None`` when it stands for nothing exact) and
each ring row as the token ``(stream, position)`` it holds (``None``: a
rejected draft or garbage). The operations are FlashInfer's and the
scheduler's, driven by the trackers and plans the version under review wrote:

- :meth:`Ghost.decode`: ``checkpointing_ssu`` reads the live slot's trackers
  ``(s, c)``, replays ``c`` rows from ``s`` on the checkpoint (which must give
  the request's position N: FlashInfer's view of the ring, ``P + c = N``),
  folds them when ``c + T > W`` and appends the step's ``T`` rows;
- :meth:`Ghost.prefill`: the chunked scan reads the checkpoint of the request's
  last computed block and leaves the live slot at ``N + q``;
- :meth:`Ghost.copy_block`: the scheduler's copy of a block's state and ring;
- :meth:`Ghost.materialize`: ``replayssm_materialize`` executes a plan: for
  each work row (the active list up to its first -1, or every row whose flush
  count is >= 0 when the API has no list), each layer whose src and dst are
  not the pad id: dst state = src checkpoint advanced by ``flush_count`` ring
  rows from ``ring_start`` (rows by one conditional subtraction of R, as the
  kernel does). Its contract violations are problems; a deviation FlashInfer
  never reads (a stale entry past the work list's first -1,
  ``spec/generations/contract.py`` ``work_list_read_to_first_end``) is a
  note (:attr:`Ghost.notes`).
"""

from __future__ import annotations

from typing import Any

from replayssm.spec.generations.contract import WORK_LIST_READ_TO_FIRST_END, unread_work_list_tail

Token = tuple[int, int]


class Ghost:
    """Slot contents of every layer of one system."""

    def __init__(self, layers_per_group: tuple[int, ...], ring_len: int, window: int, pad_slot: int) -> None:
        self.R, self.W, self.pad = ring_len, window, pad_slot
        self.notes: list[str] = []
        """Deviations from FlashInfer's documented input that it never reads (no state goes wrong)."""
        offsets = [0]
        for n in layers_per_group:
            offsets.append(offsets[-1] + n)
        self.group_layers = [list(range(offsets[g], offsets[g + 1])) for g in range(len(layers_per_group))]
        self.state: dict[tuple[int, int], Token | None] = {}
        self.ring: dict[tuple[int, int], list[Token | None]] = {}

    def _ring(self, layer: int, slot: int) -> list[Token | None]:
        return self.ring.setdefault((layer, slot), [None] * self.R)

    def snapshot(self) -> dict:
        return {k: v for k, v in self.state.items()}

    def ring_row(self, start: int, k: int) -> int | None:
        """Ring row ``k`` after ``start`` by one conditional subtraction; None outside the ring."""
        row = start + k
        row = row - self.R if row >= self.R else row
        return row if 0 <= row < self.R else None

    def replayed(self, layer: int, slot: int, start: int, k: int) -> Token | None:
        """The state ``k`` ring rows from ``start`` past the slot's checkpoint (None: not exact)."""
        state = self.state.get((layer, slot))
        if state is None or k < 0:
            return None
        ring = self._ring(layer, slot)
        stream, pos = state
        for i in range(k):
            row = self.ring_row(start, i)
            if row is None or ring[row] != (stream, pos + i + 1):
                return None
        return (stream, pos + k)

    def describe(self, layer: int, slot: int, start: int, k: int) -> str:
        state = self.state.get((layer, slot))
        ring = self._ring(layer, slot)
        rows = [ring[r] if (r := self.ring_row(start, i)) is not None else "outside" for i in range(max(0, k))]
        return f"checkpoint {state}, rows from {start}: {rows}"

    def copy_block(self, group: int, src: int, dst: int) -> None:
        for layer in self.group_layers[group]:
            self.state[(layer, dst)] = self.state.get((layer, src))
            self.ring[(layer, dst)] = list(self._ring(layer, src))

    def decode(self, group: int, slot: int, trackers: tuple[int, int], stream: int, computed: int,
               query_len: int, accepted: int) -> str | None:
        """FlashInfer's decode of one row on ``slot``; a problem when its view of the ring is not at ``computed``."""
        s, c = trackers
        problem = None
        for layer in self.group_layers[group]:
            ok = 0 <= s < self.R and 0 <= c <= self.W
            view = self.replayed(layer, slot, s, c) if ok else None
            if view != (stream, computed) and problem is None:
                problem = (f"decode reads slot {slot} with trackers (ring_start {s}, committed {c}): layer {layer} "
                           f"{self.describe(layer, slot, s, c)} does not give (stream {stream}, N {computed})")
            folds = c + query_len > self.W
            if folds:
                self.state[(layer, slot)] = view
                start, committed = (self.ring_row(s, c) if ok else None), 0
            else:
                start, committed = s, c
            ring = self._ring(layer, slot)
            for i in range(query_len):
                row = self.ring_row(start, committed + i) if start is not None else None
                if row is None:
                    problem = problem or f"decode appends outside the ring of slot {slot} (start {start})"
                    continue
                ring[row] = (stream, computed + i + 1) if i < accepted else None
        return problem

    def prefill(self, group: int, source: int | None, live: int, stream: int, computed: int, query_len: int) -> str | None:
        """The chunked scan: start from ``source``'s checkpoint (none at position 0), end in ``live``."""
        problem = None
        for layer in self.group_layers[group]:
            start: Token | None = (stream, 0)
            if computed > 0:
                start = self.state.get((layer, source)) if source is not None else None
                if start != (stream, computed) and problem is None:
                    problem = (f"prefill reads slot {source} (layer {layer}) holding {start}, "
                               f"not (stream {stream}, N {computed})")
            self.state[(layer, live)] = (stream, computed + query_len) if start == (stream, computed) else None
        return problem

    def materialize(self, plan: dict[str, Any], layers: list[int], work_list: bool, real_rows: set[int]) -> list[str]:
        """Execute ``plan`` on ``layers``; problems: contract violations and work on rows without a request."""
        problems: list[str] = []
        flush, start = plan["plan_flush_count"], plan["plan_ring_start"]
        rows_n = len(flush)
        if work_list:
            active = [int(x) for x in plan["active_request_indices"]]
            rows = []
            for v in active:
                if v < 0:
                    break
                rows.append(v)
            if unread_work_list_tail(active):  # FlashInfer never reads past the first -1: a note, no problem
                self.notes.append(f"active_request_indices {active}: entries after the first -1 are not all -1, "
                                  f"which FlashInfer does not read ({WORK_LIST_READ_TO_FIRST_END.name})")
            if len(set(rows)) != len(rows) or any(not 0 <= v < rows_n for v in rows):
                problems.append(f"active_request_indices {active}: not distinct batch rows")
                rows = [v for v in dict.fromkeys(rows) if 0 <= v < rows_n]
        else:
            rows = [b for b in range(rows_n) if int(flush[b]) >= 0]
        writes: dict[tuple[int, int], Token | None] = {}
        for b in rows:
            k, s = int(flush[b]), int(start[b])
            if k < 0:
                continue
            for i, layer in enumerate(layers):
                src, dst = int(plan["src_slots"][i][b]), int(plan["dst_slots"][i][b])
                if src == self.pad or dst == self.pad:
                    continue
                if b not in real_rows:
                    problems.append(f"materialize works on batch row {b}, which has no request this step "
                                    f"(layer {layer}: slot {src} -> {dst})")
                if not (0 <= s < self.R and 0 <= k <= self.W):
                    problems.append(f"materialize contract: row {b} ring_start {s} not in [0, {self.R}) or "
                                    f"flush_count {k} not in [0, {self.W}]")
                    writes[(layer, dst)] = None
                    continue
                writes[(layer, dst)] = self.replayed(layer, src, s, k)
        self.state.update(writes)
        return problems
