"""Host-side input checks of the ReplaySSM entry points.

Every check raises ``ValueError`` whose message starts with the offending
field and states the allowed range or values. The checks read only shapes,
dtypes, devices and Python scalars (never tensor contents), so they cost no
device synchronization and can run on every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

MAX_LOGICAL_WINDOW = 16
INDEX_DTYPES = (torch.int32, torch.int64)
FLAG_DTYPES = (torch.bool, torch.int8, torch.uint8, torch.int32)
CACHE_MODES = ("align", "none")


def fail(field: str, allowed: str, got: object) -> ValueError:
    """The error for ``field`` holding ``got`` where ``allowed`` is required."""
    return ValueError(f"{field}: must be {allowed}, got {got}")


def check_int_range(field: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]`` (no upper bound when ``high`` is None)."""
    allowed = f"an int in [{low}, {'inf' if high is None else high}]"
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(field, allowed, type(value).__name__)
    if value < low or (high is not None and value > high):
        raise fail(field, allowed, value)
    return value


def check_bool(field: str, value: object) -> None:
    """``value`` must be a Python bool."""
    if not isinstance(value, bool):
        raise fail(field, "a bool", type(value).__name__)


def check_vector(
    field: str,
    tensor: object,
    device: torch.device,
    min_len: int,
    dtypes: Sequence[torch.dtype] = INDEX_DTYPES,
) -> None:
    """``tensor`` must be a 1-D tensor on ``device`` of a listed dtype with ``min_len`` entries."""
    if not isinstance(tensor, torch.Tensor):
        raise fail(field, "a torch.Tensor", type(tensor).__name__)
    if tensor.device != device:
        raise fail(field, f"on device {device}", tensor.device)
    if tensor.dtype not in dtypes:
        raise fail(field, f"of dtype in {[str(d) for d in dtypes]}", tensor.dtype)
    if tensor.dim() != 1 or (tensor.stride(0) != 1 and tensor.numel() > 1):
        raise fail(field, "a contiguous 1-D tensor", f"shape {tuple(tensor.shape)}")
    if tensor.numel() < min_len:
        raise fail(field, f"at least {min_len} entries long", tensor.numel())


def _inner_contiguous(tensor: torch.Tensor) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(tensor.shape[1:], tensor.stride()[1:]))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _check_cache(field: str, tensor: object, device: torch.device, dims: int) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise fail(field, "a torch.Tensor", type(tensor).__name__)
    if tensor.device != device:
        raise fail(field, f"on device {device} (that of kv_cache[1])", tensor.device)
    if tensor.dim() != dims:
        raise fail(field, f"a {dims}-D tensor", f"shape {tuple(tensor.shape)}")
    if not _inner_contiguous(tensor):
        raise fail(field, "contiguous in every dimension but the slot one", tensor.stride())
    return tensor


