"""The callers the fuzzer plays: scheduler and model runner, as launch actions.

:class:`Callers` keeps the scheduler's view (requests, block tables per group,
free slots, the prefix cache of published blocks) and FlashInfer's view of
every live slot (ring start and checkpoint position, advanced by the decode
kernel's own rule, independently of the host mirror under test). Each caller
action returns the launch actions it causes, with every input concrete, so a
trace replays without this module. Generated inputs satisfy the spec's named
caller assumptions; :meth:`Callers.check_assumptions` asserts it on each row.
The decisions its users make differently (the lockstep runner, review's
campaigns) are its :class:`.caller_policy.CallerPolicy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from hypothesis import strategies as hs

from replayssm.spec import assumptions as env
from replayssm.spec.assumptions import GhostRow, RowContext, encode_row
from replayssm.spec.boundary import mamba_state_copy_boundary
from replayssm.spec.flashinfer import kernel_checkpoints, kernel_window_after
from replayssm.spec.geometry import Conventions, Geometry, moves_live_column
from replayssm.spec.postprocess import running_position
from replayssm.spec.system.rows import TAIL_ACCEPTED, RowRule

from .actions import Action, BlockCopy, Migrate, Postprocess
from .caller_policy import DEFAULT, CallerPolicy, Choices, Draw, boolean, element, integer
from .launcher import Setup

GEOMETRIES = (
    Geometry(max_num_reqs=4, block_size=8, window=16, ring_len=20),
    Geometry(max_num_reqs=4, block_size=4, window=4, ring_len=8),
    Geometry(max_num_reqs=4, block_size=5, window=3, ring_len=5),
    Geometry(max_num_reqs=3, block_size=3, window=2, ring_len=4),
    Geometry(max_num_reqs=4, block_size=1, window=2, ring_len=3),
    Geometry(max_num_reqs=3, block_size=2, window=4, ring_len=7),
)
"""Fuzzed geometries: vLLM's non-power-of-two ring (W=16, T<=4, R=20) with a
small block, a power-of-two ring, odd blocks and rings, T = W, block size 1
(every token a boundary; R = 3) and block size 2 with a ring of 7 that holds
decode rows of 3 tokens (longer than a block: only under ``--drop``)."""

MODEL_BLOCKS = (3, 1, 2, 10)
"""Model lengths in blocks: small ones that requests fill (a prompt and its
decode steps up to ``max_model_len`` tokens), and a long one. The block table
is as vLLM sizes it (``Setup.sized``): that many columns in align mode, one
live column in mode none."""

NUM_SLOTS = 48
"""Tracker entries per group (slot 0 is the null block)."""


@dataclass
class Request:
    """One request as the scheduler and FlashInfer see it."""

    rid: int
    stream: int
    prompt_len: int
    computed: int
    cols: list[list[int]]
    live_col: int = -1
    ring_start: int = 0
    checkpoint_pos: int = 0

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt_len


@dataclass
class RowPlan:
    """What one scheduled request does in a step: its query length, accepted
    tokens, prefill or decode, and new live column; the caller notes on it
    whether it copied the trackers itself and whether FlashInfer checkpoints."""

    query_len: int
    accepted: int
    prefilling: bool
    live_col: int
    copied: bool = False
    checkpointed: bool = False
    breaks: str | None = None
    """The caller assumption this row breaks on purpose (``fuzz --drop``)."""
    flag: bool | None = None
    """The ``is_prefilling`` input when it differs from ``prefilling`` (a broken row)."""


@dataclass
class Features:
    """Which optional caller behaviours this run uses (swarm testing)."""

    prefix_hits: bool = True
    padding_rows: bool = True
    block_copies: bool = True
    null_columns: bool = True
    stale_slots: bool = False
    """Block-table entries the kernels must not read hold other owners' real
    slots: columns past a row's live column, padding rows, rows past
    ``num_reqs`` (vLLM reuses table rows without clearing them)."""
    shared_prompts: bool = False
    """All prompts come from one stream, publish their first block at once
    and take their longest prefix hit; skipped columns are null."""
    short_prompts: bool = False
    """Prompts of at most two blocks and a token, leaving the table to decode steps."""


@dataclass(frozen=True)
class Aim:
    """Where one example points the callers: geometries, model lengths and
    fixed caller behaviours for scenario classes that free draws reach too
    rarely in a few examples per convention combination (the ci profile runs
    4 per combination)."""

    name: str
    geometries: tuple[Geometry, ...]
    model_blocks: tuple[int, ...]
    """``max_model_len`` in blocks (:data:`MODEL_BLOCKS`)."""
    fixed: tuple[tuple[str, bool], ...] = ()
    """:class:`Features` set by the aim; the others are drawn."""
    moving_live_column: bool = False
    """Only for callers whose live column moves (align mode, explicit live columns)."""


AIMS = (
    Aim("free", GEOMETRIES, MODEL_BLOCKS),
    Aim("table edges", GEOMETRIES, (1, 2, 3), (("stale_slots", True), ("short_prompts", False))),
    Aim("shared prefixes", GEOMETRIES, (3, 10), (("prefix_hits", True), ("null_columns", True),
                                                 ("shared_prompts", True), ("short_prompts", False)),
        moving_live_column=True),
    Aim("long decodes", tuple(g for g in GEOMETRIES if g.window < 2 * g.block_size), (10,),
        (("block_copies", True), ("short_prompts", True), ("shared_prompts", False))),
)
"""The aims an example draws from: free draws; tables of 1 to 3 columns that
requests fill, with other owners' slots where the kernels must not read
(table full, live column is the last one, one-column table); requests
sharing prefixes (align mode: prefix hits, null columns, multi-column
prefill resets); long decodes in a wide table with a window shorter than two
blocks (checkpoints at boundaries, ring wraps, migrations to copied slots)."""


@hs.composite
def shapes(draw: Draw, conventions: tuple[Conventions, ...]) -> tuple[Setup, Aim]:
    """One fuzzed system's fixed shape, and the aim it was drawn for."""
    conv = draw(hs.sampled_from(conventions))
    # all mode under either host: with publishing on an A1-era host's flags, off the reference's
    mode = draw(hs.sampled_from([conv.mode] + ([] if conv.live_col_is_zero else ["all"])))
    moving = conv.materialize_prefixes and not conv.live_col_is_zero
    aim = draw(hs.sampled_from([a for a in AIMS if moving or not a.moving_live_column]))
    geo = draw(hs.sampled_from(aim.geometries))
    model_blocks = draw(hs.sampled_from(aim.model_blocks))
    layers = tuple(draw(hs.lists(hs.integers(1, 3), min_size=1, max_size=3)))
    return Setup.sized(geo, conv, layers, model_blocks, NUM_SLOTS, mode), aim


