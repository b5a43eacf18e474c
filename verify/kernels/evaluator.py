"""The AST evaluator: one program of a ``@triton.jit`` kernel on symbolic memory.

Statements run under a *guard* (the branch conditions in force and "has not
returned"), which every load, store and noted intermediate carries. An ``if``
on a constexpr runs one branch, as Triton's compiler does; an ``if`` on a
runtime value runs both and merges every variable with ``ite``. A ``for`` over
constant bounds is unrolled; one with a runtime bound runs its body once for
a symbolic iteration of the memory's loop family (``SymbolicMemory.each``),
which covers every trip count and is exact when no iteration depends on
another (checked: a loop-carried variable or a buffer both read and written in
the body is reported unsupported). Calls of other jit functions are inlined.
Anything else is an :class:`Unsupported` construct with its file and line.
"""

from __future__ import annotations

import ast
import builtins as py_builtins
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, TypeVar

import z3

from ..memory import SymbolicMemory
from ..terms import Sym, Symbolic, lift, mk_and, mk_ite, mk_not, mk_or
from .arith import LANE, KernelTypeError, binary, merge_pointers, unary
from .bitwise import BITS, SHIFT
from .contracts import ArgumentRole, ProgramLaunch
from .source import Jit, Source, Unsupported, is_constexpr, source_of
from .values import (RANGES, Block, KernelValue, Operand, Pointer, Scalar, as_bool_term, as_int_term, as_scalar,
                     concrete)

T = TypeVar("T")

BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|",
       ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


@dataclass
class Intermediate:
    """An integer result, its element type, where it is computed and under which guard."""

    term: z3.ArithRef
    dtype: str
    guard: z3.BoolRef
    line: int
    file: str
    lane: int | None = None
    """The block lane it is computed for (None: every lane's)."""
    what: str = "result"
    """``result``: it must fit ``dtype``; ``bitwise.SHIFT``: it must lie in ``0 .. bits - 1``."""

    def bounds(self) -> tuple[int, int]:
        """The values it must keep."""
        if self.what == SHIFT:
            return 0, BITS[self.dtype] - 1
        return RANGES[self.dtype]


@dataclass
class Activation:
    """One (possibly inlined) function activation."""

    source: Source
    vars: dict
    done: z3.BoolRef | None = None
    """The condition under which the function has returned (None: it has not)."""
    result: Any = None
    """What it returned: any value an expression can have (a tuple of them included)."""


class _Return(Exception):
    """An unconditional ``return`` (the rest of the block does not run)."""


