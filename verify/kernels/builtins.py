"""``triton.language`` builtins, pointer arithmetic, loads and stores.

Loads and stores go through the spec's ``SymbolicMemory`` (one memory model
for spec and kernels), each lane with the program's guard and its mask. A
masked-off lane of a load yields ``other``, or an unconstrained value when the
load gives none (Triton leaves it undefined). A store converts its value to
the buffer's element type; a narrowing conversion is noted for the overflow
obligation.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import triton.language as tl
import z3

from ..terms import Sym, Symbolic, fresh_int, lift, mk_add, mk_and, mk_ite
from .arith import cast, extremum, lanewise, scalar_extremum, where
from .contracts import ABSENT, ArgumentRole, BufferArg, PointerTable, ScalarArg, StrideArg, StrideTable
from .source import is_jit
from .values import (Address, Block, KernelValue, Lane, Operand, Pointer, Scalar, as_bool_term, as_int_term, as_scalar,
                     concrete, offset_parts)

if TYPE_CHECKING:
    from .contracts import LaneSample
    from .evaluator import Activation, KernelRun

DTYPES = {tl.int1: "i1", tl.int32: "i32", tl.int64: "i64"}

BUILTIN_JIT = (tl.cumsum, tl.sum, tl.max, tl.min, tl.zeros_like, tl.sort)
"""``tl`` functions written as jit functions in Triton's own library that are
interpreted here by their semantics rather than inlined (their bodies use
``tl.reduce``/``tl.full``, outside the subset)."""


class PointerType:
    """``tl.pointer_type(elem)`` as a cast target."""

    def __init__(self, elem: str) -> None:
        self.elem = elem


Dtype: TypeAlias = "str | PointerType"
"""A cast's target: an integer element type (``i1``, ``i32``, ``i64``) or a pointer type."""


def argument_value(run: KernelRun, role: ArgumentRole) -> KernelValue:
    """The value a kernel parameter holds in this launch."""
    if role is ABSENT:
        return None
    if isinstance(role, (bool, int)):
        return role
    if isinstance(role, BufferArg):
        shape = run.mem.shapes[role.buffer]
        start = role.start if role.start is not None else tuple(0 for _ in shape)
        return Pointer(role.buffer, tuple(lift(i) for i in start), role.fixed, role.dtype)
    if isinstance(role, StrideArg):
        return Scalar(lift(role.value), "i64", lin=(((role.buffer, role.dim), lift(1)),), unit=lift(0))
    if isinstance(role, (PointerTable, StrideTable)):
        return Pointer(role.name, (lift(0),), 0, "i64")
    if isinstance(role, ScalarArg):
        return Scalar(lift(role.value), role.dtype)
    raise TypeError(f"unknown argument role {role!r}")


def _roles(run: KernelRun) -> dict[str, PointerTable | StrideTable]:
    return {r.name: r for r in run.launch.args if isinstance(r, (PointerTable, StrideTable))}


def pointer_add(run: KernelRun, ptr: Operand, offset: Operand) -> Pointer | Block:
    """``ptr + offset``: the offset's stride parts move their dimensions, the rest the innermost."""
    def one(p: Lane | int, lane: Lane | int) -> Pointer:
        if not isinstance(p, Pointer) or isinstance(lane, Pointer):
            raise TypeError("pointer + pointer, or an offset added to a non-pointer block lane")
        scaled, unit = offset_parts(as_scalar(lane))
        index = list(p.index)
        for (buffer, dim), count in scaled.items():
            if buffer != p.buffer or dim < p.fixed or dim >= len(index):
                raise TypeError(f"an offset scaled by {buffer}'s stride along dimension {dim} added to a pointer "
                                f"into {p.buffer}")
            index[dim] = plus(index[dim], count)
        index[-1] = plus(index[-1], unit)
        if len(index) - 1 < p.fixed:
            raise TypeError(f"an offset added to {p.buffer} past its fixed dimensions")
        return Pointer(p.buffer, tuple(index), p.fixed, p.elem)

    return lanewise(one, ptr, offset)


def plus(a: Symbolic, b: Symbolic) -> z3.ArithRef:
    """``a + b`` without a ``0 +`` (pointer bases start at entry 0)."""
    a, b = lift(a), lift(b)
    if z3.is_int_value(a) and a.as_long() == 0:
        return b
    if z3.is_int_value(b) and b.as_long() == 0:
        return a
    return mk_add(a, b)


def both(*terms: Symbolic) -> z3.BoolRef:
    """The conjunction of the terms that are not literally true."""
    rest = [lift(t) for t in terms if not z3.is_true(lift(t))]
    return rest[0] if len(rest) == 1 else mk_and(rest)


def _syms(index: tuple) -> tuple[Sym, ...]:
    return tuple(Sym(lift(i)) for i in index)


