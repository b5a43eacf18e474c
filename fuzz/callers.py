"""The callers the fuzzer plays: scheduler and model runner, as launch actions.

:class:`Callers` keeps the scheduler's view (requests, block tables per group,
free slots, the prefix cache of published blocks) and FlashInfer's view of
every live slot (ring start and checkpoint position, advanced by the decode
kernel's own rule, independently of the host mirror under test). Each caller
action returns the launch actions it causes, with every input concrete, so a
trace replays without this module. Generated inputs satisfy the spec's named
caller assumptions; :meth:`Callers.check_assumptions` asserts it on each row,
and under ``fuzz --drop NAME`` some rows break that one with its record's
breaker. The decisions its users make differently (the lockstep runner,
review's campaigns) are its :class:`.caller_policy.CallerPolicy`. What it
does is split by concern: the systems it drives (:mod:`.caller_shapes`),
block tables and slots (:mod:`.caller_tables`), the launches of a step
(:mod:`.caller_launches`), the forward pass's view after it
(:mod:`.caller_forward`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from replayssm.spec import assumptions as env
from replayssm.spec.assumptions import GhostRow, RowContext
from replayssm.spec.geometry import moves_live_column
from replayssm.spec.system.rows import TAIL_ACCEPTED, RowRule

from . import caller_forward as forward
from . import caller_launches as launches
from . import caller_tables as tables
from .actions import Action, BlockCopy
from .caller_policy import DEFAULT, CallerPolicy, Choices, Draw, boolean, element, integer
from .caller_shapes import Features
from .launcher import Setup


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
class DrawnRow:
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
    fresh_slots: set[tuple[int, int]] = field(default_factory=set)
    """(group, slot) allocated during the current step."""
    stepping: set[int] = field(default_factory=set)
    """The requests the current step schedules."""
    taken_live: set[int] = field(default_factory=set)
    """Requests whose live block, allocated this step, another running request's table names
    (``CallerPolicy.taken_live_blocks``)."""
    lost: set[int] = field(default_factory=set)
    """Requests whose live column got the null block in some cache group only
    (``CallerPolicy.null_live_groups``): their state there is lost, they leave at the next step."""

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
        tables.release(self, r)
        self.saw("preempt" if preempt else "finish")

    def _plan_row(self, draw: Draw, r: Request) -> DrawnRow | None:
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
        plan = DrawnRow(q, accepted, r.prefilling, rule.live_col(r.computed, q))
        ones = self.policy.one_token_continuations
        if (ones == "often" and plan.prefilling and r.computed > 0
                and 1 in rule.chunk_lens(r.computed, r.prompt_len) and boolean(draw)):
            plan.query_len, plan.live_col = 1, rule.live_col(r.computed, 1)
        if ones == "never" and plan.prefilling and r.computed > 0 and plan.query_len == 1:
            return None  # a one-token continuation chunk: not this step
        return plan

    def _tail_as_decode(self, draw: Draw, r: Request) -> DrawnRow | None:
        """At a prompt tail (prior state, one prompt token left), half the
        time the row vLLM runs there: a decode of ``RowRule.tail_lens``
        tokens (the executed width: the real token, then placeholders) that
        accepts the real one; else None (a prefill chunk, as before)."""
        rule = self.rows
        lens = rule.tail_lens(r.computed, r.prompt_len)
        if not lens or not boolean(draw):
            return None
        q = element(draw, lens)
        return DrawnRow(q, TAIL_ACCEPTED.start, False, rule.live_col(r.computed, q))

    def row_context(self, r: Request) -> RowContext:
        """What the callers know of the world ``r``'s row is scheduled in."""
        return RowContext(self.geo, self.setup.conventions, self.mode, self.max_model_len, self.setup.num_cols,
                          r.prompt_len, self.source_col(r))

    def _break(self, draw: Draw, r: Request, plan: DrawnRow, drop: str) -> None:
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


    def step(self, draw: Draw) -> list[Action]:
        """One model-runner step: block copies, migration, postprocess."""
        geo, conv = self.geo, self.setup.conventions
        self.fresh_slots.clear()
        for rid in sorted(self.lost & set(self.requests)):
            self.finish(rid, preempt=True)
        self.lost.clear()
        if not self.requests:
            return []
        if self.features.shared_prompts and len(self.requests) < geo.max_num_reqs and boolean(draw):
            self.admit(draw)  # the scheduler admits a request into this step, to share a prefix
        rids = sorted(self.requests)
        chosen = self.policy.choose_rows(draw, rids)
        self.stepping, self.taken_live = set(chosen), set()
        rows: list[tuple[Request, DrawnRow]] = []
        for rid in chosen:
            r = self.requests[rid]
            plan = self._plan_row(draw, r)
            if plan is not None and self.drop and boolean(draw):
                self._break(draw, r, plan, self.drop)
            if plan is not None and tables.ensure_blocks(self, draw, r, plan.live_col, plan.prefilling):
                rows.append((r, plan))
        if not rows:
            return []
        pads = 0
        if conv.has_idx_mapping and self.features.padding_rows:
            pads = integer(draw, 0, geo.max_num_reqs - len(rows))
        order = self.policy.batch_order(draw, len(rows))
        batch_rows: list[tuple[Request, DrawnRow] | None] = [rows[i] for i in order]
        for _ in range(pads):
            batch_rows.insert(integer(draw, 0, len(batch_rows)), None)
        self.saw("padding row", pads)
        self._count_shapes(rows)
        actions: list[Action] = []
        copies = tables.block_copies(self, draw, batch_rows)
        if copies:
            actions.append(BlockCopy(copies))
        table = tables.batch_table(self, draw, batch_rows)
        contained = self._footprint(batch_rows, table)
        if self.policy.scheduled is not None:
            self.policy.scheduled(self, batch_rows)
        actions.append(replace(launches.migrate_action(self, batch_rows, tables.kernel_table(self, table)), contained=contained))
        actions.append(replace(launches.postprocess_action(self, batch_rows, tables.kernel_table(self, table)), contained=contained))
        forward.advance(self, batch_rows)
        return actions

    def req_index(self, batch: int, r: Request) -> int:
        """The request index of ``r`` in batch row ``batch``: its id with an ``idx_mapping``, else its row."""
        return r.rid if self.setup.conventions.has_idx_mapping else batch

    def _count_shapes(self, rows: list[tuple[Request, DrawnRow]]) -> None:
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



    def source_col(self, r: Request) -> int:
        """The column ``r``'s state is in before this step: its live column, or in
        align mode the column of its last computed token (-1: none yet)."""
        if r.live_col >= 0:
            return r.live_col
        return (r.computed - 1) // self.geo.block_size if r.computed > 0 and self.moves else -1





    def check_assumptions(self, row: GhostRow, r: Request, breaks: str | None = None) -> None:
        """The generator's rows keep every caller assumption read on a row
        (``spec.assumptions.checked_on_rows``); a row that ``breaks`` one
        (``fuzz --drop``) breaks it and keeps the others, but those its record
        says such a row may break with it (``co_broken``)."""
        ctx = self.row_context(r)
        spared = {a.name for a in env.named(breaks).co_broken} if breaks else set()
        for a in env.checked_on_rows():
            ok = a.on_row(ctx, row)  # type: ignore[misc]
            if a.name in spared and not ok:
                continue
            if bool(ok) != (a.name != breaks):
                raise AssertionError(f"generator {'kept' if ok else 'broke'} caller assumption {a.name}"
                                     f"{f' (dropping {breaks})' if breaks else ''}: {row}")