@dataclass
class KernelRun:
    """The symbolic execution of one program; after :meth:`run`, ``mem`` holds its
    accesses, ``where`` each access's source line and ``intermediates`` its
    integer results."""

    mem: SymbolicMemory
    launch: ProgramLaunch
    guards: list = field(default_factory=list)
    intermediates: list = field(default_factory=list)
    where: dict = field(default_factory=dict)
    block_stores: list = field(default_factory=list)
    """The access of each lane of every store through a block of pointers, in lane order."""
    block_loads: list = field(default_factory=list)
    """The same for loads."""
    loop_bounds: list = field(default_factory=list)
    """``(trip count, bound, guard, line, file)`` of each unrolled loop."""
    reductions: int = 0
    """Reductions over sampled lanes made so far (``builtins.sampled_extremum``)."""
    line: int = 0
    file: str = ""

    # -- guards --------------------------------------------------------------
    def guard(self, frame: Activation | None = None) -> z3.BoolRef:
        from .builtins import both

        parts = list(self.guards)
        if frame is not None and frame.done is not None:
            parts.append(mk_not(frame.done))
        return both(*parts)

    def note(self, term: z3.ArithRef, dtype: str, what: str = "result") -> None:
        if dtype in ("i32", "i64"):
            self.intermediates.append(Intermediate(term, dtype, self.guard(self._frame), self.line, self.file,
                                                   LANE[-1] if LANE else None, what))

    def unsupported(self, what: str, node: ast.AST | None = None) -> Unsupported:
        return Unsupported(what, self.file, getattr(node, "lineno", self.line))

    # -- entry ---------------------------------------------------------------
    def run(self, jit: Jit) -> None:
        """Execute the kernel ``jit`` for this launch's program."""
        src = source_of(jit)
        params = src.node.args.args
        values: dict[str, ArgumentRole] = {}
        positional = iter(self.launch.args)
        for p in params:
            if is_constexpr(p):
                if p.arg not in self.launch.constexprs:
                    raise Unsupported(f"constexpr {p.arg} without a value in the launch", src.file, p.lineno)
                values[p.arg] = self.launch.constexprs[p.arg]
            else:
                try:
                    values[p.arg] = next(positional)
                except StopIteration:
                    raise Unsupported(f"parameter {p.arg} beyond the launch's arguments", src.file, p.lineno) from None
        self._frame = Activation(src, {k: self._argument(v) for k, v in values.items()})
        self.file = src.file
        self._body(src.node.body, self._frame)

    def _argument(self, role: ArgumentRole) -> KernelValue:
        from .builtins import argument_value

        return argument_value(self, role)

    # -- statements ----------------------------------------------------------
    def _body(self, stmts: list, frame: Activation) -> None:
        try:
            for s in stmts:
                self._stmt(s, frame)
        except _Return:
            pass

    def _stmt(self, s: ast.stmt, frame: Activation) -> None:
        self.line, self.file = getattr(s, "lineno", self.line), frame.source.file
        if isinstance(s, ast.Expr):
            if not isinstance(s.value, ast.Constant):
                self._expr(s.value, frame)
        elif isinstance(s, ast.Assign):
            value = self._expr(s.value, frame)
            for t in s.targets:
                self._assign(t, value, frame)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self._assign(s.target, self._expr(s.value, frame), frame)
        elif isinstance(s, ast.AugAssign):
            op = BIN.get(type(s.op))
            if op is None or not isinstance(s.target, ast.Name):
                raise self.unsupported(f"augmented assignment {ast.unparse(s)}", s)
            self._assign(s.target, self._binop(op, self._expr(s.target, frame), self._expr(s.value, frame), s), frame)
        elif isinstance(s, ast.If):
            self._if(s, frame)
        elif isinstance(s, ast.For):
            self._for(s, frame)
        elif isinstance(s, ast.Return):
            self._return(s, frame)
        elif isinstance(s, ast.Pass):
            pass
        else:
            raise self.unsupported(f"statement {type(s).__name__}", s)

    def _assign(self, target: ast.expr, value: Any, frame: Activation) -> None:
        if isinstance(target, ast.Name):
            frame.vars[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, tuple) and len(value) == len(target.elts):
            for t, v in zip(target.elts, value):
                self._assign(t, v, frame)
        else:
            raise self.unsupported(f"assignment target {ast.unparse(target)}", target)

    def _return(self, s: ast.Return, frame: Activation) -> None:
        value = None if s.value is None else self._expr(s.value, frame)
        here = self.guard(frame)
        if frame.result is None or value is None:
            frame.result = value
        else:
            frame.result = merge(here, value, frame.result, self, s)
        frame.done = here if frame.done is None else mk_or([frame.done, here])
        if z3.is_true(z3.simplify(here)) or not self.guards:
            raise _Return()

    def _if(self, s: ast.If, frame: Activation) -> None:
        cond = self._expr(s.test, frame)
        if isinstance(cond, (bool, int)):
            self._body(s.body if cond else s.orelse, frame)
            return
        if not isinstance(cond, Scalar):
            raise self.unsupported(f"if on {type(cond).__name__}", s)
        c = as_bool_term(cond)
        decided = self._decided(c)
        if decided is not None:
            self._body(s.body if decided else s.orelse, frame)
            return
        before, done0 = dict(frame.vars), frame.done
        branches = []
        for taken, body in ((c, s.body), (mk_not(c), s.orelse)):
            frame.vars, frame.done = dict(before), done0
            self.guards.append(taken)
            try:
                self._body(body, frame)
            finally:
                self.guards.pop()
            branches.append((dict(frame.vars), frame.done))
        (tv, td), (ev, ed) = branches
        merged = {}
        for k in dict.fromkeys([*tv, *ev]):
            if k in tv and k in ev:
                merged[k] = tv[k] if tv[k] is ev[k] else merge(c, tv[k], ev[k], self, s)
        frame.vars = merged
        if td is not done0 or ed is not done0:
            t = td if td is not None else lift(False)
            e = ed if ed is not None else lift(False)
            frame.done = mk_ite(c, t, e)

    def _decided(self, c: z3.BoolRef) -> bool | None:
        """The branch the launch's facts leave for condition ``c``, or None
        when they leave both (no facts: always None)."""
        if not self.launch.facts:
            return None
        from .kmemory import disjoint

        facts = mk_and([lift(f) for f in self.launch.facts])
        if disjoint(facts, c):
            return False
        if disjoint(facts, mk_not(c)):
            return True
        return None

    # -- loops ---------------------------------------------------------------
    def _for(self, s: ast.For, frame: Activation) -> None:
        from .builtins import loop_bounds

        if s.orelse or not isinstance(s.target, ast.Name):
            raise self.unsupported("for with else or a tuple target", s)
        lo, hi, step = loop_bounds(self, s.iter, frame)
        clo, chi = concrete(lo), concrete(hi)
        if clo is not None and chi is not None:
            for v in range(clo, chi, step):
                frame.vars[s.target.id] = v
                self._body(s.body, frame)
            return
        if step != 1:
            raise self.unsupported("a runtime-bounded loop with a step other than 1", s)
        if loop_carried(s):
            self._unrolled(s, frame, lo, hi)
            return
        mark = self._mark()
        reason = self._family(s, frame, lo, hi)
        if reason:
            self._rewind(mark)
            self._unrolled(s, frame, lo, hi)

    def _family(self, s: ast.For, frame: Activation, lo: Operand, hi: Operand) -> str:
        """Run the body once for a symbolic iteration (every trip count at
        once); returns why that is not exact for this loop ("" when it is)."""
        before = dict(frame.vars)
        first = len(self.mem.accesses)
        lo_t, hi_t = Sym(as_int_term(as_scalar(lo))), Sym(as_int_term(as_scalar(hi)))
        refused = ""
        iteration = self.mem.each(lo_t, hi_t, Sym(self.guard(frame)))
        for var in iteration:
            self.guards.append(mk_and([lift(var >= lo_t), lift(var < hi_t)]))
            try:
                frame.vars[s.target.id] = Scalar(var.z, "i32")
                self._body(s.body, frame)
            except RuntimeError as e:  # SymbolicMemory refuses a read after a loop store
                refused = f"the body reads a buffer after storing to it ({e})"
            finally:
                self.guards.pop()
        iteration.close()
        if refused:
            return refused
        body = self.mem.accesses[first:]
        read = {a.buffer for a in body if a.kind == "read"}
        written = {a.buffer for a in body if a.kind == "write"}
        if read & written:
            return f"the body reads buffer(s) {sorted(read & written)} it stores to"
        for a in body:
            if a.kind == "write" and any(occurs(lift(a.value), v.z) for v in a.loop_vars):
                return "a store's value depends on the loop variable"
        frame.vars = {k: v for k, v in frame.vars.items() if k in before and k != s.target.id}
        return ""

    def _unrolled(self, s: ast.For, frame: Activation, lo: Operand, hi: Operand) -> None:
        """Iterations that depend on each other: unrolled ``launch.max_trips``
        times, each under "this iteration runs", with the bound noted for the
        memory-safety obligation (the loop must not run longer)."""
        bound = self.launch.max_trips
        trips = binary("-", hi, lo, self.note)
        self.loop_bounds.append((as_int_term(as_scalar(trips)), bound, self.guard(frame), s.lineno, self.file))
        for i in range(bound):
            index = self._binop("+", lo, i, s)
            runs = as_bool_term(as_scalar(binary("<", index, hi, self.note)))
            before = dict(frame.vars)
            self.guards.append(runs)
            try:
                frame.vars[s.target.id] = index
                self._body(s.body, frame)
            finally:
                self.guards.pop()
            frame.vars = {k: (merge(runs, v, before[k], self, s) if k in before and before[k] is not v else v)
                          for k, v in frame.vars.items()}

    def _mark(self) -> tuple:
        m = self.mem
        return (len(m.accesses), dict(m.current), set(m._family_written), len(self.intermediates),
                dict(self.where), len(self.block_stores), len(self.block_loads), self.reductions)

    def _rewind(self, mark: tuple) -> None:
        m = self.mem
        accesses, current, family, intermediates, where, stores, loads, self.reductions = mark
        del m.accesses[accesses:]
        m.current.clear()
        m.current.update(current)
        m._family_written.clear()
        m._family_written.update(family)
        del self.intermediates[intermediates:]
        self.where.clear()
        self.where.update(where)
        del self.block_stores[stores:]
        del self.block_loads[loads:]

    # -- expressions ---------------------------------------------------------
    def _expr(self, e: ast.expr, frame: Activation) -> Any:
        self.line = getattr(e, "lineno", self.line)
        if isinstance(e, ast.Constant):
            if isinstance(e.value, (bool, int, str)) or e.value is None:
                return e.value
            raise self.unsupported(f"constant {e.value!r}", e)
        if isinstance(e, ast.Name):
            return self._name(e, frame)
        if isinstance(e, ast.Attribute):
            base = self._expr(e.value, frame)
            if isinstance(base, (Scalar, Pointer, Block)):
                return ("method", base, e.attr)
            try:
                return getattr(base, e.attr)
            except AttributeError:
                raise self.unsupported(f"attribute {ast.unparse(e)}", e) from None
        if isinstance(e, ast.Call):
            from .builtins import call

            return call(self, e, frame)
        if isinstance(e, ast.BinOp):
            op = BIN.get(type(e.op))
            if op is None:
                raise self.unsupported(f"operator {type(e.op).__name__}", e)
            return self._binop(op, self._expr(e.left, frame), self._expr(e.right, frame), e)
        if isinstance(e, ast.UnaryOp):
            op = {ast.USub: "-", ast.Invert: "~", ast.Not: "not"}.get(type(e.op))
            if op is None:
                raise self.unsupported(f"operator {type(e.op).__name__}", e)
            return self._wrap(lambda: unary(op, self._expr(e.operand, frame), self.note), e)
        if isinstance(e, ast.Compare):
            if len(e.ops) != 1 or type(e.ops[0]) not in CMP:
                raise self.unsupported(f"comparison {ast.unparse(e)}", e)
            return self._binop(CMP[type(e.ops[0])], self._expr(e.left, frame), self._expr(e.comparators[0], frame), e)
        if isinstance(e, ast.BoolOp):
            return self._boolop(e, frame)
        if isinstance(e, ast.IfExp):
            cond = self._expr(e.test, frame)
            if isinstance(cond, (bool, int)):
                return self._expr(e.body if cond else e.orelse, frame)
            c = as_bool_term(as_scalar(cond))
            return merge(c, self._expr(e.body, frame), self._expr(e.orelse, frame), self, e)
        if isinstance(e, ast.Tuple):
            return tuple(self._expr(x, frame) for x in e.elts)
        raise self.unsupported(f"expression {type(e).__name__}", e)

    def _boolop(self, e: ast.BoolOp, frame: Activation) -> Any:
        """``and`` / ``or``: constexpr operands short-circuit as in Python (a
        falsy one ends an ``and``, a truthy one an ``or``, unevaluated
        operands after it); the scalar tensors left combine as Triton's
        logical and / or (``i1``); a single one is the result as it is."""
        is_and = isinstance(e.op, ast.And)
        tensors, last = [], None
        for v in e.values:
            x = self._expr(v, frame)
            if isinstance(x, (bool, int)):
                if bool(x) != is_and:
                    return Scalar(lift(not is_and), "i1") if tensors else x
                last = x
                continue
            if not isinstance(x, Scalar):
                raise self.unsupported(f"{'and' if is_and else 'or'} on a block (use & or |)", e)
            tensors.append(x)
        if not tensors:
            return last
        if len(tensors) == 1:
            return tensors[0]
        terms = [as_bool_term(t) for t in tensors]
        return Scalar(mk_and(terms) if is_and else mk_or(terms), "i1")

    def _name(self, e: ast.Name, frame: Activation) -> Any:
        if e.id in frame.vars:
            return frame.vars[e.id]
        if e.id in frame.source.globals:
            return frame.source.globals[e.id]
        if hasattr(py_builtins, e.id):
            return getattr(py_builtins, e.id)
        raise self.unsupported(f"undefined name {e.id}", e)

    def _binop(self, op: str, a: Any, b: Any, node: ast.AST) -> Any:
        from .builtins import pointer_add

        if op in "+-" and _pointery(a) and not _pointery(b):
            offset = b if op == "+" else self._wrap(lambda: unary("-", b, self.note), node)
            return self._wrap(lambda: pointer_add(self, a, offset), node)
        if op == "+" and _pointery(b) and not _pointery(a):
            return self._wrap(lambda: pointer_add(self, b, a), node)
        return self._wrap(lambda: binary(op, a, b, self.note), node)

    def _wrap(self, thunk: Callable[[], T], node: ast.AST) -> T:
        try:
            return thunk()
        except (KernelTypeError, TypeError) as err:
            raise self.unsupported(str(err), node) from err

    def inline(self, jit: Jit, args: list, kwargs: dict, node: ast.AST) -> Any:
        """Call another jit function: run its body in a fresh frame here."""
        src = source_of(jit)
        params = [p.arg for p in src.node.args.args]
        if len(args) > len(params):
            raise self.unsupported(f"{len(args)} arguments to {src.name}", node)
        bound = dict(zip(params, args))
        bound.update(kwargs)
        defaults = src.node.args.defaults
        for p, d in zip(params[len(params) - len(defaults):], defaults):
            bound.setdefault(p, self._expr(d, Activation(src, {})))
        missing = [p for p in params if p not in bound]
        if missing:
            raise self.unsupported(f"call of {src.name} without {missing}", node)
        caller, file, line = self._frame, self.file, self.line
        callee = Activation(src, bound)
        self._frame = callee
        depth = len(self.guards)
        if caller is not None and caller.done is not None:
            self.guards.append(mk_not(caller.done))
        try:
            self._body(src.node.body, callee)
        finally:
            self._frame, self.file, self.line = caller, file, line
            del self.guards[depth:]
        return callee.result

    _frame: Activation | None = None