def _mask_term(mask: Lane | int | None) -> z3.BoolRef:
    if mask is None:
        return lift(True)
    if isinstance(mask, (bool, int)):
        return lift(bool(mask))
    return as_bool_term(as_scalar(mask))


def _log(run: KernelRun, count_before: int) -> None:
    for i in range(count_before, len(run.mem.accesses)):
        run.where[i] = (run.file, run.line)


def load(run: KernelRun, frame: Activation, ptr: KernelValue, mask: KernelValue = None,
         other: KernelValue = None) -> Scalar | Block:
    """``tl.load``: one guarded read per lane."""
    if ptr is None:
        raise TypeError("tl.load through a None argument")

    lanes: list[int] = []

    def one(p: Lane | int, m: Lane | int | None, o: Lane | int | None) -> Scalar:
        if not isinstance(p, Pointer):
            raise TypeError(f"tl.load of a {type(p).__name__}, not a pointer")
        if run.launch.lanes is not None and p.buffer in block_written(run):
            raise TypeError(f"a load of {p.buffer} after a store to it through sampled lanes (a lane may read "
                            "what a lane not sampled wrote)")
        g = both(run.guard(frame), _mask_term(m))
        before = len(run.mem.accesses)
        lanes.append(before)
        raw = run.mem.load(p.buffer, _syms(p.index), Sym(g), 0)
        _log(run, before)
        role = _roles(run).get(p.buffer)
        if isinstance(role, PointerTable):
            entry = p.index[0]
            return Scalar(lift(raw), "i64", address=Address(role.buffer, role.start(Sym(lift(entry))), role.fixed))
        if isinstance(role, StrideTable):
            value = lift(role.value(Sym(lift(p.index[0]))))
            return Scalar(value, "i64", lin=(((role.buffer, role.dim), lift(1)),), unit=lift(0))
        value = lift(run.mem.accesses[before].value)
        fallback = as_scalar(o) if o is not None else undefined(p.elem)
        if p.elem == "i1":
            value = z3.Not(value == 0)
            return Scalar(value if z3.is_true(g) else mk_ite(g, value, as_bool_term(fallback)), "i1")
        return Scalar(value if z3.is_true(g) else mk_ite(g, value, as_int_term(fallback)), p.elem)

    value = lanewise(one, ptr, mask, other)
    if isinstance(ptr, Block):
        run.block_loads.append(lanes)
    return value


def block_written(run: KernelRun) -> set[str]:
    """The buffers a store through a block of pointers wrote so far."""
    return {run.mem.accesses[i].buffer for lanes in run.block_stores for i in lanes}


def undefined(dtype: str) -> Scalar:
    """What a masked-off lane of a load without ``other`` holds: anything."""
    z = fresh_int("undefined").z
    return Scalar(z != 0 if dtype == "i1" else z, dtype)


def store(run: KernelRun, frame: Activation, ptr: KernelValue, value: KernelValue, mask: KernelValue = None) -> None:
    """``tl.store``: one guarded write per lane, in lane order."""
    if ptr is None:
        raise TypeError("tl.store through a None argument")
    if not isinstance(ptr, Block) and any(isinstance(x, Block) for x in (value, mask)):
        raise TypeError("tl.store of a block value or mask through a scalar pointer (Triton rejects it)")
    lanes: list[int] = []

    def one(p: Lane | int, lane: Lane | int | None, m: Lane | int | None) -> None:
        if not isinstance(p, Pointer):
            raise TypeError(f"tl.store to a {type(p).__name__}, not a pointer")
        v = as_scalar(lane)
        if p.elem == "i1":
            z = mk_ite(as_bool_term(v), lift(1), lift(0))
        else:
            z = as_int_term(v)
            if v.dtype == "i64" and p.elem == "i32":
                run.note(z, "i32")
        g = both(run.guard(frame), _mask_term(m))
        before = len(run.mem.accesses)
        run.mem.store(p.buffer, _syms(p.index), Sym(z), Sym(g))
        _log(run, before)
        lanes.append(before)

    lanewise(one, ptr, value, mask)
    if isinstance(ptr, Block):
        run.block_stores.append(lanes)


def arange(start: KernelValue, end: KernelValue, sample: LaneSample | None = None) -> Block:
    """``tl.arange``: every lane, or with ``sample`` (a ``contracts.LaneSample``
    of the block's width, starting at 0) the sampled lanes only."""
    lo, hi = concrete(start), concrete(end)
    if lo is None or hi is None:
        raise TypeError("tl.arange with non-constexpr bounds")
    if sample is not None and lo == 0 and hi == sample.width:
        return Block(tuple(Scalar(lift(p), "i32") for p in sample.positions), sample.width)
    return Block(tuple(Scalar(lift(i), "i32") for i in range(lo, hi)))


