"""A generation's launch contract: what its own host does when it launches the kernels, clause by clause.

Each clause is a :class:`LaunchClause` with its provenance (the version's
host code, vLLM's tests, the runner, FlashInfer's source; ``spec.provenance``),
listed in ``spec.contract.RECORDS`` beside the caller assumptions, so a proof
that states it names it and ``prove --list`` groups it by provenance. A
generation's :class:`LaunchContract` holds two kinds:

- how it launches each cache mode (:class:`ModeLaunch`): which constexpr
  combinations (``MATERIALIZE_PREFIXES``, ``LIVE_COL_IS_ZERO``) reach its
  kernels at all, given the modes its host publishes prefixes in
  (:func:`publishing_modes`, read from the host's own source). The review's
  campaigns and probes draw only those (:meth:`LaunchContract.launches`), and
  the kernel proofs prove only those variants;
- facts about one launched row (:attr:`LaunchClause.row`, written in the
  spec's vocabulary over a :class:`RowView`): which rows are scheduled, what
  a padded row holds, the columns a scheduled row names. The kernel proofs
  state them as named hypotheses of every program of the generation's roles;
- whether its host may run FlashInfer's decode at a fixed executed width
  wider than a row and tell the kernels (:attr:`LaunchContract.executed_width`:
  a version whose postprocess takes :data:`EXECUTED_WIDTH_PARAM`); the review's
  campaigns then run some systems so (``fuzz.launcher.Setup.executed_width``).

A counterexample outside a guaranteed clause is never a finding. A clause
vLLM does not guarantee is proved both ways: a kernel correct only under it
relies on it (``latent``), it is no finding.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..geometry import CACHE_MODES, Conventions
from ..provenance import (
    A4, C1, RELEASE_MIXER, T1, T2, T4, Provenance, cite, cite_flashinfer, guaranteed, not_guaranteed,
)
from ..vocab import Cond, Value, conj, implies

BUILT_IN = ("spec/generations/contract.py",)


@dataclass(frozen=True)
class RowView:
    """One program's row of a launch, as a clause reads it: ``initial(buffer,
    index)`` the value the caller put there before the launch, the row's
    batch index, cache group and request index (``req``: negative for a padded
    row), whether it is scheduled (below ``num_reqs``, naming a request),
    the block table's width and the pad slot id."""

    initial: Callable[[str, tuple], Value]
    batch: Value
    group: Value
    req: Value
    scheduled: Cond
    in_launch: Cond
    """The row is below ``num_reqs`` (a padded row among them included)."""
    num_cols: Value
    pad_slot: int
    cumulative: bool
    """Whether ``query_metadata`` is ``query_start_loc`` (else per-row lengths)."""


@dataclass(frozen=True)
class LaunchClause:
    """One clause of a launch contract: its statement in vLLM's terms, its
    provenance, and, for a fact about one launched row, ``row(view)``: the
    hypothesis on that row (None: a clause about which launches happen)."""

    name: str
    statement: str
    provenance: Provenance
    row: Callable[[RowView], Cond] | None = None
    built_in: tuple[str, ...] = BUILT_IN


@dataclass(frozen=True)
class ModeLaunch:
    """How the host launches cache mode ``mode``: with ``LIVE_COL_IS_ZERO``
    (``live_col_is_zero``: True, live columns None), with live columns
    (False), or either (None: nothing pins it); ``clause`` its provenance."""

    mode: str
    live_col_is_zero: bool | None
    clause: LaunchClause | None = None


@dataclass(frozen=True)
class LaunchContract:
    """A generation's launch contract (see the module docstring)."""

    modes: tuple[ModeLaunch, ...] = ()
    """Per cache mode, how it is launched; empty: every combination may reach the kernels."""
    rows: tuple[LaunchClause, ...] = ()
    """Facts about every launched row."""
    executed_width: LaunchClause | None = None
    """The host may launch FlashInfer's decode at a fixed width wider than a row's
    query length, passing it as :data:`EXECUTED_WIDTH_PARAM` to a version whose
    postprocess takes it (None: every row runs at its own length)."""

    def launches(self, conv: Conventions, publishing: tuple[str, ...] | None) -> bool:
        """Whether a host publishing prefixes in the modes ``publishing`` (None:
        not known, every combination) launches the constexpr combination ``conv``."""
        if not self.modes or publishing is None:
            return True
        return any(conv.materialize_prefixes == (m.mode in publishing)
                   and (m.live_col_is_zero is None or conv.live_col_is_zero == m.live_col_is_zero)
                   for m in self.modes)

    def clauses(self) -> tuple[LaunchClause, ...]:
        """Every clause with a record: the modes' and the rows'."""
        widths = [self.executed_width] if self.executed_width is not None else []
        return tuple(dict.fromkeys([m.clause for m in self.modes if m.clause is not None] + list(self.rows) + widths))

    def unguaranteed(self) -> tuple[LaunchClause, ...]:
        """The row clauses vLLM does not guarantee (a proof that needs one is latent)."""
        return tuple(c for c in self.rows if not c.provenance.is_guaranteed)


