"""The Triton ReplaySSM decode's ring cursor in vLLM 0.33.0: computed on the CPU, per decode row.

0.33.0's Triton decode kernel (``selective_state_update_replayssm_output_only``)
keeps no trackers on the device. Its buffer is linear: ``L`` rows
(``replayssm_buffer_len``), row ``k`` the ``k``-th token after the checkpoint.
The metadata builder (``mamba_attn.py``) gives each decode row a cursor
``write_pos`` (the rows already cached: the kernel reads rows ``[0,
write_pos)`` and the current token, then appends the current token at row
``write_pos``) and a flag ``is_flush`` (instead of appending, the kernel folds
the rows and the current token into the state and stores it: the new
checkpoint). Both come from the request's decode count on the CPU:

- ``decode_base`` is the request's token count when it was (re)admitted
  (``gpu_input_batch.py``), the anchor of its first decode;
- in ``align`` mode the anchor moves to the start of the current block, where
  a forced flush left an exact checkpoint;
- ``steps = num_computed - anchor``, ``write_pos = steps mod L``; a row with
  ``steps < 0`` (a one-token prompt tail replayed as decode) is a one-token
  flush at row 0;
- the step flushes when ``write_pos == L - 1``, for a prompt tail, and in
  ``align`` mode on the step that completes a block.

:func:`decode_cursor` is that rule in the vocabulary, so it runs on ints, numpy
lanes and Z3 terms like the kernels' programs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocab import Cond, Value, cdiv, cmod, conj, disj, imax, ite, negate


@dataclass(frozen=True)
class Cursor:
    """One decode row's cursor as the metadata builder computes it."""

    anchor: Value
    steps: Value
    write_pos: Value
    is_flush: Cond
    prompt_tail: Cond


def decode_anchor(num_computed: Value, decode_base: Value, block_size: int, align: bool) -> Value:
    """Where the row's decode count starts: ``decode_base``, or in ``align``
    mode the later of it and the start of the block holding ``num_computed``."""
    if not align:
        return decode_base
    return imax(decode_base, cdiv(num_computed, block_size) * block_size)


def decode_cursor(num_computed: Value, query_len: Value, decode_base: Value, buffer_len: int, block_size: int,
                  align: bool) -> Cursor:
    """The cursor of one decode row (``num_computed`` tokens before this step,
    ``query_len`` scheduled, 0 for a padding row)."""
    anchor = decode_anchor(num_computed, decode_base, block_size, align)
    raw = num_computed - anchor
    valid = query_len > 0
    prompt_tail = conj(valid, raw < 0)
    steps = ite(conj(valid, negate(prompt_tail)), raw, 0)
    write_pos = cmod(steps, buffer_len)
    flush = disj(write_pos == buffer_len - 1, prompt_tail)
    if align:
        flush = disj(flush, conj(valid, cmod(num_computed + query_len, block_size) == 0))
    return Cursor(anchor, steps, write_pos, flush, prompt_tail)
