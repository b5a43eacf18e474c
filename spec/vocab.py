"""The arithmetic vocabulary every spec transition is written in.

A transition uses Python's ``+ - *`` and comparisons, plus the functions here.
Each function picks its interpreter from its arguments:

* Python ints and bools: the oracle;
* numpy arrays: the oracle vectorized over the programs of one launch;
* any object with a ``__vocab__`` attribute (the Z3 terms of
  ``replayssm.verify.terms``): that object's vocabulary.

Division and remainder follow the kernels' C semantics (truncation toward
zero; the remainder takes the dividend's sign), never Python's floor rules.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

Value: TypeAlias = Any
"""An integer of the vocabulary: a Python int (the oracle), a numpy integer
array with one element per program (the oracle over a launch), or a Z3 term
(``replayssm.verify.terms.Sym``). The three share no Python type and the spec
cannot name the last (it sits in a layer above), so to the type checker this
is ``Any``; to a reader it says that a parameter is interpreted, not a plain
int (constexprs, shapes and indices into Python lists are ``int``)."""

Cond: TypeAlias = Any
"""A truth value of the vocabulary: a Python bool, a numpy bool array, or a
Z3 boolean term (``Any`` to the type checker, as :data:`Value`)."""


class Interpreter(Protocol):
    """An interpreter of the vocabulary: what :func:`vocab_of` returns (Z3's may add ``pointer_add``)."""

    def ite(self, c: Cond, a: Value, b: Value) -> Value: ...

    def cdiv(self, a: Value, b: Value) -> Value: ...

    def conj(self, *xs: Cond) -> Cond: ...

    def disj(self, *xs: Cond) -> Cond: ...

    def negate(self, x: Cond) -> Cond: ...

    def within(self, x: Value, lo: int, hi: int) -> Cond: ...


class _PythonVocab:
    """Python ints and bools: eager, exact."""

    @staticmethod
    def ite(c: object, a: int, b: int) -> int:
        return a if c else b

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    @staticmethod
    def conj(*xs: object) -> bool:
        return all(xs)

    @staticmethod
    def disj(*xs: object) -> bool:
        return any(xs)

    @staticmethod
    def negate(x: object) -> bool:
        return not x

    @staticmethod
    def within(x: int, lo: int, hi: int) -> bool:
        return lo <= x <= hi


class _NumpyVocab:
    """numpy arrays: element-wise, one element per program."""

    @staticmethod
    def ite(c: npt.ArrayLike, a: npt.ArrayLike, b: npt.ArrayLike) -> np.ndarray:
        return np.where(c, a, b)

    @staticmethod
    def cdiv(a: npt.ArrayLike, b: npt.ArrayLike) -> np.ndarray:
        x = np.asarray(a, dtype=np.int64)
        y = np.asarray(b, dtype=np.int64)
        q = np.abs(x) // np.abs(y)
        return np.where((x >= 0) == (y > 0), q, -q)

    @staticmethod
    def conj(*xs: npt.ArrayLike) -> np.ndarray:
        out = np.asarray(xs[0], dtype=bool)
        for x in xs[1:]:
            out = out & np.asarray(x, dtype=bool)
        return out

    @staticmethod
    def disj(*xs: npt.ArrayLike) -> np.ndarray:
        out = np.asarray(xs[0], dtype=bool)
        for x in xs[1:]:
            out = out | np.asarray(x, dtype=bool)
        return out

    @staticmethod
    def negate(x: npt.ArrayLike) -> np.ndarray:
        return ~np.asarray(x, dtype=bool)

    @staticmethod
    def within(x: npt.ArrayLike, lo: int, hi: int) -> np.ndarray:
        lanes = np.asarray(x)
        return (lanes >= lo) & (lanes <= hi)


PLAIN_TYPES = frozenset((int, bool))
"""The Python types the oracle interprets: on them each operation below
answers directly (the concrete simulation's fast path), as ``_PythonVocab`` would."""


def vocab_of(*xs: Value) -> Interpreter:
    """The interpreter that evaluates an operation on these arguments."""
    if PLAIN_TYPES.issuperset(map(type, xs)):
        return _PythonVocab
    for x in xs:
        v = getattr(x, "__vocab__", None)
        if v is not None:
            return v
    if any(isinstance(x, (np.ndarray, np.generic)) for x in xs):
        return _NumpyVocab
    return _PythonVocab


def ite(c: Cond, a: Value, b: Value) -> Value:
    """``a`` where ``c`` holds, else ``b`` (Triton's ``tl.where``)."""
    if PLAIN_TYPES.issuperset((type(c), type(a), type(b))):
        return a if c else b
    return vocab_of(c, a, b).ite(c, a, b)


def cdiv(a: Value, b: Value) -> Value:
    """C division: the quotient truncated toward zero."""
    return vocab_of(a, b).cdiv(a, b)


def cmod(a: Value, b: Value) -> Value:
    """C remainder: ``a - b * cdiv(a, b)``, with the sign of ``a``."""
    return a - b * cdiv(a, b)


def imax(a: Value, b: Value) -> Value:
    """The larger of two integers."""
    return ite(a >= b, a, b)


def imin(a: Value, b: Value) -> Value:
    """The smaller of two integers."""
    return ite(a <= b, a, b)


def within(x: Value, lo: int, hi: int) -> Cond:
    """``lo <= x <= hi``, for constant bounds."""
    for name, bound in (("lo", lo), ("hi", hi)):
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise ValueError(f"within: {name} must be an int constant, got {bound!r}")
    return vocab_of(x).within(x, lo, hi)


def conj(*xs: Cond) -> Cond:
    """Logical and."""
    if PLAIN_TYPES.issuperset(map(type, xs)):
        return all(xs)
    return vocab_of(*xs).conj(*xs)


def disj(*xs: Cond) -> Cond:
    """Logical or."""
    if PLAIN_TYPES.issuperset(map(type, xs)):
        return any(xs)
    return vocab_of(*xs).disj(*xs)


def negate(x: Cond) -> Cond:
    """Logical not."""
    if type(x) in PLAIN_TYPES:
        return not x
    return vocab_of(x).negate(x)


def pointer_add(base: Value, offset: Value) -> Value:
    """A 64-bit pointer plus an element offset: address arithmetic, not an
    int32 intermediate."""
    v = vocab_of(base, offset)
    return v.pointer_add(base, offset) if hasattr(v, "pointer_add") else base + offset


def implies(a: Cond, b: Cond) -> Cond:
    """Logical implication."""
    if type(a) in PLAIN_TYPES and type(b) in PLAIN_TYPES:
        return not a or bool(b)
    return disj(negate(a), b)
