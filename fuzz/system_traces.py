"""System traces (proof counterexamples, ``replayssm.base.system_traces``) as launch actions.

The system model runs the spec's kernels inside its own steps; each step
records the inputs and state buffers its migration and postprocess launches
found. Replaying the model turns a system trace into the fuzzer's trace
format: before each launch, a ``set_state`` of the trackers and plan buffers
the model holds (which also stands for the caller's block copies), then the
launch with its inputs. The implementation then runs the very launches a
proof counterexample describes.
"""

from __future__ import annotations

from replayssm.base.system_traces import params_from_json, replay_actions
from replayssm.base.traces import TRACE_ID
from replayssm.spec.geometry import Geometry

from .actions import STATE_BUFFERS, Migrate, Postprocess, SetState, action_to_json
from .launcher import Setup


def _nested(shape: tuple, values: list) -> list:
    if len(shape) <= 1:
        return list(values)
    step = len(values) // shape[0]
    return [_nested(shape[1:], values[i * step:(i + 1) * step]) for i in range(shape[0])]


def _launch_action(name: str, snap: dict, launch: int, conv) -> Migrate | Postprocess:
    flat = {k: v for k, (_, v) in snap.items()}
    idx_mapping = flat["idx_mapping"] if conv.has_idx_mapping else None
    block_table = _nested(*snap["block_table"])
    if name == Migrate.NAME:
        return Migrate(launch, idx_mapping, flat["src_cols"], flat["dst_cols"], block_table)
    return Postprocess(launch, idx_mapping, flat["query_metadata"], flat["num_computed_tokens"],
                       flat["num_accepted_tokens"], [bool(x) for x in flat["is_prefilling"]],
                       None if conv.live_col_is_zero else flat["live_cols"], block_table)


def launch_trace(system_trace: dict) -> dict:
    """The fuzzer trace of the kernel launches a system trace performs."""
    p = params_from_json(system_trace["params"])
    geo = Geometry(max_num_reqs=p.num_reqs, block_size=p.geo.block_size, window=p.geo.window,
                   ring_len=p.geo.ring_len, pad_slot=p.geo.pad_slot)
    setup = Setup(geo, p.conv, tuple(p.layers), p.num_cols, p.num_slots, p.max_len)
    actions = []
    for act, outcome, _ in replay_actions(system_trace):
        for name, snap, launch in outcome.info.get("launches", []):
            state = {b: list(snap[b][1]) for b in STATE_BUFFERS if b in snap}
            actions.append(action_to_json(SetState(state, [f"system {act['name']}"])))
            actions.append(action_to_json(_launch_action(name, snap, int(launch), p.conv)))
    return {"#meta": {"format": TRACE_ID, "source": "system trace",
                      "from": system_trace.get("#meta", {})},
            "params": setup.as_json(), "actions": actions}