def check_mixer(name: str, mixer: Any) -> None:
    """Cache layout, dtypes, devices and window of one ReplaySSM layer."""
    caches = getattr(mixer, "kv_cache", None)
    if not isinstance(caches, (list, tuple)) or len(caches) < 5:
        raise fail(f"{name}.kv_cache", "a list of 5 tensors (conv, state, x, dt, B)", caches)
    state = caches[1]
    if not isinstance(state, torch.Tensor):
        raise fail(f"{name}.kv_cache[1]", "a torch.Tensor", type(state).__name__)
    device = state.device
    _check_cache(f"{name}.kv_cache[1] (state)", state, device, 4)
    x = _check_cache(f"{name}.kv_cache[2] (x cache)", caches[2], device, 4)
    dt = _check_cache(f"{name}.kv_cache[3] (dt cache)", caches[3], device, 3)
    b = _check_cache(f"{name}.kv_cache[4] (B cache)", caches[4], device, 4)
    slots, heads, dim, dstate = state.shape
    window = mixer.replayssm_buffer_len
    check_int_range(f"{name}.replayssm_buffer_len", window, 1, MAX_LOGICAL_WINDOW)
    ring = x.shape[2]
    if ring < window + 1:
        raise fail(
            f"{name}.kv_cache[2].shape[2] (ring length)",
            f">= replayssm_buffer_len + 1 = {window + 1}",
            ring,
        )
    if x.shape[0] != slots or x.shape[1] != heads or x.shape[3] != dim:
        raise fail(f"{name}.kv_cache[2] (x cache)", f"of shape ({slots}, {heads}, R, {dim})", tuple(x.shape))
    if tuple(dt.shape) != (slots, heads, ring):
        raise fail(f"{name}.kv_cache[3] (dt cache)", f"of shape ({slots}, {heads}, {ring})", tuple(dt.shape))
    groups = b.shape[1]
    if b.shape[0] != slots or groups < 1 or heads % groups or b.shape[2] != ring or b.shape[3] != dstate:
        raise fail(
            f"{name}.kv_cache[4] (B cache)",
            f"of shape ({slots}, G, {ring}, {dstate}) with G dividing {heads}",
            tuple(b.shape),
        )
    if x.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise fail(f"{name}.kv_cache[2] and [4] dtype", "torch.bfloat16", (x.dtype, b.dtype))
    if dt.dtype != torch.float32:
        raise fail(f"{name}.kv_cache[3] dtype", "torch.float32", dt.dtype)
    a = mixer.A
    if not isinstance(a, torch.Tensor) or a.device != device or tuple(a.shape) != (heads,) or not a.is_contiguous():
        got = a if not isinstance(a, torch.Tensor) else (tuple(a.shape), a.device)
        raise fail(f"{name}.A", f"a contiguous tensor of shape ({heads},) on {device}", got)


def check_trackers(name: str, mixer: Any, first: Any, device: torch.device, num_slots: int) -> None:
    """The layer's trackers are its group's shared int32 pair with one entry per slot."""
    for attr, shared in (
        ("_replayssm_ring_start", first._replayssm_ring_start),
        ("_replayssm_prev_num_accepted", first._replayssm_prev_num_accepted),
    ):
        tracker = getattr(mixer, attr)
        check_vector(f"{name}.{attr}", tracker, device, num_slots, (torch.int32,))
        if tracker.data_ptr() != shared.data_ptr():
            raise fail(
                f"{name}.{attr}",
                "the group's shared tracker (run initialize_replayssm_ring_trackers)",
                "a separate tensor",
            )


def check_block_table(field: str, table: object, device: torch.device, max_num_reqs: int) -> None:
    """A 2-D int32 table with at least ``max_num_reqs`` rows and contiguous columns."""
    if not isinstance(table, torch.Tensor):
        raise fail(field, "a torch.Tensor", type(table).__name__)
    if table.device != device:
        raise fail(field, f"on device {device}", table.device)
    if table.dtype != torch.int32:
        raise fail(field, "of dtype torch.int32", table.dtype)
    if table.dim() != 2 or table.shape[1] < 1 or (table.shape[1] > 1 and table.stride(1) != 1):
        raise fail(field, "a 2-D tensor with >= 1 contiguous columns", tuple(table.shape))
    if table.shape[0] < max_num_reqs:
        raise fail(f"{field} rows", f">= max_num_reqs = {max_num_reqs}", table.shape[0])


