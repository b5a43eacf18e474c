"""Which cache modes a version's host publishes prefixes in: the host's map from vLLM's Mamba cache
mode to the kernels' ``MATERIALIZE_PREFIXES``.

The kernels never see the mode (``spec.geometry.CACHE_MODES``), only the flag, and the hosts
compute it differently: A1-era hosts publish in ``align`` and ``all`` (``cache_mode in ("align",
"all")``), A3's and the reference's in ``align`` only (``== "align"``), so all mode reaches the
kernels with either flag. :func:`~replayssm.spec.generations.contract.publishing_modes` reads the
map from the host code's own source: the comparison assigned to ``materialize_prefixes``, evaluated
for each mode; the generation's launch contract says which flags each mode then launches.
"""

from __future__ import annotations

from collections.abc import Callable

from typing import Any

from replayssm.spec.generations.api import Api, kernel_params
from replayssm.spec.generations.contract import EXECUTED_WIDTH_PARAM, publishing_modes
from replayssm.spec.geometry import Conventions


def version_publishing_modes(source: str) -> tuple[str, ...] | None:
    """:func:`publishing_modes` of a version under review: a ``.py`` file or
    ``.txt`` documentation page as it is, a module by its source file (None:
    no source to read)."""
    from pathlib import Path

    from replayssm.base.module_files import module_source

    path = Path(source) if source.endswith((".py", ".txt")) else module_source(source)
    if path is None:
        return None
    try:
        return publishing_modes(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def launched_by(api: Api, source: str) -> Callable[[Conventions], bool]:
    """Whether the host of the version ``source`` (of generation ``api``) launches a constexpr
    combination: its generation's launch contract for the modes the host publishes prefixes in."""
    publishing = version_publishing_modes(source)
    return lambda conv: api.contract.launches(conv, publishing)


def launches_executed_width(api: Api, module: Any) -> bool:
    """Whether the host of a version (its loaded ``module``, of generation ``api``) may run FlashInfer's
    decode at a fixed width wider than a row and tell its postprocess: its generation's contract says
    the host passes the width, and the version's postprocess kernel takes it."""
    if api.contract.executed_width is None:
        return False
    return any(EXECUTED_WIDTH_PARAM in (kernel_params(module, launch.kernel) or [])
               for launch in api.phases["postprocess"].launches)


def describe(modes: tuple[str, ...] | None) -> str:
    """What the review says of a version's map: the modes it publishes in, and all mode's shape there."""
    if modes is None:
        return "cache modes: not read from its host code"
    shape = "published, as align" if "all" in modes else "unpublished (MATERIALIZE_PREFIXES off, live columns given)"
    return f"publishes prefixes in {' and '.join(modes) or 'no mode'}; all mode {shape}"
