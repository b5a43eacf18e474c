"""Replaying a saved trace: the spec and the implementation, step by step.

The implementation runs in a child process under the per-launch watchdog
(:mod:`.workers`), so a hang or a crash the trace was saved for is
reproduced, not suffered. A trace is checked before anything runs
(:func:`replayssm.base.traces.load_trace`, :func:`.launch_traces.replayable`)
and the report says what was compared.
"""

from __future__ import annotations

import multiprocessing

from replayssm.base.interrupts import Interrupted
from replayssm.base.isolation import TargetFault
from replayssm.base.traces import Loaded, load_trace

from .actions import SetState, action_to_json
from .campaign_config import WATCHDOG_SECONDS, check_device
from .containment import compare_outside
from .guards import GuardViolation
from .launch_traces import replayable, spec_states, trace_actions
from .launcher import LEVELS, Setup, SpecSide
from .target import DEFAULT_TARGET, load_target
from .workers import Reporter, Supervisor


def _recorded(meta: dict, key: str, default: str) -> str:
    value = meta.get(key)
    if key == "impl" and value == "replayssm.impl":  # traces saved before the module was named in full
        value = DEFAULT_TARGET
    return value if isinstance(value, str) and value else default


def _check_recorded_states(trace: dict) -> str:
    """A fuzz trace's recorded ``states`` must be what the spec computes for
    its actions (replay judges the implementation by the spec, so an edited
    state would otherwise pass unnoticed). Returns what was checked."""
    recorded = trace.get("states")
    if recorded is None:
        return "the trace records no spec states"
    if not isinstance(recorded, list) or len(recorded) != len(trace["actions"]):
        raise ValueError(f"trace.states must list one state per action ({len(trace['actions'])}), "
                         f"got {type(recorded).__name__} of {len(recorded) if isinstance(recorded, list) else '?'}")
    for n, (mine, theirs) in enumerate(zip(spec_states(trace), recorded)):
        for buffer, values in mine.items():
            if not isinstance(theirs, dict) or theirs.get(buffer) != values:
                raise ValueError(f"trace.states[{n}].{buffer} differs from what the spec computes for the trace's "
                                 "actions: the trace was edited, or the spec changed since it was saved (replay "
                                 "judges the implementation by the spec, not by recorded states)")
    return f"its {len(recorded)} recorded spec states match the spec"


def replay(path: str, impl: str | None = None, device: str | None = None, level: str | None = None,
           watchdog: float | None = None, loaded: Loaded | None = None) -> tuple[bool, str]:
    """Re-run a saved trace's launch actions on the spec and on the
    implementation, the latter in a child process under a per-launch
    ``watchdog`` (default: the ci profile's for the device); ``(False,
    report)`` when the implementation differs from the spec, raises, hangs or
    kills its process. ``impl``, ``device`` and ``level`` default to the
    trace's ``#meta`` (then to the default target, cpu, kernel); ``loaded``:
    the file at ``path`` when the caller has read it already. A malformed
    trace, a bad target or a missing device is a ``ValueError``; a signal
    stopping the replay is :class:`Interrupted`."""
    trace = replayable(loaded if loaded is not None else load_trace(path))
    meta = trace.get("#meta", {})
    given = {"impl": impl, "device": device, "level": level}
    impl = impl if impl is not None else _recorded(meta, "impl", DEFAULT_TARGET)
    device = device or _recorded(meta, "device", "cpu")
    level = level or _recorded(meta, "level", "kernel")
    check_device(device)
    launches = [a for a in trace["actions"] if a.get("name") != "set_state"]
    if not launches:
        raise ValueError("the trace has no launch actions (only state overwrites, or actions: []): "
                         "there is nothing to replay")
    try:
        Setup.from_json(trace["params"])
        checked_states = _check_recorded_states(trace)
    except (KeyError, TypeError, IndexError) as e:
        raise ValueError(f"the trace's params or actions are malformed: {type(e).__name__}: {e}") from e
    origin = ", ".join(f"{k} {v}" if given[k] else f"{k} {v} (from #meta)" if meta.get(k) else f"{k} {v} (default)"
                       for k, v in (("impl", impl), ("level", level), ("device", device)))
    lines = [f"replaying {len(trace['actions'])} actions ({len(launches)} launches) of {path}: {origin}"]
    limit = watchdog if watchdog is not None else WATCHDOG_SECONDS[device]["ci"]
    supervisor = Supervisor(multiprocessing.get_context("fork" if device != "cuda" else "spawn"), limit,
                            on_message=lambda child, message: lines.append(message[1]))
    child = supervisor.start(0, _replay_here, (trace, impl, device, level))
    supervisor.run()
    if supervisor.signal is not None:
        raise Interrupted(supervisor.signal)
    if child.fault is not None:
        step = len(child.actions) - 1
        lines.append(f"  {child.fault['reason']}")
        where = f"at step {step}" if child.ready else "while the target was imported"
        lines.append(f"{child.fault['kind']} reproduced {where}")
        return False, "\n".join(lines)
    if child.unusable is not None:
        raise ValueError(child.unusable)
    if child.error is not None:
        raise ValueError(child.error.splitlines()[0])
    ok, summary = child.result
    lines.append(summary if not ok else f"{summary}; {checked_states}")
    return ok, "\n".join(lines)