def merge(cond: z3.BoolRef, a: Any, b: Any, run: KernelRun, node: ast.AST) -> Any:
    """The value ``a`` where ``cond`` holds, else ``b`` (variables after a runtime branch)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(merge(cond, x, y, run, node) for x, y in zip(a, b))
    if isinstance(a, Block) and isinstance(b, Block) and len(a.lanes) == len(b.lanes) and a.width == b.width:
        return Block(tuple(merge(cond, x, y, run, node) for x, y in zip(a.lanes, b.lanes)), a.width)
    if isinstance(a, Pointer) and isinstance(b, Pointer):
        return run._wrap(lambda: merge_pointers(cond, a, b), node)
    if isinstance(a, (bool, int, Scalar)) and isinstance(b, (bool, int, Scalar)):
        if not isinstance(a, Scalar) and not isinstance(b, Scalar) and a == b and type(a) is type(b):
            return a
        x, y = as_scalar(a), as_scalar(b)
        if x.address is not None or y.address is not None:
            raise run.unsupported("a pointer-table entry merged by a branch", node)
        if x.dtype == y.dtype == "i1":
            return Scalar(mk_ite(cond, x.z, y.z), "i1")
        from .values import promote

        return Scalar(mk_ite(cond, as_int_term(x), as_int_term(y)), promote(x.dtype, y.dtype))
    raise run.unsupported(f"merging {type(a).__name__} with {type(b).__name__} after a runtime branch", node)


def _pointery(x: object) -> bool:
    return isinstance(x, Pointer) or _has_pointer(x)


def _has_pointer(x: object) -> bool:
    return isinstance(x, Block) and any(isinstance(v, Pointer) for v in x.lanes)


def occurs(term: Symbolic, symbol: Symbolic) -> bool:
    """Whether the constant ``symbol`` occurs in ``term``: a substitution in
    Z3's C code, where a walk of the term's subterms in Python cost about a
    tenth of the row-blocked kernel's proofs."""
    t, s = lift(term), lift(symbol)
    return not z3.substitute(t, (s, z3.FreshConst(s.sort(), "absent"))).eq(t)


