"""A request enters (``admit``, possibly hitting published prefix blocks) and leaves (``free``).

Each action reads top to bottom: the domains of its picks, its guard, its
caller assumptions (none) and its effect, then its :class:`~.action.Action`.
"""

from __future__ import annotations

from ..geometry import has_prefix_cache
from ..vocab import Cond, conj, implies, ite, within
from .action import Action, Named, Outcome
from .picks import AdmitPicks, FreePicks, PickSpec
from .state import State, SystemParams, code


def admit_specs(p: SystemParams) -> list[PickSpec]:
    """The domain of every leaf of admit's picks, by path."""
    out = [PickSpec("req", 0, p.num_reqs - 1), PickSpec("stream", 0, p.num_streams - 1),
           PickSpec("prompt", 1, p.max_len), PickSpec("hit", 0, p.num_cols - 1)]
    return out + [PickSpec(f"hit_slots[{g}][{c}]", 1, p.num_slots - 1)
                  for g in range(p.groups) for c in range(p.num_cols - 1)]


def admit_guard(st: State, k: AdmitPicks) -> Cond:
    """A waiting request with a prompt arrives; the scheduler's prefix cache
    finds ``hit`` full blocks of its stream, each registered in every group.
    At least one prompt token is left to compute; mode none has no prefix cache."""
    p = st.p
    bs = p.geo.block_size
    r = k.req
    parts = [within(r, 0, p.num_reqs - 1), st.get("active", r) == 0,
             within(k.stream, 0, p.num_streams - 1), within(k.prompt, 1, p.max_len),
             within(k.hit, 0, p.num_cols - 1), k.hit * bs < k.prompt]
    if not has_prefix_cache(p.mode):
        parts.append(k.hit == 0)
    for g in range(p.groups):
        for c in range(p.num_cols - 1):
            s = k.hit_slots[g][c]
            parts.append(implies(c < k.hit, conj(
                within(s, 1, p.num_slots - 1), st.get("reg", g, s) == code(p, k.stream, (c + 1) * bs))))
    return conj(*parts)


def admit_assumptions(st: State, k: AdmitPicks) -> list[Named]:
    """Admit relies on no caller assumption."""
    return []


def admit_apply(st: State, k: AdmitPicks) -> Outcome:
    """Request ``req`` becomes active at position ``hit * block_size`` with the
    hit blocks in its tables (each one's reference counted)."""
    p = st.p
    out = st.copy()
    r, hit = k.req, k.hit
    N = hit * p.geo.block_size
    for name, value in (("active", 1), ("stream", k.stream), ("prompt", k.prompt), ("N", N),
                        ("live", hit - 1)):
        out.set(name, (r,), value)
    for g in range(p.groups):
        for c in range(p.num_cols):
            s = k.hit_slots[g][c] if c < p.num_cols - 1 else p.geo.pad_slot
            use = c < hit
            out.set("table", (g, r, c), ite(use, s, p.geo.pad_slot))
            out.set("ref", (g, s), out.get("ref", g, s) + 1, use)
    return Outcome(out, [], {"computed": N})


def free_specs(p: SystemParams) -> list[PickSpec]:
    """The domain of free's one pick, the request."""
    return [PickSpec("req", 0, p.num_reqs - 1)]


def free_guard(st: State, k: FreePicks) -> Cond:
    """A running request finishes or is preempted (a preempted request comes
    back later through ``admit``, recomputing or hitting its published prefix)."""
    return conj(within(k.req, 0, st.p.num_reqs - 1), st.get("active", k.req) == 1)


def free_apply(st: State, k: FreePicks) -> Outcome:
    """Request ``req`` gives back every block of its tables and becomes inactive."""
    p = st.p
    out = st.copy()
    r = k.req
    pad = p.geo.pad_slot
    for g in range(p.groups):
        for c in range(p.num_cols):
            s = st.get("table", g, r, c)
            out.set("ref", (g, s), out.get("ref", g, s) - 1, s != pad)
            out.set("table", (g, r, c), pad)
    out.set("active", (r,), 0)
    out.set("live", (r,), -1)
    return Outcome(out, [])


ADMIT = Action("admit", AdmitPicks, admit_specs, admit_guard, admit_assumptions, admit_apply)
FREE = Action("free", FreePicks, free_specs, free_guard, lambda st, k: [], free_apply)
