"""Proved differences between two versions of a kernel: equal on every input
inside the contract, or a distinguishing input, replayed and judged.

For each kernel role both versions define (a :class:`.roles.KernelRole` of
the registry, :data:`.registry.REFERENCE` by default), and each constexpr
variant its record lists, both
kernels run on symbolic memory over the *same* inputs: every input of a case
is a named Z3 term (``mem_<buffer>`` arrays, ``batch_p``, ``num_reqs``, ...),
so two cases built from one variant share them. The claim, per buffer either
version writes, at an arbitrary cell inside it::

    contract  =>  base's final value == head's final value

for the program of a row below ``num_reqs`` and, where both records' grids
span ``max_num_reqs`` rows (:attr:`.roles.KernelRole.padding`: B, C, D),
for a *padding* program too: a row ``num_reqs <= batch < max_num_reqs``
(the ``padding_programs_past_num_reqs`` choice), whose case assumes nothing
of the row's stale inputs (:func:`.named.padding_case`), so its
distinguishing input has a program id past ``num_reqs``. The contract is
the role's launch contract (:data:`LAUNCH_CONTRACT`: program ids inside the
grid, sizes and capacities) plus the **guaranteed**
caller contract: every hypothesis of the case whose record vLLM guarantees
(``spec.contract.classify``: ``guaranteed``), and the proofs' own structure
(``proof``: definitions, invariants); the ``not guaranteed`` and
``contradicted`` ones are left out. Unsat for every part and variant: the
versions are proved equal. Sat: a distinguishing input, which is

1. checked again under the **full** caller contract (every hypothesis of the
   case): a difference that needs an assumption vLLM does not guarantee
   broken changes nothing for callers that keep it;
2. minimised: the smallest geometry first (the variants are tried in order
   of ``MAX_NUM_REQS``, block size, window, ring; a variant's row program
   before its padding program), then the smallest launch of
   :data:`.report.SMALL_LAUNCHES` (one group, one row, ...), then the
   fewest requests, columns, slots and layers, one at a time (and for a
   padding program its row, the first past ``num_reqs`` where it can be);
3. replayed on both versions under Triton's interpreter
   (:mod:`.playback`), which must show the outputs differ concretely: each
   version in its own process when it comes with one (``remotes``, as
   ``review --base`` passes them: nothing of either version runs here), a
   version that ends, hangs, raises or changes its process in the launch
   breaking the launch (``process: ...``, judged as any other break);
4. judged by what the lifecycle asks of one launch: the spec program's
   result (the kernel contract the lifecycle proofs rest on), memory
   safety and int32 on the real kernel, and that no padding program stores
   outside its frame (which holds no tracker: no request's state). Base breaks it and head does not:
   a **fix**; the reverse: a **regression**; neither: a **change** that
   breaks nothing, naming the buffers that differ; both: a change where
   both break it.

Each distinct **class** of distinguishing inputs is reported, not only the
smallest: a class is a kind of program (row or padding) and a buffer that
differs. Once a buffer's class is found (its smallest variant, with whether
it differs inside the full caller contract), later variants are solved for
the buffers no class holds yet only (the found classes blocked), and every
class whose buffer the replays of the smallest distinctions do not show
differing gets a distinguishing input of its own, minimised, replayed and
judged as they are, up to
:data:`MAX_CLASSES` per role (:attr:`.diff_results.RoleDiff.classes`).

Here the decision per role (:func:`diff_role`); both versions' programs of
a variant over one set of inputs in :mod:`.diff_pairs`; a distinguishing
input minimised, replayed and judged in :mod:`.diff_replay`; the outcomes
(:class:`.diff_results.RoleDiff`, :class:`.diff_results.Distinction`) in
:mod:`.diff_results`. Nothing here imports ``review``: the versions come in
as modules.
"""

from __future__ import annotations

import time
from types import ModuleType

import z3

from ..obligation import Facts, fact_vector, new_solver
from ..terms import lift
from .diff_pairs import PairCase, pair_case, smallest_first
from .diff_replay import distinguish
from .diff_results import DIFFERS, EQUAL, UNDECIDED, UNSUPPORTED, RoleDiff
from .obligations import Part
from .registry import REFERENCE
from .roles import KernelRole, Registry
from .source import Unsupported

def _solver(facts: list | Facts) -> z3.Solver:
    """A fresh solver asserting the named ``facts`` (or their :class:`.obligation.Facts`)."""
    return new_solver(facts if isinstance(facts, Facts) else fact_vector(f for _, f in facts))


def _violated(facts: list, parts: list[Part], first_only: bool) -> tuple[list[Part], list[Part]]:
    """The parts the solver can violate under ``facts``, and those it could not decide."""
    s = _solver(facts)
    violated, unknown = [], []
    for p in parts:
        s.push()
        s.add(z3.Not(lift(p.term)))
        answer = s.check()
        s.pop()
        if answer == z3.sat:
            violated.append(p)
            if first_only:
                break
        elif answer == z3.unknown:
            unknown.append(p)
    return violated, unknown


MAX_CLASSES = 4
"""The most classes of distinguishing inputs one role's diff reports (its
smallest distinctions included): each is minimised and replayed on both kernels."""


def _classify(classes: dict, pc: PairCase, padding: bool, violated: list[Part]) -> None:
    """Record the class of each part of ``violated`` no class holds yet, with
    whether it differs inside the full caller contract (at most :data:`MAX_CLASSES`)."""
    for p in violated:
        if (padding, p.name) in classes or len(classes) >= MAX_CLASSES:
            continue
        inside, _ = _violated(pc.guaranteed + pc.optional, [p], first_only=True)
        classes[(padding, p.name)] = (pc, p, bool(inside))