# -- the host's map from cache mode to MATERIALIZE_PREFIXES, read from its source --------------------

_ASSIGNMENT = re.compile(r"\bmaterialize_prefixes\s*=\s*(?!=)(.+?),?\s*$")
_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b}


def _modes_of(expr: str) -> tuple[str, ...] | None:
    """The cache modes for which ``expr`` (``<the mode> OP <constant>``) is true; None: another expression."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _OPS):
        return None
    try:
        constant = ast.literal_eval(tree.comparators[0])
    except ValueError:
        return None
    op = _OPS[type(tree.ops[0])]
    return tuple(m for m in CACHE_MODES if op(m, constant))


def publishing_modes(source: str) -> tuple[str, ...] | None:
    """The cache modes whose ``materialize_prefixes`` the host code in ``source``
    (a version's file, or the reference's documentation page) sets true, in
    ``CACHE_MODES`` order; None where the source computes it nowhere (D3
    has no such field) or two computations disagree."""
    found = {m for line in source.splitlines() if (hit := _ASSIGNMENT.search(line))
             if (m := _modes_of(hit.group(1))) is not None}
    return found.pop() if len(found) == 1 else None


# -- the clauses ----------------------------------------------------------------------------------------

MODE_NONE_LIVE_COL_IS_ZERO = LaunchClause(
    "mode_none_launched_with_live_col_is_zero",
    "generation A's host launches a Mamba2 layer's postprocess in mode none with live_cols None, i.e. "
    "LIVE_COL_IS_ZERO (the live state is column 0 of a one-column table)",
    guaranteed(
        cite(A4, "LIVE_COL_IS_ZERO=live_cols is None,", "the host sets LIVE_COL_IS_ZERO exactly when it passes no "
                                                           "live columns."),
        cite(T1, "LIVE_COL_IS_ZERO=True,",
             "vLLM's test launches the mode-none postprocess (MATERIALIZE_PREFIXES=False) with LIVE_COL_IS_ZERO."),
        cite(T2, "LIVE_COL_IS_ZERO=True,", "so does the next version of the test."),
        cite(T4, "LIVE_COL_IS_ZERO=True,",
             "and the test of the executed-width versions, for Mamba2 layers (GDN_STP off; its GDN launches "
             "pass live columns)."),
    ),
)

EXECUTED_WIDTH_PARAM = "EXECUTED_QUERY_WIDTH"
"""The postprocess parameter through which a host tells the kernel FlashInfer's executed width."""

EXECUTED_WIDTH_PASSED = LaunchClause(
    "executed_width_passed_to_the_postprocess",
    "generation A's host passes a layer's executed width (the mixer's replayssm_executed_query_width, 0 when unset) "
    "as EXECUTED_QUERY_WIDTH to a postprocess that takes it; FlashInfer's decode then runs every decode row at that "
    "width, appending as many ring rows (the real tokens, then placeholders), whatever the row's query length",
    guaranteed(
        cite(A4, 'getattr(first, "replayssm_executed_query_width", 0) or 0',
             "A4's host reads the mixer's executed width ..."),
        cite(A4, "EXECUTED_QUERY_WIDTH=self.executed_query_width,", "... and launches the postprocess with it."),
        cite(T4, "def test_gdn_replayssm_postprocess_uses_executed_width(",
             "vLLM's test runs decode rows of query_len 1 at executed widths 4 and 8 and expects the checkpoint of "
             "the executed width."),
        cite(RELEASE_MIXER, "spec_query_len = 1 + self.num_spec",
             "vLLM's MTP decode launches FlashInfer with a width of 1 + num_speculative_tokens."),
    ),
)

