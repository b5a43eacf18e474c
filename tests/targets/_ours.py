"""Our kernels' module, its names copied into the planted target that imports this file."""

import replayssm.impl.replayssm_utils as _reference


def export(namespace: dict) -> None:
    """Copy every top-level name of our target into ``namespace`` (a planted target's globals)."""
    namespace.update({k: v for k, v in vars(_reference).items() if not k.startswith("__")})