def padded(role: KernelRole, head_role: KernelRole | None = None) -> bool:
    """Whether both records' grids span ``max_num_reqs`` rows, so their padding programs are compared."""
    return role.padding is not None and (head_role or role).padding is not None


def diff_role(base: ModuleType, head: ModuleType, role: KernelRole, *, head_role: KernelRole | None = None,
              base_label: str = "base", head_label: str = "head", remotes: tuple = (None, None)) -> RoleDiff:
    """Decide whether ``base`` and ``head`` leave the same memory for role
    ``role`` on every input inside the contract, every variant, the programs
    of rows below ``num_reqs`` and (:func:`padded`) the padding programs past
    it; a difference comes with its smallest distinguishing input, replayed
    and judged. ``head_role``: head's own record of the role (another
    generation's adapter); the variants compared are those both records list,
    by label. ``remotes``: base and head each in its own process
    (:class:`~replayssm.base.remote.RemoteModule`), where the replay
    launches them; None: in this process (our own kernels, tests)."""
    start = time.perf_counter()
    theirs = dict((head_role or role).variants())
    chosen = [(label, params) for label, params in smallest_first(head_role or role) if label in theirs]
    mine = dict(role.variants())
    chosen = [(label, mine[label]) for label, _ in chosen if label in mine]
    name = role.name if head_role is None or head_role.name == role.name else f"{role.name} ~ {head_role.name}"
    out = RoleDiff(name, (head_role or role).kernel_name(head), EQUAL, len(chosen),
                   padding_compared=padded(role, head_role))
    first: dict[bool, tuple[PairCase, list[Part]]] = {}
    """Per kind of program (a padding program or not): the smallest variant's differing pair and parts."""
    inside_any = {False: False, True: False}
    classes: dict[tuple[bool, str], tuple[PairCase, Part, bool]] = {}
    """Per (padding program or not, buffer): the first pair that differs in it, the part, inside the full contract."""
    try:
        for label, params in chosen:
            for padding in (False, True) if out.padding_compared else (False,):
                pc = pair_case(base, head, role, label, params, head_role, theirs[label], padding)
                violated, unknown = _violated(pc.guaranteed, pc.parts, first_only=padding in first)
                if unknown and not violated and label not in out.undecided:
                    out.undecided.append(label)
                if violated and len(classes) < MAX_CLASSES:
                    # past the smallest differing variant (solved for its first part only), the classes
                    # found so far blocked: solved again for the buffers no class holds yet
                    more = [] if padding not in first else _violated(
                        pc.guaranteed, [p for p in pc.parts if (padding, p.name) not in classes and p not in violated],
                        first_only=False)[0]
                    _classify(classes, pc, padding, violated + more)
                if not violated:
                    continue
                if padding:
                    out.padding_differing.append(label)
                if label not in out.differing:
                    out.differing.append(label)
                inside, _ = _violated(pc.guaranteed + pc.optional, violated, first_only=True)
                if padding not in first or (inside and not inside_any[padding]):
                    first[padding] = (pc, violated if not inside else _violated(pc.guaranteed + pc.optional, pc.parts,
                                                                                 first_only=False)[0])
                inside_any[padding] = inside_any[padding] or bool(inside)
    except Unsupported as e:
        out.outcome, out.why = UNSUPPORTED, str(e)
        out.seconds = time.perf_counter() - start
        return out
    if first:
        out.outcome = DIFFERS
        out.only_outside_contract = not any(inside_any.values())
        for padding, (pc, violated) in sorted(first.items(), key=lambda kv: kv[0]):  # the row programs' first
            d = distinguish(pc, violated, inside_any[padding], base, head, base_label, head_label, remotes)
            if out.distinction is None:
                out.distinction = d
            else:
                out.padding_distinction = d
        shown = [d for d in (out.distinction, out.padding_distinction) if d is not None]
        for (padding, buffer), (pc, part, within) in classes.items():
            # shown: a cell of the buffer differs on the replay of a distinction of its kind of program
            if not any(d.padding == padding and any(c.split("[")[0] == buffer for c in d.cells) for d in shown):
                out.classes.append(distinguish(pc, [part], within, base, head, base_label, head_label, remotes))
                shown.append(out.classes[-1])
    elif out.undecided:
        out.outcome, out.why = UNDECIDED, f"the solver timed out on {', '.join(out.undecided)}"
    out.seconds = time.perf_counter() - start
    return out


def matched_roles(base: ModuleType, head: ModuleType, base_roles: Registry,
                  head_roles: Registry) -> list[tuple[KernelRole, KernelRole]]:
    """``(base's record, head's record)`` of every role both versions define
    a kernel of, matched by :func:`duty` (two generations' adapters name a
    kernel of the same duty alike: ``A.postprocess``, ``B.postprocess``)."""
    theirs = {duty(r): r for r in head_roles if r.jit(head) is not None}
    return [(r, theirs[duty(r)]) for r in base_roles if r.jit(base) is not None and duty(r) in theirs]


def duty(role: KernelRole) -> str:
    """What a role's kernel does (``A.postprocess`` and ``B.postprocess``: ``postprocess``), as its record says."""
    return role.duty or role.name


def diff_versions(base: ModuleType, head: ModuleType, roles: Registry = REFERENCE, *,
                  head_roles: Registry | None = None, base_label: str = "base",
                  head_label: str = "head") -> list[RoleDiff]:
    """:func:`diff_role` for every role both versions define: of ``roles``
    (both of one generation), or of ``roles`` for base and ``head_roles``
    for head, matched by name (:func:`matched_roles`)."""
    pairs = matched_roles(base, head, roles, roles if head_roles is None else head_roles)
    return [diff_role(base, head, b, head_role=h if h is not b else None, base_label=base_label,
                      head_label=head_label) for b, h in pairs]