def _replay_here(trace: dict, impl: str, device: str, level: str,
                 reporter: Reporter) -> tuple[bool, str]:
    """The child's side of :func:`replay`: each report line is sent as it is
    made, each launch announced; returns ``(ok, closing line)``."""
    import torch

    setup = Setup.from_json(trace["params"])
    spec = SpecSide(setup)
    try:
        target = load_target(impl, cuda=device == "cuda", level=level)  # in a process of its own
    except ValueError as e:
        reporter.send("unusable", str(e))
        return False, ""
    reporter.ready()

    def say(line: str) -> None:
        reporter.send("line", line)

    def raised(where: str, e: Exception) -> tuple[bool, str]:
        if isinstance(e, GuardViolation):
            say(f"  {e}")
            return False, f"memory finding reproduced {where}"
        say(f"  {e.reason}" if isinstance(e, TargetFault) else f"  the implementation raised {type(e).__name__}: {e}")
        return False, f"failure reproduced {where}"

    try:
        side = LEVELS[level](setup, target, torch.device(device))
    except Exception as e:  # noqa: BLE001 - the implementation's own failure is the finding
        return raised("while building the implementation's buffers", e)
    for n, action in enumerate(trace_actions(trace)):
        try:
            spec.run(action)
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise ValueError(f"action {n} of the trace is malformed: {type(e).__name__}: {e}") from e
        if not isinstance(action, SetState):
            say(f"step {n}: {action.NAME} {'; '.join(action.caller)}".rstrip())
        reporter.launching(trace, action_to_json(action))
        try:
            side.run(action)
            if device == "cuda":
                torch.cuda.synchronize()  # the launch has run (or hangs) inside the watchdog's window
        except Exception as e:  # noqa: BLE001 - the implementation's own failure is the finding
            return raised(f"at step {n}", e)
        reporter.landed()
        wrong = compare_outside(spec.state(), side.state(), getattr(action, "contained", None))
        if wrong:
            for d in wrong[:12]:
                say(f"  {d}")
            return False, f"discrepancy reproduced at step {n}"
    launches = sum(a["name"] != "set_state" for a in trace["actions"])
    meta = trace.get("#meta", {})
    if meta.get("deterministic") is False:  # a run that does not show it cannot clear it: not a pass
        return False, (f"not reproduced, and not a pass: this trace was saved for a non-deterministic fault of the "
                       f"target ({meta.get('failure', 'failure')}: {meta.get('error', '')}), which passed when the "
                       "campaign repeated the run too; a fault that depends on the target's process history, its "
                       f"launch count or the time need not recur in a fresh process (its {launches} launches ran "
                       "here without it)")
    summary = (f"no discrepancy: the implementation agrees with the spec on every state buffer after each of the "
               f"{len(trace['actions'])} actions ({launches} launches)")
    if meta.get("failure") == "invariant":
        summary += ("\n(this trace was saved for a broken invariant of the spec against the callers' view of "
                    f"FlashInfer, which replay does not check: {meta.get('error', '')})")
    elif meta.get("failure") in ("exception", "hang", "crash"):
        verb = {"exception": "raise", "hang": "hang", "crash": "crash"}[meta["failure"]]
        summary += (f"\n(this trace was saved for {'an' if verb == 'raise' else 'a'} {meta['failure']}, "
                    f"{meta.get('error', '')}; the implementation did not {verb} here, so it came from the "
                    "harness, the spec side, or a fault that does not recur)")
    return True, summary
