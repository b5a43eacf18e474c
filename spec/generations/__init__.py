"""vLLM's launch-API generations of the ReplaySSM kernels, one adapter each, below every judge.

A generation is one module here (``gen_a.py`` ... ``gen_d.py``, and
``reference.py`` for the spec's own API) holding one :class:`.api.Api`
record: how its host launches its kernels in each phase of a step, over which
buffers, and its kernel roles (:mod:`.roles`). ``review`` drives a version
through that record; the kernel prover, the kernel diff and ``prove --kernels
--impl`` read its roles. :func:`detect` picks a version's generation by its
kernels' signatures; adding a generation is its module and its line in
:data:`GENERATIONS`. A generation whose trackers the forward pass changes
itself (no plans, no materialize: vLLM 0.33.0's ring trackers, ``gen_p.py``)
is a :class:`.tracker_api.TrackerApi` record in :data:`TRACKER_GENERATIONS`,
read by ``review --vllm``.
"""

from __future__ import annotations

from typing import Any

from . import gen_a, gen_b, gen_c, gen_d, gen_p, reference
from .api import Api, Launch, Phase, kernel_params
from .tracker_api import TrackerApi

__all__ = ["Api", "GENERATIONS", "GenerationError", "Launch", "Phase", "TRACKER_GENERATIONS", "TrackerApi", "detect",
           "kernel_params", "registry"]

GENERATIONS: tuple[Api, ...] = (reference.API, gen_d.API, gen_c.API, gen_b.API, gen_a.API)
"""Every known launch-API generation, in detection order (the first whose signature matches)."""

TRACKER_GENERATIONS: tuple[TrackerApi, ...] = (gen_p.API,)
"""Every known generation whose trackers the forward pass changes (``review --vllm`` reviews them)."""


class GenerationError(ValueError):
    """A version matches no generation, or not the one ``--api`` names."""


def registry() -> dict[str, Api]:
    """Every known generation by name, in detection order."""
    return {a.name: a for a in GENERATIONS}


def detect(module: Any, name: str | None = None) -> Api:
    """The generation of ``module`` (or the one named by ``--api``), checked
    against its kernels; a :class:`GenerationError` names what does not match."""
    apis = registry()
    if name is not None:
        if name not in apis:
            raise GenerationError(f"--api must be one of {sorted(apis)}, got {name!r}")
        api = apis[name]
        missing = [k for k in api.kernels(module) if kernel_params(module, k) is None]
        if missing or not api.matches(module):
            raise GenerationError(f"--api {name}: the target lacks the kernels or parameters it launches "
                                  f"({', '.join(missing) or 'signature ' + str(dict(api.signature))})")
        return api
    for api in apis.values():
        if api.matches(module):
            return api
    found = {k: v.arg_names for k, v in vars(module).items() if hasattr(v, "arg_names") and not k.startswith("__")}
    if not found:
        raise GenerationError("the target defines no Triton kernels (missing kernels): nothing to review")
    shown = "; ".join(f"{k}({', '.join(v)})" for k, v in sorted(found.items()))
    raise GenerationError(f"unknown kernel signatures, no launch API matches (use --api NAME, one of "
                          f"{sorted(apis)}): {shown}")
