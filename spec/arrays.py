"""Flat row-major arrays of vocabulary values, indexed by ints or Z3 terms.

The system model keeps every variable as a flat list (``spec.system.State``)
and the table memory (``spec.table_memory.TableMemory``) keeps every kernel
buffer so. An index is a tuple with one component per dimension; each
component may be a Python int or a symbolic term. A symbolic component
selects among the entries of its own dimension only, so a symbolic slot of a
concrete group never reaches another group's entries, and an index outside
the shape reads ``other`` and writes nothing. On ints every helper is plain
list indexing; on terms it builds ``ite`` chains with constants folded away.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from .vocab import PLAIN_TYPES, Cond, Value, conj, ite


def size(shape: tuple[int, ...]) -> int:
    """The number of entries of an array of ``shape``."""
    n = 1
    for d in shape:
        n *= d
    return n


def _flat(shape: tuple[int, ...], index: tuple) -> Value:
    flat: Value = 0
    for i, n in zip(index, shape):
        flat = flat * n + i
    return flat


def is_concrete(*xs: Value) -> bool:
    """Every one of ``xs`` is a Python int (or bool), no symbolic term."""
    return PLAIN_TYPES.issuperset(map(type, xs)) or all(isinstance(x, int) for x in xs)


def int_offset(shape: tuple[int, ...], index: tuple) -> int | None:
    """The flat offset of an index of Python ints with one component per
    dimension (-1 when a component lies outside its dimension); None for any
    other index, which the general helpers below answer. The concrete
    simulation's fast path: callers read and write the list directly."""
    if len(index) != len(shape) or not PLAIN_TYPES.issuperset(map(type, index)):
        return None
    flat = 0
    for i, n in zip(index, shape):
        if not 0 <= i < n:
            return -1
        flat = flat * n + i
    return flat


def select(values: list, idx: Value, other: Value = 0) -> Value:
    """``values[idx]`` for a concrete or symbolic index (``other`` outside)."""
    if is_concrete(idx):
        return values[idx] if 0 <= idx < len(values) else other
    out = other
    for i in range(len(values) - 1, -1, -1):
        out = fold_ite(idx == i, values[i], out)
    return out


def fold_and(*xs: Cond) -> Cond:
    """``conj`` with Python constants folded away (keeps Z3 terms small)."""
    rest = []
    for x in xs:
        if x is True:
            continue
        if x is False:
            return False
        rest.append(x)
    if not rest:
        return True
    return rest[0] if len(rest) == 1 else conj(*rest)


def fold_ite(c: Cond, a: Value, b: Value) -> Value:
    """``ite`` with a constant condition or equal branches folded away."""
    if c is True:
        return a
    if c is False or a is b:
        return b
    return ite(c, a, b)


def _candidates(shape: tuple[int, ...], index: tuple) -> Iterator[tuple[tuple[int, ...], Cond]]:
    """Every concrete index ``index`` may denote, with the condition that it does."""
    if any(is_concrete(i) and not (0 <= i < n) for i, n in zip(index, shape)):
        return
    ranges = [[i] if is_concrete(i) else list(range(n)) for i, n in zip(index, shape)]
    eqs = [None if is_concrete(i) else {v: i == v for v in range(n)} for i, n in zip(index, shape)]
    for idx in product(*ranges):
        yield idx, fold_and(*[eq[v] for eq, v in zip(eqs, idx) if eq is not None])


def _nested_select(vals: list, shape: tuple[int, ...], index: tuple, eqs: list, offset: int = 0, dim: int = 0,
                   other: Value = 0) -> Value:
    """``vals`` at ``index`` by one ``ite`` chain per symbolic dimension (no
    conjunctions); ``other`` where a component falls outside its dimension."""
    if dim == len(shape):
        return vals[offset]
    stride = 1
    for n in shape[dim + 1:]:
        stride *= n
    i = index[dim]
    if is_concrete(i):
        if not 0 <= i < shape[dim]:
            return other
        return _nested_select(vals, shape, index, eqs, offset + i * stride, dim + 1, other)
    out: Value = other
    for v in range(shape[dim] - 1, -1, -1):
        out = fold_ite(eqs[dim][v], _nested_select(vals, shape, index, eqs, offset + v * stride, dim + 1, other), out)
    return out


def _check_rank(shape: tuple[int, ...], index: tuple) -> None:
    if len(index) != len(shape):
        raise ValueError(f"index {index!r} has {len(index)} components; the array has shape {shape}")


def lookup(vals: list, shape: tuple[int, ...], index: tuple, other: Value = 0) -> Value:
    """The entry of a flat row-major array at ``index``, each symbolic
    component selecting within its own dimension only (``other`` outside
    the shape): a symbolic slot of a concrete group never reaches another
    group's entries."""
    _check_rank(shape, index)
    if is_concrete(*index):
        if not all(0 <= i < n for i, n in zip(index, shape)):
            return other
        return vals[_flat(shape, index)]
    eqs = [None if is_concrete(i) else {v: i == v for v in range(n)} for i, n in zip(index, shape)]
    return _nested_select(vals, shape, index, eqs, other=other)


def update(vals: list, shape: tuple[int, ...], index: tuple, value: Value, guard: Cond = True) -> None:
    """Store ``value`` at ``index`` where ``guard`` holds (nothing outside
    the shape), per dimension as :func:`lookup` reads."""
    _check_rank(shape, index)
    if is_concrete(*index):
        if all(0 <= i < n for i, n in zip(index, shape)):
            f = _flat(shape, index)
            vals[f] = value if guard is True else fold_ite(guard, value, vals[f])
        return
    for idx, cond in _candidates(shape, index):
        f = _flat(shape, idx)
        vals[f] = fold_ite(fold_and(guard, cond), value, vals[f])

