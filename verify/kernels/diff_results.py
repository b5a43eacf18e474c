"""The outcome of comparing two versions' kernels by proof: per role and per distinguishing input.

:class:`RoleDiff` is one role of a pair of versions (proved equal, differs,
undecided, unsupported); :class:`Distinction` one distinguishing input and
what its replay on both kernels showed (:mod:`.diff` decides, :mod:`.diff_replay`
minimises, replays and judges).
"""

from __future__ import annotations

from dataclasses import dataclass, field

EQUAL, DIFFERS, UNDECIDED, UNSUPPORTED = "proved equal", "differs", "undecided", "unsupported"
"""A role's outcome: equal on every input inside the contract, a
distinguishing input, a solver timeout somewhere (no difference found), or a
construct the evaluator does not support."""

FIX, REGRESSION, CHANGE, BOTH_BREAK = "fix", "regression", "change that breaks nothing", "change, both break"
UNCONFIRMED = "not reproduced"
"""A difference of one program whose replayed launch shows no difference."""

CONTRACT = "the launch contract and the guaranteed caller contract"

@dataclass
class Distinction:
    """A distinguishing input of one variant and what became of it."""

    variant: str
    has_spec: bool
    """Whether the role has a spec program the replay compares with."""
    padding: bool
    """Whether the distinguishing program is a padding program (its row past ``num_reqs``)."""
    buffers: list[str]
    """The buffers whose final contents the solver shows differ."""
    inside_full_contract: bool
    """Whether the input also keeps the caller assumptions vLLM does not guarantee."""
    inputs: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)
    cells: list[str] = field(default_factory=list)
    """The cells that differ on the real kernels (replay): ``buffer[index]: base X, head Y``."""
    broken: dict = field(default_factory=dict)
    """Per version (``base``, ``head``): what it breaks on the input."""
    faults: dict = field(default_factory=dict)
    """Per version that did not survive the replayed launch: the fault's report (its output, its traceback)."""
    judgement: str = ""
    trace: dict | None = None
    outside: list[str] = field(default_factory=list)
    """The not-guaranteed caller assumptions the input breaks (none inside the full contract)."""

    @property
    def replayed(self) -> bool:
        """The replay on the real kernels shows the difference: cells that
        differ, or one version alone breaking memory safety, int32 or
        conflict freedom (an out-of-bounds lane is masked off on replay, so
        what it would read or write does not show in the outputs)."""
        return bool(self.cells) or bool(self.broken.get("base")) != bool(self.broken.get("head"))

    def as_json(self) -> dict:
        return {"variant": self.variant, "padding_program": self.padding, "buffers": self.buffers, "inside_full_contract": self.inside_full_contract,
                "inputs": self.inputs, "launch": self.launch, "cells": self.cells, "broken": self.broken,
                "judgement": self.judgement, "replayed": self.replayed,
                "breaks_assumptions": self.outside, "faults": self.faults}


@dataclass
class RoleDiff:
    """One role of a pair of versions."""

    role: str
    kernel: str
    outcome: str
    variants: int
    differing: list[str] = field(default_factory=list)
    """The variants that differ, each once (by its row program or its padding program)."""
    undecided: list[str] = field(default_factory=list)
    padding_differing: list[str] = field(default_factory=list)
    """The variants whose padding programs differ (rows past ``num_reqs``)."""
    padding_compared: bool = False
    """Whether the padding programs were compared (both records' grids span ``max_num_reqs`` rows)."""
    only_outside_contract: bool = False
    """Every difference needs a caller assumption vLLM does not guarantee broken."""
    distinction: Distinction | None = None
    """The smallest distinguishing input: of the row programs where they differ, else of the padding programs."""
    padding_distinction: Distinction | None = None
    """The padding programs' own, where the row programs differ too (judged apart: it may break what the other does not)."""
    classes: list[Distinction] = field(default_factory=list)
    """One distinguishing input of every other class (kind of program, buffer that differs) the two above do
    not show, each replayed and judged (``diff.MAX_CLASSES`` at most in all)."""
    why: str = ""
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: proved equal, or the distinguishing input and its class."""
        if self.outcome == EQUAL:
            also = ", padding programs too" if self.padding_compared else ""
            return f"{self.role}: proved equal under {CONTRACT} ({self.variants} variants{also})"
        if self.outcome != DIFFERS:
            return f"{self.role}: {self.outcome} ({self.why})"
        d = self.distinction
        assert d is not None, "a difference comes with its distinguishing input"
        where = ("only outside the full caller contract" if self.only_outside_contract else
                 "inside the full caller contract")
        at = f" padding program {d.inputs.get('batch')} (num_reqs {d.inputs.get('num_reqs')})" if d.padding else ""
        if self.padding_compared:
            where += "; padding programs: " + (f"differ in {len(self.padding_differing)}" if self.padding_differing
                                               else "equal")
        line = (f"{self.role}: differs in {len(self.differing)} of {self.variants} variants ({where}); "
                f"smallest: {d.variant}{at}, buffers {', '.join(d.buffers)}; {d.judgement}")
        line += _replayed(d)
        pd = self.padding_distinction
        if pd is not None:
            line += (f"; and the padding programs' smallest: {pd.variant} padding program {pd.inputs.get('batch')} "
                     f"(num_reqs {pd.inputs.get('num_reqs')}), buffers {', '.join(pd.buffers)}; {pd.judgement}"
                     + _replayed(pd))
        for c in self.classes:
            at = f" padding program {c.inputs.get('batch')}" if c.padding else ""
            where = "" if c.inside_full_contract else " (only outside the full caller contract)"
            line += f"; also {', '.join(c.buffers)} in {c.variant}{at}{where}: {c.judgement}" + _replayed(c)
        return line

    def as_json(self) -> dict:
        return {"role": self.role, "kernel": self.kernel, "outcome": self.outcome, "evidence": "proved",
                "contract": CONTRACT, "variants": self.variants, "differing": self.differing,
                "undecided": self.undecided, "padding_compared": self.padding_compared,
                "padding_differing": self.padding_differing, "only_outside_contract": self.only_outside_contract,
                "distinction": None if self.distinction is None else self.distinction.as_json(),
                "padding_distinction": None if self.padding_distinction is None else
                self.padding_distinction.as_json(),
                "classes": [c.as_json() for c in self.classes],
                "why": self.why, "seconds": round(self.seconds, 2), "summary": self.summary()}


def _replayed(d: Distinction) -> str:
    """What the replay of ``d`` showed, for a summary."""
    if d.cells:
        return f"; replayed, the outputs differ: {'; '.join(d.cells[:3])}"
    return "; replayed: same outputs, one version alone breaks it" if d.replayed else "; NOT reproduced on the kernels"