def check_create(grouped: object, max_num_reqs: object) -> None:
    """Inputs of ``ReplaySSMModelContext.create``."""
    check_int_range("max_num_reqs", max_num_reqs, 1)
    if not isinstance(grouped, Sequence) or len(grouped) == 0:
        raise fail("grouped", "a non-empty sequence of (mixers, spec, block_table)", grouped)
    first_spec = None
    geometry = None
    for g, entry in enumerate(grouped):
        if not isinstance(entry, (tuple, list)) or len(entry) != 3:
            raise fail(f"grouped[{g}]", "a (mixers, spec, block_table) triple", entry)
        mixers, spec, table = entry
        if not isinstance(mixers, (list, tuple)) or len(mixers) == 0:
            raise fail(f"grouped[{g}] mixers", "a non-empty list of layers", mixers)
        block_size = getattr(spec, "block_size", None)
        check_int_range(f"grouped[{g}] spec.block_size", block_size, 1)
        mode = getattr(spec, "mamba_cache_mode", None)
        if mode not in CACHE_MODES:
            raise fail(f"grouped[{g}] spec.mamba_cache_mode", f"one of {CACHE_MODES}", mode)
        if first_spec is None:
            first_spec = spec
        elif spec != first_spec:
            raise fail(f"grouped[{g}] spec", f"equal to grouped[0] spec {first_spec}", spec)
        for i, mixer in enumerate(mixers):
            name = f"grouped[{g}] mixers[{i}]"
            check_mixer(name, mixer)
            caches = mixer.kv_cache
            layer_geometry = (
                [(t.shape[1:], t.dtype) for t in caches[1:5]],
                mixer.A.dtype,
                mixer.replayssm_buffer_len,
                caches[1].device,
            )
            if geometry is None:
                geometry = layer_geometry
            elif layer_geometry != geometry:
                raise fail(
                    f"{name} geometry",
                    "equal to the first layer's (inner cache shapes, dtypes, A dtype, "
                    "replayssm_buffer_len, device)",
                    "a different one",
                )
            check_trackers(name, mixer, mixers[0], caches[1].device, caches[1].shape[0])
        check_block_table(f"grouped[{g}] block_table", table, geometry[3], max_num_reqs)


def check_postprocess(
    device: torch.device,
    max_num_reqs: int,
    *,
    idx_mapping: object,
    query_metadata: object,
    query_metadata_is_cumulative: object,
    num_computed_tokens: object,
    num_computed_is_post_step: object,
    num_accepted_tokens: object,
    is_prefilling: object,
    live_cols: object,
    num_reqs: object,
) -> None:
    """Step metadata given to ``ReplaySSMModelContext.postprocess``."""
    check_int_range("num_reqs", num_reqs, 0, max_num_reqs)
    check_bool("query_metadata_is_cumulative", query_metadata_is_cumulative)
    check_bool("num_computed_is_post_step", num_computed_is_post_step)
    extent = _request_extent(idx_mapping, device, num_reqs, max_num_reqs)
    check_vector(
        "query_metadata", query_metadata, device, num_reqs + int(bool(query_metadata_is_cumulative))
    )
    check_vector("num_computed_tokens", num_computed_tokens, device, extent)
    check_vector("num_accepted_tokens", num_accepted_tokens, device, extent)
    check_vector("is_prefilling", is_prefilling, device, num_reqs, FLAG_DTYPES)
    if live_cols is not None:
        check_vector("live_cols", live_cols, device, extent)


def check_reset(
    device: torch.device,
    max_num_reqs: int,
    *,
    idx_mapping: object,
    src_cols: object,
    dst_cols: object,
    num_reqs: object,
) -> None:
    """Migration inputs given to ``ReplaySSMModelContext.reset_new_slots``."""
    check_int_range("num_reqs", num_reqs, 0, max_num_reqs)
    extent = _request_extent(idx_mapping, device, num_reqs, max_num_reqs)
    check_vector("src_cols", src_cols, device, extent)
    check_vector("dst_cols", dst_cols, device, extent)


def _request_extent(idx_mapping: object, device: torch.device, num_reqs: int, max_num_reqs: int) -> int:
    """Entries needed in request-indexed tensors: rows, or all persistent indices."""
    if idx_mapping is None:
        return num_reqs
    check_vector("idx_mapping", idx_mapping, device, num_reqs)
    return max_num_reqs


def check_kv_cache_config(kv_cache_config: object) -> None:
    """A config whose ``kv_cache_groups`` each list their ``layer_names``."""
    groups = getattr(kv_cache_config, "kv_cache_groups", None)
    if not isinstance(groups, Sequence):
        raise fail("kv_cache_config.kv_cache_groups", "a sequence of cache groups", groups)
    for g, group in enumerate(groups):
        names = getattr(group, "layer_names", None)
        if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
            raise fail(f"kv_cache_config.kv_cache_groups[{g}].layer_names", "a list of str", names)


def check_forward_context(forward_context: object) -> None:
    """A mapping from layer names to layers."""
    if not isinstance(forward_context, Mapping):
        raise fail("forward_context", "a mapping from layer name to layer", type(forward_context).__name__)