def _subterms(term: z3.ExprRef) -> list[z3.ExprRef]:
    out, todo, seen = [], [term], set()
    while todo:
        t = todo.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        out.append(t)
        todo.extend(t.children())
    return out


def loop_carried(s: ast.For) -> set[str]:
    """Names the loop body reads before assigning them (in statement order)."""
    assigned: set[str] = set()
    carried: set[str] = set()

    def visit(stmts: list) -> None:
        for st in stmts:
            targets = []
            if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                reads = [n.id for n in ast.walk(st.value) if isinstance(n, ast.Name)] if st.value else []
                if isinstance(st, ast.AugAssign):
                    reads += [st.target.id] if isinstance(st.target, ast.Name) else []
            elif isinstance(st, (ast.If, ast.For)):
                head = st.test if isinstance(st, ast.If) else st.iter
                reads = [n.id for n in ast.walk(head) if isinstance(n, ast.Name)]
            else:
                reads = [n.id for n in ast.walk(st) if isinstance(n, ast.Name)]
            carried.update(r for r in reads if r not in assigned and r in written)
            for t in targets:
                assigned.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            if isinstance(st, ast.If):
                visit(st.body)
                visit(st.orelse)
            elif isinstance(st, ast.For):
                visit(st.body)

    written = {n.id for st in s.body for n in ast.walk(st)
               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    visit(s.body)
    return carried


def run_program(jit: Jit, launch: ProgramLaunch, mem: SymbolicMemory) -> KernelRun:
    """Execute one program of ``jit`` for ``launch`` on ``mem``."""
    run = KernelRun(mem, launch)
    run.run(jit)
    return run

