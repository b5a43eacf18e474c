"""What a campaign tells its user: findings, progress, the summary, saved traces.

A :class:`CampaignFinding` is one thing wrong with the implementation: its ``kind``
(``discrepancy``, ``invariant``, ``exception``, ``hang``, ``crash``, or a
guard's kind), the kernel, the first differing cells, and the trace saved for
it. Traces are saved under names unique to the campaign and never lost: when
the failures folder cannot take one, it goes to the temporary folder, and
failing that, to the console. The JSON summary (:data:`SUMMARY_SCHEMA`) carries
the exit status and the campaign's configuration with the findings.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from replayssm.base.reports import EXIT_STATUS, replay_command, write_new

SUMMARY_SCHEMA = "replayssm-fuzz/1"
"""The JSON summary's format; its major version changes when a field changes meaning."""

PROGRESS_AFTER_SECONDS = 5.0
"""Runs shorter than this print no progress line."""

PROGRESS_EVERY_SECONDS = 10.0
"""How often the plain progress line repeats (no terminal bar)."""

KERNELS_OF_ACTIONS = {
    "kernel": {"migrate": "_reset_new_replayssm_slots_kernel", "postprocess": "_postprocess_replayssm_kernel"},
    "context": {"migrate": "ReplaySSMModelContext.reset_new_slots",
                "postprocess": "ReplaySSMModelContext.postprocess"},
}
"""Which entry point of the target runs each launch action, per harness level."""


def kernel_of(action: str | None, level: str, buffer: str | None = None) -> str:
    """The target's entry point that produced ``buffer`` in launch ``action``."""
    if level == "kernel" and action == "postprocess" and buffer == "active_request_indices":
        return "_compact_replayssm_requests_kernel"
    return KERNELS_OF_ACTIONS.get(level, {}).get(action or "", f"the harness ({action})")


@dataclass
class Cell:
    """One state-buffer entry where the implementation left another value than the spec."""

    buffer: str
    index: list[int]
    spec: int
    impl: int

    def __str__(self) -> str:
        return f"{self.buffer}{self.index}: spec {self.spec}, implementation {self.impl}"


@dataclass
class CampaignFinding:
    """One finding of a campaign, with the trace that shows it.

    ``actions`` is the trace's length in launch actions; ``shrunk`` says
    whether Hypothesis shrank it (hangs, crashes and findings cut short by an
    interrupt are saved as they happened, up to the failing launch).
    """

    kind: str
    reason: str
    kernel: str
    combination: int
    seed: int
    actions: int
    shrunk: bool
    cells: list[Cell] = field(default_factory=list)
    trace: str | None = None
    seconds: float = 0.0
    """When it was saved, in seconds from the campaign's start."""
    first_seen: str | None = None
    """The trace of the run as it first failed, before shrinking (None: the trace is that run)."""
    deterministic: bool = True
    """False when the failing run passed when it was repeated (a count- or time-dependent fault)."""

    def as_json(self) -> dict:
        return asdict(self)

    def lines(self, impl: str | None = None) -> list[str]:
        """The finding in a few console lines (``impl``: the target its replay command names, None for ours)."""
        out = [f"FINDING ({self.kind}) in {self.kernel}: {self.reason}"]
        out += [f"    {c}" for c in self.cells[:4]]
        length = f"{self.actions} launch actions" + (", shrunk" if self.shrunk else ", not shrunk")
        out.append(f"    trace: {length}; seed {self.seed}, combination {self.combination}")
        out.append(f"    saved to {self.trace}  ({replay_command(self.trace, impl)})" if self.trace
                   else "    no trace saved (no launch had started, or it is printed above)")
        if self.first_seen:
            out.append(f"    as it first failed, before shrinking: {self.first_seen}")
        return out


def campaign_id() -> str:
    """A name for this campaign: its UTC start time and the process id."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}"


def unique_name(campaign: str, kind: str, seed: int, combination: int) -> str:
    """A trace's file name, unique to the campaign and the finding."""
    return f"fuzz-{campaign}-{kind.replace(' ', '-')}-seed{seed}-c{combination}.json"


