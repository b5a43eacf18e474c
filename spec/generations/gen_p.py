"""Generation P (vLLM 0.33.0): per-slot ring trackers that the forward pass changes itself.

From 0.33.0's ``ssu_dispatch.py`` and its host (``mamba_mixer2.py``,
``mamba_attn.py``, ``gpu_input_batch.py``; the caller's clauses in
``spec/release_caller.py``): ``_update_replayssm_ring_trackers_kernel`` resets
a slot's trackers on prefill (``RESET``, launched with ``logical_window = 0``
and ``ring_buffer_len = 1``) or advances them by the single decoded token;
``_commit_replayssm_ring_trackers_kernel`` commits the previous pass's accepted
count (MTP), read by batch row. Both launch ``cdiv(n_slots, BLOCK)`` programs
of ``BLOCK = 128`` lanes over ``state_batch_indices``. No plans, no block
tables, no materialize: a :class:`.tracker_api.TrackerApi`, not an
:class:`.api.Api`.
"""

from .. import release_caller as caller
from ..release_trackers import TRACKERS, ReleaseGeometry
from .tracker_api import (
    BUFFER, SCALAR, STRIDE, ClauseUse, Configuration, Param, ProbeUse, TrackerApi, TrackerContract, TrackerRole,
)

UPDATE = "_update_replayssm_ring_trackers_kernel"
COMMIT = "_commit_replayssm_ring_trackers_kernel"

_TRACKERS = tuple(Param(b, BUFFER) for b in TRACKERS)
_SLOTS = Param("state_batch_indices", BUFFER, length="n_slots")
_TAIL = (Param("state_batch_indices_stride", STRIDE, of="state_batch_indices"), Param("n_slots", SCALAR),
         Param("num_states", SCALAR))
_DISTINCT = ClauseUse(caller.DISTINCT_SLOTS, ("slot0", "slot1", "pad"))

ROLES = (
    TrackerRole("P.commit", "commit", COMMIT,
                (*_TRACKERS, _SLOTS, Param("num_accepted_tokens", BUFFER, length="accepted_len"),
                 Param("query_start_loc", BUFFER), *_TAIL),
                clauses=(_DISTINCT, ClauseUse(caller.ROWS_COVERED,
                                              ("n_slots", "accepted_len", "query_start_loc_len")))),
    TrackerRole("P.reset", "reset", UPDATE, (*_TRACKERS, _SLOTS, *_TAIL),
                {"RESET": True, "logical_window": 0, "ring_buffer_len": 1}, clauses=(_DISTINCT,)),
    TrackerRole("P.advance", "advance", UPDATE, (*_TRACKERS, _SLOTS, *_TAIL), {"RESET": False},
                geometry=ReleaseGeometry(16, 1, 17), clauses=(_DISTINCT,)),
)
"""P's kernel roles: the commit (vLLM's ring of 20 rows), the reset on prefill
and the single-token advance (a ring of 17 rows); only the commit reads the
row buffers, so only its proof takes ``p_row_buffers_cover_launch``."""

API = TrackerApi(
    name="P",
    summary="per-slot ring trackers changed by the forward pass; the MTP commit one pass later, by batch row",
    signature={COMMIT: ("ring_start", "prev_num_accepted", "prev_query_len", "num_accepted_tokens"),
               UPDATE: ("ring_start", "RESET")},
    roles=ROLES,
    contract=TrackerContract(
        tuple(caller.ALL), caller.VALIDATOR_RULES,
        configurations=(Configuration("mtp W16 T4 R20", ReleaseGeometry(16, 4, 20)),
                        Configuration("mtp W4 T2 R6", ReleaseGeometry(4, 2, 6)),
                        Configuration("stp W16 T1 R17", ReleaseGeometry(16, 1, 17))),
        probes=(ProbeUse(caller.ASYNC_ACCEPTED_ORDERED, "previous_rows", "mtp W16 T4 R20"),),
    ),
)
"""P: its roles, and its host's contract: the caller's clauses and the
validator's rules (``spec/release_caller.py``), the configurations its review's
campaigns run (speculative decoding with vLLM's default window, ``W = 16``,
three draft tokens, a ring of 20 rows; a small window, ``W = 4``, ``T = 2``;
single-token decode, ``W = 16``; each one the validator accepts) and the
clause it probes: the accepted counts of one pass reaching the next in the
current rows' order (async scheduling, vLLM #53912), broken by a host that
gives them in the previous pass's row order."""
