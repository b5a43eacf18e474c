"""The target's stand-ins on the judge's side: its module, its kernels and its objects, each a request to its host.

:class:`RemoteModule` is the target as the harnesses see it (what
:func:`.isolation.load_isolated` returns), its Triton kernels
:class:`RemoteKernel` objects (``kernel[grid](*args, **kwargs)`` is a launch
in the host, :meth:`.isolation.TargetHost.launch`), and :class:`RemoteObject`
an object of the target in its process (a handle into the host's table):
reading, setting or calling it is a :meth:`.isolation.TargetHost.request`.
None of them holds or runs the target's code here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .isolation import ImportRef, TargetHost


class RemoteKernel:
    """A kernel of the target, as :func:`~replayssm.spec.generations.kernel_params`
    and the harnesses see one: ``arg_names`` (None for a launchable object
    that is no Triton function), and ``kernel[grid](...)``."""

    def __init__(self, host: TargetHost, name: str, arg_names: list[str] | None) -> None:
        self.host, self.__name__ = host, name
        self.arg_names = list(arg_names) if arg_names is not None else None

    def __getitem__(self, grid: Any) -> Any:
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        return lambda *args, **kwargs: self.host.launch(self.__name__, grid, args, kwargs)


class RemoteModule:
    """The target as the harnesses see it: its kernels as :class:`RemoteKernel`
    attributes; its other top-level names are known (``hasattr``) but cannot
    be used here."""

    def __init__(self, host: TargetHost) -> None:
        self._host = host
        self.__name__ = f"isolated:{host.name}"
        self._kernels = {k: RemoteKernel(host, k, p) for k, p in host.description["kernels"].items()}

    def __getattr__(self, name: str) -> Any:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        host = self.__dict__.get("_host")
        if host is not None and name in host.description.get("names", ()):
            return host.request({"op": "get", "h": 0, "name": name}, name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") and name in ("_host", "_kernels") or name == "__name__":
            object.__setattr__(self, name, value)
        else:  # the target's own attribute, set there (e.g. its materialize loader)
            self._host.request({"op": "set", "h": 0, "name": name, "value": value}, name)

    def __dir__(self) -> list[str]:
        return sorted({*self._kernels, *self._host.description.get("names", ())})

    def launch(self, kernel: str, grid: tuple, args: tuple, kwargs: dict, also: Sequence[Any] = (),
               watch: ImportRef | None = None) -> Any:
        """:meth:`TargetHost.launch` of one of its kernels."""
        return self._host.launch(kernel, grid, args, kwargs, also, watch)

    def forget(self) -> None:
        """:meth:`TargetHost.forget`."""
        self._host.forget()

    def close(self) -> None:
        self._host.close()

    def shutdown(self, seconds: float | None = None) -> int | None:
        """:meth:`TargetHost.shutdown` (within ``seconds``; None: its default): its process ends in
        order; its exit status."""
        return self._host.shutdown() if seconds is None else self._host.shutdown(seconds)


class RemoteObject:
    """An object of the target in its process (a class, a context, a bound
    method): reading an attribute, setting one and calling it are requests
    (:meth:`TargetHost.request`); ``label`` names it in a finding
    (``ReplaySSMModelContext.postprocess``)."""

    def __init__(self, host: TargetHost, handle: int, label: str) -> None:
        object.__setattr__(self, "_remote", (host, handle, label, host.generation))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        host, handle, label, generation = self._remote
        return host.request({"op": "get", "h": handle, "name": name}, f"{label}.{name}", generation)

    def __setattr__(self, name: str, value: Any) -> None:
        host, handle, label, generation = self._remote
        host.request({"op": "set", "h": handle, "name": name, "value": value}, f"{label}.{name}", generation)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        host, handle, label, generation = self._remote
        return host.request({"op": "call", "h": handle, "args": list(args), "kwargs": kwargs}, label, generation)

    def __repr__(self) -> str:
        return f"<the target's {self._remote[2]}>"