def save_trace(trace: dict, folder: str, name: str, out: TextIO) -> str | None:
    """Save a finding's trace in ``folder``; when that fails, in the
    temporary folder; when that fails too, print it on ``out``. Returns the
    path, or None when the trace could only be printed."""
    text = json.dumps(trace)
    for where in (Path(folder), Path(tempfile.gettempdir()) / "replayssm-failures"):
        try:
            path = write_new(where, name, text)
        except OSError as e:
            print(f"warning: cannot save the finding's trace in {where}: {e}", file=out)
            continue
        return str(path)
    print(f"the finding's trace:\n{text}", file=out)
    return None


class Progress:
    """A progress line for runs longer than :data:`PROGRESS_AFTER_SECONDS`:
    examples, request-steps, findings, elapsed. On a terminal with ``tqdm``
    installed, a bar instead (examples against the campaign's total)."""

    def __init__(self, out: TextIO, total_examples: int) -> None:
        self.out, self.total = out, total_examples
        self.start = time.monotonic()
        self.printed_at: float | None = None
        self.bar: Any = None

    def update(self, examples: int, request_steps: int, findings: int) -> None:
        now = time.monotonic()
        elapsed = now - self.start
        if elapsed < PROGRESS_AFTER_SECONDS:
            return
        if self.bar is None and self.printed_at is None and self.out.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self.bar = tqdm(total=self.total, unit="example", file=self.out, leave=False)
        if self.bar is not None:
            self.bar.n = min(examples, self.total)
            self.bar.set_postfix_str(f"{request_steps} request-steps, {findings} findings", refresh=False)
            self.bar.refresh()
            return
        if self.printed_at is not None and now - self.printed_at < PROGRESS_EVERY_SECONDS:
            return
        self.printed_at = now
        print(f"  progress: {examples} examples, {request_steps} request-steps, {findings} findings, "
              f"{elapsed:.0f} s", file=self.out, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def summarize(config: dict, stats: Any, missing: list[str], findings: list[CampaignFinding], signum: int | None,
              seconds: float, out: TextIO) -> dict:
    """Print a campaign's statistics and verdict; return its JSON summary.
    ``stats``: the merged :class:`~replayssm.fuzz.machine.Statistics`;
    ``missing``: the scenario classes never reached; ``signum``: the signal
    that interrupted the campaign, if any."""
    print("rules:", ", ".join(f"{k} {v}" for k, v in sorted(stats.rules.items())), file=out)
    print("scenarios:", file=out)
    for name in sorted(stats.scenarios):
        if not name.startswith("conventions "):
            print(f"  {name:<40} {stats.scenarios[name]}", file=out)
    conv = [n for n in stats.scenarios if n.startswith("conventions ")]
    print(f"  convention combinations reached          {len(conv)}/32", file=out)
    print(f"{stats.examples} state-machine runs (Hypothesis's examples, with those it discards and its shrink "
          f"runs), {stats.request_steps} request-steps in {seconds:.1f} s "
          f"({stats.request_steps / max(seconds, 1e-9):.1f} verified request-steps/s; kernels "
          f"{stats.kernel_seconds:.1f} s, spec {stats.spec_seconds:.1f} s)", file=out)
    for f in findings:
        print(f"FINDING ({f.kind}) saved to {f.trace}" if f.trace else f"FINDING ({f.kind}) in {f.kernel}: {f.reason}",
              file=out)
    if signum is not None:
        status = signal.Signals(signum).name
        verdict = f"INTERRUPTED by {status} (partial summary; {len(findings)} finding(s) saved)"
    elif findings:
        status, verdict = "finding", f"FAILED: {len(findings)} finding(s)"
    elif missing:
        status, verdict = "coverage", f"COVERAGE SHORTFALL: scenario classes never reached: {', '.join(missing)}"
    else:
        status, verdict = "passed", "PASSED"
    print(verdict, file=out, flush=True)
    return {"schema": SUMMARY_SCHEMA, "status": status if signum is None else "interrupted",
            "exit_code": EXIT_STATUS[status], "passed": status == "passed", "interrupted": signum is not None,
            "config": config, "examples": stats.examples, "request_steps": stats.request_steps,
            "seconds": round(seconds, 3), "kernel_seconds": round(stats.kernel_seconds, 3),
            "spec_seconds": round(stats.spec_seconds, 3), "scenarios": stats.scenarios, "rules": stats.rules,
            "missing_scenarios": missing, "findings": [f.as_json() for f in findings],
            "failures": [f.trace for f in findings if f.trace]}