SAMPLED_REDUCTIONS = 1
"""Reductions a program over sampled lanes may make: each is exact only when
the lane that attains it is among the sampled ones, which one sample can
promise for one reduction (the witness: a lane beside those the claims are
about, ``verify.kernels.blocked.claimed``)."""


def sampled_extremum(run: KernelRun, kind: str, x: Block, *args: KernelValue, **kwargs: KernelValue) -> Scalar:
    """``tl.max``/``tl.min`` over sampled lanes: the extremum of the sampled
    lanes, which is the block's when the sample is every lane (in some
    order) or the lane attaining it is sampled. A sample of a wider block is
    the lanes a claim is about (one, or a pair) and a witness (any other
    lane), so for every lane or pair some sample holds it and the attaining
    lane; the proofs, symmetric in the lanes, then speak of the real launch."""
    if len(x.lanes) < (x.width or len(x.lanes)):
        if run.mem._loops:
            raise TypeError(f"tl.{kind} over sampled lanes inside a loop's symbolic iteration (one witness lane "
                            "cannot attain every iteration's reduction)")
        run.reductions += 1
        if len(x.lanes) < 2 or run.reductions > SAMPLED_REDUCTIONS:
            raise TypeError(f"tl.{kind} over sampled lanes needs a witness lane: at most {SAMPLED_REDUCTIONS} "
                            f"reduction per program, with at least 2 sampled lanes (got {len(x.lanes)})")
    return reduce_extremum(kind, Block(x.lanes), *args, **kwargs)


def _scan(run: KernelRun, x: KernelValue, axis: KernelValue, total: bool) -> Scalar | Block:
    if not isinstance(x, Block) or axis not in (0, None):
        raise TypeError("tl.cumsum/tl.sum over something other than axis 0 of a 1-D block")
    if x.width is not None:
        raise TypeError("tl.cumsum/tl.sum over sampled lanes (a lane's scan needs every lane before it)")
    acc, out, dtype = lift(0), [], "i32"
    for lane in x.lanes:
        s = as_scalar(lane)
        dtype = "i64" if s.dtype == "i64" else "i32"
        acc = mk_add(acc, as_int_term(s))
        run.note(acc, dtype)
        out.append(Scalar(acc, dtype))
    return out[-1] if total else Block(tuple(out))


def reduce_extremum(kind: str, x: KernelValue, axis: KernelValue = None, return_indices: KernelValue = False,
                    keep_dims: KernelValue = False) -> Scalar:
    """``tl.max`` / ``tl.min`` of a 1-D block along axis 0: the largest
    (smallest) lane, of the lanes' element type. A scalar reduces to itself."""
    if axis not in (0, None) or return_indices or keep_dims:
        raise TypeError(f"tl.{kind} other than over axis 0 of a 1-D block (without indices or kept dimensions)")
    if not isinstance(x, Block):
        return as_scalar(x)
    lanes = [as_scalar(v) for v in x.lanes]
    if not lanes or any(v.dtype == "i1" for v in lanes):
        raise TypeError(f"tl.{kind} of an empty or boolean block")
    best = lanes[0]
    for v in lanes[1:]:
        best = scalar_extremum(kind, best, v)
    return best


def sort(x: KernelValue, dim: KernelValue = None, descending: KernelValue = False) -> Block:
    """``tl.sort`` of a 1-D block along its only dimension: the lanes in
    ascending (``descending``: descending) order, by an odd-even
    transposition network of ``len`` rounds (each a compare-exchange of
    neighbours, :func:`scalar_extremum`), which sorts any input."""
    if not isinstance(x, Block) or dim not in (0, -1, None):
        raise TypeError("tl.sort other than along the only dimension of a 1-D block")
    if x.width is not None:
        raise TypeError("tl.sort of sampled lanes (a lane's place needs every lane)")
    lanes = [as_scalar(v) for v in x.lanes]
    if any(v.dtype == "i1" for v in lanes):
        raise TypeError("tl.sort of a boolean block")
    low, high = ("max", "min") if concrete(descending) else ("min", "max")
    for r in range(len(lanes)):
        for i in range(r % 2, len(lanes) - 1, 2):
            a, b = lanes[i], lanes[i + 1]
            lanes[i], lanes[i + 1] = scalar_extremum(low, a, b), scalar_extremum(high, a, b)
    return Block(tuple(lanes))


def zeros_like(x: Operand) -> Scalar | Block:
    """``tl.zeros_like``: zero in every lane, of each lane's element type."""
    return lanewise(lambda v: Scalar(lift(0), as_scalar(v).dtype) if as_scalar(v).dtype != "i1"
                    else Scalar(lift(False), "i1"), x)