A_MODES = (ModeLaunch("none", True, MODE_NONE_LIVE_COL_IS_ZERO), ModeLaunch("align", None), ModeLaunch("all", None))
"""Generation A: mode none with LIVE_COL_IS_ZERO; align and all as their host maps them (either flag)."""


def _scheduled_columns_allocated(v: RowView) -> Cond:
    src, dst = v.initial("src_cols", (v.req,)), v.initial("dst_cols", (v.req,))
    live = v.initial("live_cols", (v.req,))

    def allocated(col: Value) -> Cond:
        return implies(conj(col >= 0, col < v.num_cols),
                       v.initial("block_table", (v.group, v.batch, col)) != v.pad_slot)

    return implies(v.scheduled, conj(dst >= 0, src >= -1, allocated(src), allocated(dst), allocated(live)))


SCHEDULED_COLUMNS_ALLOCATED = LaunchClause(
    "scheduled_columns_allocated",
    "a scheduled request's old and new live columns are columns of its row (-1 for an old one it has none "
    "of) and, like its live column, name allocated blocks, never the null block",
    guaranteed(
        cite(C1, "BlockManager guarantees that distinct live columns map to allocated,",
             "generation C's host relies on the block manager allocating every live column it names."),
        cite("vllm-versions/README.md", "caller supplies the old and new logical column of each request",
             "src_cols/dst_cols are a request's old and new live column."),
    ),
    row=_scheduled_columns_allocated,
)


def _query_start_loc_non_decreasing(v: RowView) -> Cond:
    if not v.cumulative:
        return conj()
    here, nxt = v.initial("query_metadata", (v.batch,)), v.initial("query_metadata", (v.batch + 1,))
    return implies(v.in_launch, conj(here >= 0, here <= nxt))


QUERY_START_LOC_NON_DECREASING = LaunchClause(
    "query_start_loc_non_decreasing",
    "query_start_loc starts at 0 and never decreases, through the padded rows below num_reqs too (a padded row "
    "repeats the previous offset: zero tokens)",
    not_guaranteed(
        "vLLM's model runner fills query_start_loc (outside the corpus); it would have to promise that a padded "
        "row below num_reqs keeps it non-decreasing (FlashAttention's cu_seqlens need it, but the runner's "
        "padding code is not here to cite)",
        cite(T1, "query_metadata=ints([0, 4, 8, 12, 16]) if post_step",
             "vLLM's test pads row 3 (idx_mapping -1) with non-decreasing offsets."),
    ),
    row=_query_start_loc_non_decreasing,
)

WORK_LIST_READ_TO_FIRST_END = LaunchClause(
    "work_list_read_to_first_end",
    "FlashInfer's replayssm_materialize reads active_request_indices up to its first -1 and no further: a stale "
    "entry after it is never read (its documented input has -1 there: a deviation nobody reads, a note)",
    guaranteed(
        cite_flashinfer("flashinfer/mamba/replayssm_materialize.py", "The kernel stops at the first ``-1``.",
                        "FlashInfer's materialize stops at the work list's first -1."),
        cite("vllm-versions/B2.py", "tl.store(active_request_indices + active_count, -1)",
             "B2's work list writes one -1 after its rows: its author relies on the reader stopping there."),
    ),
)


def unread_work_list_tail(active: list[int]) -> list[int]:
    """The entries of a work list past its first -1 that are not -1: what
    :data:`WORK_LIST_READ_TO_FIRST_END`'s reader never sees (empty: none)."""
    end = next((i for i, v in enumerate(active) if v < 0), len(active))
    return [v for v in active[end:] if v != -1]


ALL: tuple[LaunchClause, ...] = (MODE_NONE_LIVE_COL_IS_ZERO, SCHEDULED_COLUMNS_ALLOCATED,
                                 QUERY_START_LOC_NON_DECREASING, WORK_LIST_READ_TO_FIRST_END, EXECUTED_WIDTH_PASSED)
"""Every launch clause, for ``spec.contract.RECORDS``."""


def row_facts(contract: LaunchContract, view: RowView, dropped: frozenset[str] = frozenset()) -> list[tuple[str, Any]]:
    """The named hypotheses of ``contract``'s row clauses on one program's row (``dropped``: left out)."""
    return [(c.name, c.row(view)) for c in contract.rows if c.row is not None and c.name not in dropped]
