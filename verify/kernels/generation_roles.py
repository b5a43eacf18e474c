"""A generation's kernel roles as the kernel obligations read them, from its adapter's records.

Each launch-API generation's adapter (``spec/generations/``) declares its
roles as typed records: a role bound by parameter name under its launch
contract becomes a :class:`.roles.KernelRole` through :func:`.named.named_role`,
a role shared with the reference API is that API's record
(:data:`.registry.REFERENCE`). ``prove --kernels --impl``, ``replay`` of a
kernel trace, ``review``'s kernel proofs and the kernel diff all take a
version's roles from here.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

from replayssm.spec.generations import GenerationError, detect, registry
from replayssm.spec.generations.api import Api
from replayssm.spec.generations.contract import publishing_modes
from replayssm.spec.generations.roles import GenerationRole

from .named import named_role
from .registry import REFERENCE, ROLES
from .roles import KernelRole, by_name


@cache
def _roles(name: str, publishing: tuple[str, ...] | None, dropped: frozenset[str]) -> tuple[KernelRole, ...]:
    api = registry()[name]
    return tuple(named_role(r, api.name, api.contract, publishing, dropped) if isinstance(r, GenerationRole)
                 else by_name(REFERENCE)[r.name] for r in api.roles)


def roles_of(api: Api, publishing: tuple[str, ...] | None = None,
             dropped: frozenset[str] = frozenset()) -> tuple[KernelRole, ...]:
    """The kernel roles of generation ``api``, one record each, under its launch contract
    (``spec/generations/contract.py``) for a version whose host publishes prefixes in the cache
    modes ``publishing`` (None: not known, every launch), without the row clauses ``dropped``
    (built once per generation, modes and dropped clauses)."""
    return _roles(api.name, publishing, dropped)


def target_roles(impl: str) -> tuple[ModuleType, tuple[KernelRole, ...]]:
    """``impl``'s kernels (read from its source, never run), and the kernel
    roles of its launch API (the reference API's and our row-blocked one when
    no generation matches), under its launch contract for the cache modes its host publishes in."""
    from .source_module import kernel_module, module_file

    module = kernel_module(impl, "--impl")  # its kernels read from its source: the file is not run
    try:
        api = detect(module)
    except GenerationError:
        return module, ROLES
    publishing = None
    if api.contract.modes:  # only a contract of cache modes reads the host's map
        try:
            publishing = publishing_modes(module_file(impl, "--impl").read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            publishing = None
    return module, roles_of(api, publishing)


def every_role() -> tuple[KernelRole, ...]:
    """The roles of every launch API and ours (a kernel-proof trace names one)."""
    out = {r.name: r for r in ROLES}
    for api in registry().values():
        out.update({r.name: r for r in roles_of(api)})
    return tuple(out.values())