def features_for(draw: Draw, aim: Aim) -> Features:
    """The caller behaviours of one run: those ``aim`` fixes, the others drawn."""
    fixed = dict(aim.fixed)
    return Features(**{f.name: fixed[f.name] if f.name in fixed else boolean(draw) for f in fields(Features)})


@hs.composite
def systems(draw: Draw, conventions: tuple[Conventions, ...]) -> tuple[Setup, Features]:
    """One fuzzed system's fixed shape and the caller behaviours its run uses."""
    setup, aim = draw(shapes(conventions))
    return setup, features_for(draw, aim)


@dataclass
class Callers:
    """The scheduler + model runner model driving one fuzzed system, its
    decisions left to its user made as ``policy`` says."""

    setup: Setup
    features: Features
    policy: CallerPolicy = DEFAULT
    requests: dict[int, Request] = field(default_factory=dict)
    free: list[list[int]] = field(default_factory=list)
    published: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    scenarios: dict[str, int] = field(default_factory=dict)
    drop: str | None = None
    """The per-request assumption some rows break on purpose (``fuzz --drop``)."""
    tainted: set[int] = field(default_factory=set)
    """Requests that broke ``drop``: off the contract from then on."""
    tainted_slots: set[tuple[int, int]] = field(default_factory=set)
    """(group, slot) named by a violator's block-table row."""
    _fresh: set[tuple[int, int]] = field(default_factory=set)
    """(group, slot) allocated during the current step."""

    def __post_init__(self) -> None:
        groups = len(self.setup.layers_per_group)
        self.free = [list(range(1, self.setup.num_slots)) for _ in range(groups)]

    # -- scenario statistics -------------------------------------------------
    def saw(self, name: str, n: int = 1) -> None:
        if n:
            self.scenarios[name] = self.scenarios.get(name, 0) + int(n)

    # -- geometry helpers ----------------------------------------------------
    @property
    def geo(self):
        return self.setup.geometry

    @property
    def align(self) -> bool:
        """The host publishes prefixes (``MATERIALIZE_PREFIXES``): align mode, or all mode on an A1-era host."""
        return self.setup.conventions.materialize_prefixes

    @property
    def moves(self) -> bool:
        """The live column moves with the request and the table has a column per block (align and all mode)."""
        return moves_live_column(self.mode)

    @property
    def mode(self) -> str:
        """The setup's cache mode (``spec.geometry.CACHE_MODES``)."""
        return self.setup.cache_mode  # type: ignore[return-value]

    @property
    def max_model_len(self) -> int:
        """The setup's model length; align mode with live column 0 only holds
        requests inside block 0 (mode none holds any length in its one column)."""
        if self.align and self.setup.conventions.live_col_is_zero:
            return self.geo.block_size
        return int(self.setup.max_model_len)

    @property
    def rows(self) -> RowRule:
        """Which rows a request may take (the spec's one definition)."""
        return RowRule(self.geo, self.setup.conventions, self.max_model_len, self.mode)

    @property
    def max_step(self) -> int:
        return self.rows.longest_decode

    @property
    def table_cols(self) -> int:
        """The block-table width the kernels see: the policy's ``table_short_by`` columns short of the callers' rows."""
        return self.setup.num_cols - self.policy.table_short_by

    @property
    def kernel_setup(self) -> Setup:
        """The system as the kernels see it (:attr:`table_cols` wide)."""
        return replace(self.setup, num_cols=self.table_cols)

    def _kernel_table(self, table: list) -> list:
        """A step's block tables as the kernels see them (:attr:`table_cols` wide)."""
        if self.table_cols == self.setup.num_cols:
            return table
        return [[row[:self.table_cols] for row in group] for group in table]

    def _alloc(self, group: int) -> int | None:
        if not self.free[group]:
            return None
        slot = self.free[group].pop()
        self._fresh.add((group, slot))
        return slot

    def _release(self, r: Request) -> None:
        keep = {s for slots in self.published.values() for s in slots}
        for g, cols in enumerate(r.cols):
            for s in cols:
                if s != self.geo.pad_slot and s not in keep and s not in self.free[g]:
                    if not any(s == o.cols[g][c] for o in self.requests.values() if o is not r for c in range(len(o.cols[g]))):
                        self.free[g].append(s)

    # -- caller actions --------------------------------------------------------
    def admit(self, draw: Draw) -> bool:
        """A new request, possibly starting from published prefix blocks."""
        free_rids = [i for i in range(self.geo.max_num_reqs) if i not in self.requests]
        if not free_rids or any(len(f) < 4 for f in self.free):
            return False
        rid = element(draw, free_rids)
        stream = element(draw, self._streams())
        short = min(2 * self.geo.block_size + 1, self.max_model_len)
        longest = short if self.features.short_prompts else element(draw, (short, self.max_model_len))
        can_hit = self.align and self.features.prefix_hits and (stream, 0) in self.published
        shortest = min(self.geo.block_size + 1, longest) if can_hit or self.features.shared_prompts else 1
        prompt = integer(draw, shortest, longest)
        groups = len(self.setup.layers_per_group)
        cols = [[self.geo.pad_slot] * self.setup.num_cols for _ in range(groups)]
        hit = 0
        if self.align and self.features.prefix_hits:
            while (stream, hit) in self.published and (hit + 1) * self.geo.block_size < prompt:
                hit += 1
            if hit and not self.features.shared_prompts:
                hit = integer(draw, 0, hit)
        for c in range(hit):
            for g in range(groups):
                cols[g][c] = self.published[(stream, c)][g]
        self.requests[rid] = Request(rid, stream, prompt, hit * self.geo.block_size, cols,
                                     checkpoint_pos=hit * self.geo.block_size)
        self.saw("prefix hit", hit > 0)
        return True

    def _streams(self) -> list[int]:
        """The prompt streams, those with a published first block first (when
        prefix hits are on), so that admissions aim at prefix hits."""
        streams = (0,) if self.features.shared_prompts else (0, 1)
        published = [s for s in streams if self.features.prefix_hits and (s, 0) in self.published]
        return published + [s for s in streams if s not in published]

    def finish(self, rid: int, preempt: bool) -> None:
        """Request ``rid`` leaves (finished, or preempted to be recomputed later)."""
        r = self.requests.pop(rid)
        self._release(r)
        self.saw("preempt" if preempt else "finish")

    def _plan_row(self, draw: Draw, r: Request) -> RowPlan | None:
        """What one scheduled request does this step: one of the rows
        ``RowRule`` allows (a decode row only where a full-length one fits;
        at a prompt tail, half the time a decode of the real token and
        placeholders, :meth:`_tail_as_decode`), a one-token continuation
        chunk as the policy says; None: not scheduled this step."""
        rule = self.rows
        tail = self._tail_as_decode(draw, r)
        if tail is not None:
            return tail
        if r.prefilling:
            lens = rule.chunk_lens(r.computed, r.prompt_len)
            if self.features.shared_prompts and self.align and len(lens) > 1:
                # publish the stream's first block at once; later, run past null columns
                lens = lens[:1] if (r.stream, 0) not in self.published else [lens[-1], lens[-2]]
        else:
            lens = rule.decode_lens(r.computed)
            if not lens:
                return None
        q = integer(draw, lens.start, lens.stop - 1) if isinstance(lens, range) else element(draw, lens)
        accepted = integer(draw, rule.accepted_lo(r.prefilling), rule.accepted_hi(r.prefilling, q))
        plan = RowPlan(q, accepted, r.prefilling, rule.live_col(r.computed, q))
        ones = self.policy.one_token_continuations
        if (ones == "often" and plan.prefilling and r.computed > 0
                and 1 in rule.chunk_lens(r.computed, r.prompt_len) and boolean(draw)):
            plan.query_len, plan.live_col = 1, rule.live_col(r.computed, 1)
        if ones == "never" and not env.PREFILL_CONTINUATION_LONGER_THAN_ONE(
                self.geo, GhostRow(r.computed, plan.query_len, plan.accepted, plan.prefilling, plan.live_col, r.rid)):
            return None
        return plan

    def _tail_as_decode(self, draw: Draw, r: Request) -> RowPlan | None:
        """At a prompt tail (prior state, one prompt token left), half the
        time the row vLLM runs there: a decode of ``RowRule.tail_lens``
        tokens (the executed width: the real token, then placeholders) that
        accepts the real one; else None (a prefill chunk, as before)."""
        rule = self.rows
        lens = rule.tail_lens(r.computed, r.prompt_len)
        if not lens or not boolean(draw):
            return None
        q = element(draw, lens)
        return RowPlan(q, TAIL_ACCEPTED.start, False, rule.live_col(r.computed, q))

    def row_context(self, r: Request) -> RowContext:
        """What the callers know of the world ``r``'s row is scheduled in."""
        return RowContext(self.geo, self.setup.conventions, self.mode, self.max_model_len, self.setup.num_cols,
                          r.prompt_len)

    def _break(self, draw: Draw, r: Request, plan: RowPlan, drop: str) -> None:
        """Break ``drop`` (:attr:`drop`) in this row where its record's breaker
        can (``fuzz --drop``): the request is a violator from then on."""
        row = GhostRow(r.computed, plan.query_len, plan.accepted, plan.prefilling, plan.live_col, r.rid)
        broken = env.named(drop).breaker(self.row_context(r), row, Choices(draw))  # type: ignore[misc]
        if broken is None:
            return
        plan.query_len, plan.accepted, plan.live_col = broken.query_len, broken.accepted, broken.live_col
        plan.flag = broken.is_prefilling
        plan.breaks = drop
        self.tainted.add(r.rid)
        self.saw(f"broke {drop}")

    def keeps_contract(self, r: Request) -> bool:
        """The request never broke :attr:`drop` and names no slot a violator named."""
        return r.rid not in self.tainted and not any(
            (g, s) in self.tainted_slots for g, cols in enumerate(r.cols) for s in cols)

    def _footprint(self, batch_rows: list, table: list) -> dict | None:
        """The violators' batch rows and the slots their table rows name (see
        :mod:`.containment`), or None when every row keeps the contract."""
        rows = [b for b, row in enumerate(batch_rows) if row is not None and row[0].rid in self.tainted]
        if not rows:
            return None
        slots = sorted({(g, s) for g, group in enumerate(table) for b in rows for s in group[b]
                        if s != self.geo.pad_slot})
        self.tainted_slots.update(slots)
        return {"rows": rows, "slots": [list(s) for s in slots]}

    def _ensure_blocks(self, draw: Draw, r: Request, live_col: int) -> bool:
        """Allocate the columns up to the live one (some earlier ones null)."""
        first = r.computed // self.geo.block_size if self.moves else 0
        needed = []
        for c in range(first, live_col + 1):
            if r.cols[0][c] == self.geo.pad_slot:
                needed.append(c)
        if any(len(f) < len(needed) for f in self.free):
            return False
        for c in needed:
            null = self.features.null_columns and c != live_col and (self.features.shared_prompts or boolean(draw))
            for g in range(len(self.free)):
                r.cols[g][c] = self.geo.pad_slot if null else self._alloc(g)
            self.saw("null column", null)
        return True

    def step(self, draw: Draw) -> list[Action]:
        """One model-runner step: block copies, migration, postprocess."""
        geo, conv = self.geo, self.setup.conventions
        self._fresh.clear()
        if self.features.shared_prompts and len(self.requests) < geo.max_num_reqs and boolean(draw):
            self.admit(draw)  # the scheduler admits a request into this step, to share a prefix
        rids = sorted(self.requests)
        chosen = self.policy.choose_rows(draw, rids)
        rows: list[tuple[Request, RowPlan]] = []
        for rid in chosen:
            r = self.requests[rid]
            plan = self._plan_row(draw, r)
            if plan is not None and self.drop and boolean(draw):
                self._break(draw, r, plan, self.drop)
            if plan is not None and self._ensure_blocks(draw, r, plan.live_col):
                rows.append((r, plan))
        if not rows:
            return []
        pads = 0
        if conv.has_idx_mapping and self.features.padding_rows:
            pads = integer(draw, 0, geo.max_num_reqs - len(rows))
        order = self.policy.batch_order(draw, len(rows))
        batch_rows: list[tuple[Request, RowPlan] | None] = [rows[i] for i in order]
        for _ in range(pads):
            batch_rows.insert(integer(draw, 0, len(batch_rows)), None)
        self.saw("padding row", pads)
        self._count_shapes(rows)
        actions: list[Action] = []
        copies = self._block_copies(draw, batch_rows)
        if copies:
            actions.append(BlockCopy(copies))
        table = self._batch_table(draw, batch_rows)
        contained = self._footprint(batch_rows, table)
        if self.policy.scheduled is not None:
            self.policy.scheduled(self, batch_rows)
        actions.append(replace(self._migrate_action(batch_rows, self._kernel_table(table)), contained=contained))
        actions.append(replace(self._postprocess_action(batch_rows, self._kernel_table(table)), contained=contained))
        self._advance(batch_rows)
        return actions

    def req_index(self, batch: int, r: Request) -> int:
        """The request index of ``r`` in batch row ``batch``: its id with an ``idx_mapping``, else its row."""
        return r.rid if self.setup.conventions.has_idx_mapping else batch

    def _count_shapes(self, rows: list[tuple[Request, RowPlan]]) -> None:
        """Scenario classes of the table's and the block's shape, per scheduled row."""
        cols = self.setup.num_cols
        for _, plan in rows:
            self.saw("live column is the last column", cols > 1 and plan.live_col == cols - 1)
            self.saw("one-column table", cols == 1)
            self.saw("block size 1", self.geo.block_size == 1)
        bs = self.geo.block_size
        self.saw("mode-none chunk past the first block",
                 sum(not self.moves and plan.prefilling and r.computed + plan.query_len > bs for r, plan in rows))
        self.saw("prompt tail as decode", sum(r.prefilling and not plan.prefilling for r, plan in rows))
        self.saw("all mode under a host that does not publish",
                 sum(self.mode == "all" and not self.align and plan.live_col > 0 for _, plan in rows))

    def _batch_table(self, draw: Draw, batch_rows: list) -> list:
        """Every group's block table for one launch: each scheduled request's
        own columns in its batch row; with stale slots on, the entries the
        kernels must not read (past a row's live column, padding rows, rows
        past the launch) may hold real slots of other owners, as a reused
        vLLM table row does."""
        groups, cols, maxr = len(self.setup.layers_per_group), self.setup.num_cols, self.geo.max_num_reqs
        table = [[[self.geo.pad_slot] * cols for _ in range(maxr)] for _ in range(groups)]
        for b in range(maxr):
            row = batch_rows[b] if b < len(batch_rows) else None
            if row is not None:
                for g in range(groups):
                    table[g][b] = list(row[0].cols[g])
            first_unread = row[1].live_col + 1 if row is not None else 0
            violator = row is not None and row[0].rid in self.tainted  # its footprint: its own slots only
            if self.features.stale_slots and not violator and first_unread < cols and boolean(draw):
                placed = self._place_stale_slots(draw, table, b, first_unread, row[0] if row else None)
                self.saw("stale slot past the live column" if row else "stale slot in a padding or unused row",
                         placed > 0)
        return table

    def _place_stale_slots(self, draw: Draw, table: list, b: int, first: int, owner: Request | None) -> int:
        """Fill the null entries of row ``b`` from column ``first`` on (a
        request's own slot past its live column, left by a step that
        scheduled into the next block, stays) with other requests' real
        slots: not allocated this step, none twice in the row, live slots
        first (their trackers are the ones a stray write would show).
        Returns how many columns it filled."""
        groups, cols, pad = len(table), self.setup.num_cols, self.geo.pad_slot
        empty = [c for c in range(first, cols) if all(table[g][b][c] == pad for g in range(groups))]
        candidates = []
        for o in sorted(self.requests.values(), key=lambda o: o.rid):
            if o is not owner:
                candidates += [tuple(o.cols[g][c] for g in range(groups))
                               for c in sorted(range(cols), key=lambda c: c != o.live_col) if o.cols[0][c] != pad]
        taken = [set(table[g][b]) for g in range(groups)]
        usable = [slots for slots in candidates
                  if not any(s in taken[g] or (g, s) in self._fresh for g, s in enumerate(slots))]
        if not usable or not empty:
            return 0
        turn = integer(draw, 0, len(usable) - 1)
        placed = 0
        for slots in usable[turn:] + usable[:turn]:
            if placed == len(empty):
                break
            if any(s in taken[g] for g, s in enumerate(slots)):
                continue
            for g, s in enumerate(slots):
                table[g][b][empty[placed]] = s
                taken[g].add(s)
            placed += 1
        return placed

    def source_col(self, r: Request) -> int:
        """The column ``r``'s state is in before this step: its live column, or in
        align mode the column of its last computed token (-1: none yet)."""
        if r.live_col >= 0:
            return r.live_col
        return (r.computed - 1) // self.geo.block_size if r.computed > 0 and self.moves else -1

    def _block_copies(self, draw: Draw, batch_rows: list) -> list:
        """Copy-on-write of the trackers for moved live columns inside the
        kernels' table, as the policy's ``tracker_copies`` says."""
        copies = self.policy.tracker_copies
        if copies == "none" or copies == "drawn" and not self.features.block_copies:
            return []
        inside = [row if row is None or row[1].live_col < self.table_cols else None for row in batch_rows]
        return self._moved_column_copies(inside, (lambda: True) if copies == "every" else lambda: boolean(draw))

    def _moved_column_copies(self, batch_rows: list, copied: Callable[[], bool]) -> list:
        """The tracker copies ``[group, source slot, destination slot]`` of the rows whose live
        column moves and for which ``copied()`` says yes (asked once per such row); their plans
        are marked copied."""
        copies = []
        for row in batch_rows:
            if row is None:
                continue
            r, plan = row
            src = self.source_col(r)
            if src >= 0 and src != plan.live_col and copied():
                for g in range(len(self.free)):
                    s, d = r.cols[g][src], r.cols[g][plan.live_col]
                    if s != self.geo.pad_slot and d != self.geo.pad_slot:
                        copies.append([g, s, d])
                plan.copied = True
        return copies

    def _migrate_action(self, batch_rows: list, table: list) -> Migrate:
        conv, maxr = self.setup.conventions, self.geo.max_num_reqs
        src_cols, dst_cols = [-1] * maxr, [-1] * maxr
        idx = []
        for b, row in enumerate(batch_rows):
            if row is None:
                idx.append(-1)
                continue
            r, plan = row
            req = self.req_index(b, r)
            idx.append(r.rid)
            src_cols[req], dst_cols[req] = self.source_col(r), plan.live_col
            if src_cols[req] != dst_cols[req]:
                fresh = src_cols[req] < 0 or r.cols[0][src_cols[req]] == self.geo.pad_slot
                self.saw("migration to a copied slot" if plan.copied else
                         "migration to a fresh slot" if fresh else "migration (trackers copied by the kernel)")
        return Migrate(len(batch_rows), idx if conv.has_idx_mapping else None, src_cols, dst_cols, table)

    def _postprocess_action(self, batch_rows: list, table: list) -> Postprocess:
        conv, maxr, n = self.setup.conventions, self.geo.max_num_reqs, len(batch_rows)
        inputs: dict[str, list] = {
            "idx_mapping": [-1] * n, "query_metadata": [0] * (n + 1 if conv.cumulative else n),
            "num_computed_tokens": [0] * maxr, "num_accepted_tokens": [0] * maxr,
            "is_prefilling": [False] * n, "live_cols": [0] * maxr,
        }
        offset = 0
        caller = []
        for b, row in enumerate(batch_rows):
            if row is None:
                if conv.cumulative:
                    inputs["query_metadata"][b + 1] = offset
                caller.append("padding")
                continue
            r, plan = row
            ghost = GhostRow(r.computed, plan.query_len, plan.accepted, plan.prefilling,
                             plan.live_col, self.req_index(b, r), offset, plan.flag)
            if r.rid not in self.tainted or plan.breaks:
                self.check_assumptions(ghost, r, plan.breaks)
            for buf, (i,), value in encode_row(conv, b, ghost):
                inputs[buf][i] = bool(value) if buf == "is_prefilling" else int(value)
            offset += plan.query_len
            caller.append(f"req {r.rid} {'prefill' if plan.prefilling else 'decode'} N={r.computed} "
                          f"q={plan.query_len} accepted={plan.accepted} live_col={plan.live_col}"
                          + (f" (breaks {plan.breaks})" if plan.breaks else ""))
        return Postprocess(n, inputs["idx_mapping"] if conv.has_idx_mapping else None, inputs["query_metadata"],
                           inputs["num_computed_tokens"], inputs["num_accepted_tokens"], inputs["is_prefilling"],
                           None if conv.live_col_is_zero else inputs["live_cols"], table, caller)

    def check_assumptions(self, row: GhostRow, r: Request, breaks: str | None = None) -> None:
        """The generator's rows keep every caller assumption read on a row
        (``spec.assumptions.checked_on_rows``); a row that ``breaks`` one
        (``fuzz --drop``) breaks it and keeps the others."""
        ctx = self.row_context(r)
        for a in env.checked_on_rows():
            ok = a.on_row(ctx, row)  # type: ignore[misc]
            if bool(ok) != (a.name != breaks):
                raise AssertionError(f"generator {'kept' if ok else 'broke'} caller assumption {a.name}"
                                     f"{f' (dropping {breaks})' if breaks else ''}: {row}")

    def _advance(self, batch_rows: list) -> None:
        """The forward pass (FlashInfer's view) and the scheduler's bookkeeping."""
        bs, W, R = self.geo.block_size, self.geo.window, self.geo.ring_len
        for row in batch_rows:
            if row is None:
                continue
            r, plan = row
            before = r.computed
            if plan.prefilling:
                r.computed = before + plan.query_len
                r.ring_start, r.checkpoint_pos = 0, r.computed
                self.saw("multi-column prefill reset", self.align and plan.live_col > before // bs)
            else:
                pnat = before - r.checkpoint_pos
                if kernel_checkpoints(pnat, plan.query_len, W):
                    self.saw("ring wrap", r.ring_start + pnat >= R)
                    self.saw("checkpoint")
                    plan.checkpointed = True
                r.ring_start, committed = kernel_window_after(r.ring_start, pnat, plan.query_len, plan.accepted, W, R)
                r.computed = before + plan.accepted
                r.checkpoint_pos = r.computed - committed
            r.live_col = plan.live_col
            self.saw("table full", r.computed == self.setup.max_model_len)
            running = running_position(plan.prefilling, r.computed, plan.accepted)
            boundary = mamba_state_copy_boundary(running, r.computed, bs)
            if self.align and boundary.needs_copy and boundary.dst_col >= 0:
                dst, aligned = boundary.dst_col, boundary.aligned
                slots = [cols[dst] for cols in r.cols]
                if dst == r.live_col:
                    r.ring_start, r.checkpoint_pos = 0, aligned
                    self.saw("live == destination publish")
                if not plan.prefilling:
                    self.saw("boundary with checkpoint" if plan.checkpointed else "boundary without checkpoint")
                if all(s != self.geo.pad_slot for s in slots):
                    self.published.setdefault((r.stream, dst), slots)
                else:
                    self.saw("null destination")