def loop_bounds(run: KernelRun, it: ast.expr, frame: Activation) -> tuple[Operand, Operand, int]:
    """``(lo, hi, step)`` of ``range``, ``tl.range`` or ``tl.static_range``."""
    if not isinstance(it, ast.Call):
        raise run.unsupported(f"for over {ast.unparse(it)}", it)
    fn = run._expr(it.func, frame)
    if fn not in (range, tl.range, tl.static_range):
        raise run.unsupported(f"for over {ast.unparse(it.func)}", it)
    args = [run._expr(a, frame) for a in it.args]
    step = 1
    if len(args) == 1:
        lo, hi = 0, args[0]
    elif len(args) in (2, 3):
        lo, hi = args[0], args[1]
        if len(args) == 3:
            given = concrete(args[2])
            if given is None or given < 1:
                raise run.unsupported("a loop step that is not a positive constexpr", it)
            step = given
    else:
        raise run.unsupported(f"{ast.unparse(it.func)} with {len(args)} arguments", it)
    return lo, hi, step


def _dtype(x: object) -> Dtype:
    return x if isinstance(x, PointerType) else _element(x)


def _element(x: object) -> str:
    if x in DTYPES:
        return DTYPES[x]
    raise TypeError(f"cast to {x!r} (supported: int1, int32, int64, pointer_type(int32/int64))")


def to(run: KernelRun, value: Operand, dtype: object) -> Operand:
    """``value.to(dtype)`` / ``tl.cast(value, dtype)``."""
    target = _dtype(dtype)
    if isinstance(target, PointerType):
        def one(v: Lane | int) -> Pointer:
            if not isinstance(v, Scalar) or v.address is None:
                raise TypeError("an integer cast to a pointer that is not an entry of a pointer table")
            a = v.address
            return Pointer(a.buffer, tuple(lift(i) for i in a.index), a.fixed, target.elem)

        return lanewise(one, value)
    return cast(value, target, run.note)


def call(run: KernelRun, e: ast.Call, frame: Activation) -> object:
    """Evaluate a call: a builtin, a method of a value, or an inlined jit function."""
    fn = run._expr(e.func, frame)
    args = [run._expr(a, frame) for a in e.args]
    if any(isinstance(a, ast.Starred) for a in e.args):
        raise run.unsupported("starred arguments", e)
    kwargs = {k.arg: run._expr(k.value, frame) for k in e.keywords}
    try:
        return _dispatch(run, frame, e, fn, args, kwargs)
    except TypeError as err:
        raise run.unsupported(str(err), e) from err


def _dispatch(run: KernelRun, frame: Activation, e: ast.Call, fn: object, args: list, kwargs: dict) -> object:
    if isinstance(fn, tuple) and len(fn) == 3 and fn[0] == "method":
        _, value, name = fn
        if name == "to":
            return to(run, value, args[0] if args else kwargs["dtype"])
        raise TypeError(f"method .{name}() of a tensor")
    if is_jit(fn) and fn not in BUILTIN_JIT:
        return run.inline(fn, args, kwargs, e)
    if fn is tl.program_id:
        axis = concrete(args[0] if args else kwargs["axis"])
        if axis is None:
            raise TypeError("tl.program_id of an axis that is not a constexpr")
        return Scalar(lift(run.launch.program_ids[axis]), "i32")
    if fn is tl.load:
        return load(run, frame, *args, **kwargs)
    if fn is tl.store:
        store(run, frame, *args, **kwargs)
        return None
    if fn is tl.where:
        return where(*args)
    if fn is tl.maximum:
        return extremum("max", *args)
    if fn is tl.minimum:
        return extremum("min", *args)
    if fn is tl.arange:
        return arange(*args, **{**kwargs, "sample": run.launch.lanes})
    if fn is tl.cumsum:
        return _scan(run, args[0], args[1] if len(args) > 1 else kwargs.get("axis", 0), total=False)
    if fn is tl.sum:
        return _scan(run, args[0], args[1] if len(args) > 1 else kwargs.get("axis", 0), total=True)
    if fn in (tl.max, tl.min):
        kind = "max" if fn is tl.max else "min"
        if args and isinstance(args[0], Block) and args[0].width is not None:
            return sampled_extremum(run, kind, *args, **kwargs)
        return reduce_extremum(kind, *args, **kwargs)
    if fn is tl.zeros_like:
        return zeros_like(*args)
    if fn is tl.sort:
        return sort(*args, **kwargs)
    if fn is tl.cast:
        return to(run, args[0], args[1] if len(args) > 1 else kwargs["dtype"])
    if fn is tl.pointer_type:
        return PointerType(_element(args[0]))
    if fn is tl.static_assert:
        return None
    name = getattr(fn, "__name__", repr(fn))
    raise TypeError(f"call of {name}")
