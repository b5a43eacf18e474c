"""Which rows a running request may schedule in one step: the one definition.

The system model's generators (``spec.system.explore``), the stateful
fuzzer's callers (``fuzz.callers``) and the wide runner (``fuzz.wide``) all
draw a request's next row from :class:`RowRule`, so the three agree on what
a caller may do under every caller assumption (``spec.assumptions``):

* a prefill chunk ends on a block boundary or at the prompt's end in align
  mode (``prefill_chunk_on_boundary``; in modes none and all any length up
  to the rest of the prompt), and its accepted count is the one vLLM passes
  there, 1 (``PREFILL_ACCEPTED``, ``accepted_within_row``);
* a decode row has ``1 .. T`` tokens, ``T`` the longest row the window, the
  ring's step room and one block allow (``decode_row_fits``,
  ``decode_within_block``), within the model length, and accepts ``1 .. q``
  of them (``accepted_within_row``);
* a prompt tail (``N > 0`` computed, one prompt token left) may also run as
  a decode row of ``1 .. T`` tokens, the real token and placeholders up to
  the executed width, accepting exactly the real one (model choice
  ``prompt_tail_runs_as_decode``: vLLM's padded cached prompt tail);
* its live column is the block of its last scheduled token in align and all
  mode, 0 in mode none (``live_col_is_last_block``).

The elementwise methods take ints or numpy arrays alike (the wide runner
draws all rows at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from ..geometry import Conventions, Geometry, check_cache_mode, chunks_on_boundary
from ..ghost_row import live_col_of
from ..row_assumptions import PREFILL_ACCEPTED
from ..vocab import Cond, Value, imin, ite


@dataclass(frozen=True)
class RowOption:
    """One row a running request may schedule: query length ``q``, the
    accepted counts it allows, the ``is_prefilling`` flag (0 or 1), the
    live column the row ends in, and whether it is a prompt tail run as a
    decode (``tail_as_decode`` 1: ``prefilling`` 0 although the request has
    a prompt token left)."""

    q: int
    accepted: range
    prefilling: int
    live_col: int
    tail_as_decode: int = 0


@dataclass(frozen=True)
class RowRule:
    """The rows a request may take in a world of geometry ``geo``, caller
    conventions ``conv``, model length ``max_len`` and cache mode
    ``cache_mode`` (``None``: the one ``conv`` serves by default; resolved
    when the rule is made)."""

    geo: Geometry
    conv: Conventions
    max_len: int
    cache_mode: str | None = None

    def __post_init__(self) -> None:
        mode = self.conv.mode if self.cache_mode is None else self.cache_mode
        object.__setattr__(self, "cache_mode", check_cache_mode(mode, self.conv))

    @property
    def mode(self) -> str:
        """The cache mode (``spec.geometry.CACHE_MODES``)."""
        return self.cache_mode  # type: ignore[return-value]

    @property
    def longest_decode(self) -> int:
        """``T``: the most tokens one decode row may schedule."""
        return min(int(self.geo.max_step), int(self.geo.window), int(self.geo.block_size))

    def decode_lens(self, computed: int) -> list[int]:
        """The query lengths of a decode row after ``computed`` tokens, the
        longest first (a fuzzer shrinks toward it): ``1 .. T`` within the
        model length; none when the model length is reached."""
        top = min(self.longest_decode, self.max_len - computed)
        return [top, *range(1, top)] if top >= 1 else []

    def next_chunk_end(self, computed: Value, prompt: Value) -> Value:
        """Where the shortest prefill chunk from ``computed`` ends in align
        mode: the next block boundary, or the prompt's end before it."""
        bs = int(self.geo.block_size)
        return imin((computed // bs + 1) * bs, prompt)

    def chunk_lens(self, computed: int, prompt: int) -> list[int] | range:
        """The query lengths of a prefill chunk from ``computed`` of a
        ``prompt``-token prompt: in align mode each chunk ending on a block
        boundary before the prompt's end (shortest first), then the rest of
        the prompt; in modes none and all any length up to the rest (a range)."""
        rest = prompt - computed
        if not chunks_on_boundary(self.mode):
            return range(1, rest + 1)
        bs = int(self.geo.block_size)
        return [end - computed for end in range((computed // bs + 1) * bs, prompt, bs)] + [rest]

    def is_tail(self, computed: Value, prompt: Value) -> Cond:
        """A request after ``computed`` tokens of a ``prompt``-token prompt is
        at its prompt tail: prior state and exactly one prompt token left (on
        numpy arrays elementwise)."""
        return (computed > 0) & (prompt - computed == 1)

    def tail_lens(self, computed: int, prompt: int) -> list[int]:
        """The query lengths of a prompt tail run as a decode row: the decode
        lengths (:meth:`decode_lens`, the real token then placeholders up to
        the executed width); none away from a tail."""
        return self.decode_lens(computed) if self.is_tail(computed, prompt) else []

    def accepted_lo(self, prefilling: Cond) -> Value:
        """The fewest tokens a row may accept (a prefill row: :data:`PREFILL_ACCEPTED`)."""
        return ite(prefilling, PREFILL_ACCEPTED.start, 1)

    def accepted_hi(self, prefilling: Cond, q: Value) -> Value:
        """The most tokens a row of ``q`` tokens may accept (a prefill row: :data:`PREFILL_ACCEPTED`)."""
        return ite(prefilling, PREFILL_ACCEPTED.stop - 1, q)

    def accepted(self, prefilling: bool, q: int) -> range:
        """The accepted counts a row of ``q`` tokens allows."""
        return range(self.accepted_lo(prefilling), self.accepted_hi(prefilling, q) + 1)

    def live_col(self, computed: Value, q: Value) -> Value:
        """The live column a row of ``q`` tokens after ``computed`` ends in."""
        return live_col_of(self.mode, int(self.geo.block_size), computed, q)

    def options(self, computed: int, prompt: int) -> list[RowOption]:
        """Every row a running request after ``computed`` tokens of a
        ``prompt``-token prompt may take (none left: an empty list)."""
        prefilling = computed < prompt
        lens = self.chunk_lens(computed, prompt) if prefilling else self.decode_lens(computed)
        rows = [RowOption(q, self.accepted(prefilling, q), int(prefilling), self.live_col(computed, q)) for q in lens]
        return rows + [RowOption(q, TAIL_ACCEPTED, 0, self.live_col(computed, q), 1)
                       for q in self.tail_lens(computed, prompt)]


TAIL_ACCEPTED = range(1, 2)
"""What a prompt tail run as a decode accepts: its one real token (the placeholders after it are rejected)."""
