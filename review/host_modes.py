"""Which cache modes a version's host publishes prefixes in: the host's map from vLLM's Mamba cache
mode to the kernels' ``MATERIALIZE_PREFIXES``.

The kernels never see the mode (``spec.geometry.CACHE_MODES``), only the flag, and the hosts
compute it differently: A1-era hosts publish in ``align`` and ``all`` (``cache_mode in ("align",
"all")``), A3's and the reference's in ``align`` only (``== "align"``), so all mode reaches the
kernels with either flag. :func:`publishing_modes` reads the map from the host code's own source:
the comparison assigned to ``materialize_prefixes``, evaluated for each mode.
"""

from __future__ import annotations

import ast
import operator
import re

from replayssm.spec.geometry import CACHE_MODES

_ASSIGNMENT = re.compile(r"\bmaterialize_prefixes\s*=\s*(?!=)(.+?),?\s*$")
_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b}


def _modes_of(expr: str) -> tuple[str, ...] | None:
    """The cache modes for which ``expr`` (``<the mode> OP <constant>``) is true; None: another expression."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _OPS):
        return None
    try:
        constant = ast.literal_eval(tree.comparators[0])
    except ValueError:
        return None
    op = _OPS[type(tree.ops[0])]
    return tuple(m for m in CACHE_MODES if op(m, constant))


def publishing_modes(source: str) -> tuple[str, ...] | None:
    """The cache modes whose ``materialize_prefixes`` the host code in ``source``
    (a version's file, or the reference's documentation page) sets true, in
    :data:`CACHE_MODES` order; None where the source computes it nowhere (D3
    has no such field) or two computations disagree."""
    found = {m for line in source.splitlines() if (hit := _ASSIGNMENT.search(line))
             if (m := _modes_of(hit.group(1))) is not None}
    return found.pop() if len(found) == 1 else None


def version_publishing_modes(source: str) -> tuple[str, ...] | None:
    """:func:`publishing_modes` of a version under review: a ``.py`` file or
    ``.txt`` documentation page as it is, a module by its source file (None:
    no source to read)."""
    from pathlib import Path

    from replayssm.verify.kernels.source_module import module_file

    try:
        path = Path(source) if source.endswith((".py", ".txt")) else module_file(source)
        return publishing_modes(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def describe(modes: tuple[str, ...] | None) -> str:
    """What the review says of a version's map: the modes it publishes in, and all mode's shape there."""
    if modes is None:
        return "cache modes: not read from its host code"
    shape = "published, as align" if "all" in modes else "unpublished (MATERIALIZE_PREFIXES off, live columns given)"
    return f"publishes prefixes in {' and '.join(modes) or 'no mode'}; all mode {shape}"
