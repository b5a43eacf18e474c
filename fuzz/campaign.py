"""Fuzz campaigns: profiles, seeds, processes, statistics, saved failures, replay."""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from replayssm.spec.geometry import Conventions

from .launcher import LEVELS, Setup, SpecSide, compare
from .machine import Failure, ReplaySSMMachine, Statistics
from .target import load_target

PROFILES = {
    "ci": {"examples": 128, "max_steps": 12},
    "dev": {"examples": 150, "max_steps": 20},
    "nightly": {"examples": 2000, "max_steps": 40},
}

SCENARIOS = (
    "checkpoint",
    "ring wrap",
    "boundary with checkpoint",
    "boundary without checkpoint",
    "live == destination publish",
    "multi-column prefill reset",
    "prefix hit",
    "migration to a fresh slot",
    "migration to a copied slot",
    "padding row",
    "null column",
    *(f"conventions {c.label()}" for c in Conventions.all()),
)
"""Every scenario class a campaign must reach."""


@dataclass(frozen=True)
class CampaignConfig:
    """One campaign's parameters."""

    impl: str | None
    device: str
    examples: int
    max_steps: int
    seed: int
    jobs: int
    failures_dir: str
    level: str = "kernel"


def _settings(examples: int, max_steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=max_steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
        report_multiple_bugs=False,
    )


def _machine(config: CampaignConfig, target: Any, seed: int, conv: Conventions,
             stats: Statistics) -> type[ReplaySSMMachine]:
    import torch

    attrs = {"target": target, "device": torch.device(config.device), "level": config.level, "stats": stats,
             "last_trace": None, "conventions": (conv,)}
    return hypothesis_seed(seed)(type("Campaign", (ReplaySSMMachine,), attrs))


class SetupError(ValueError):
    """The campaign cannot start (device, target, level): not a finding."""


def examples_per_combination(examples: int) -> int:
    """Each convention combination runs the same number of examples, at least
    one: ``examples`` rounded up to a multiple of the combination count."""
    return max(1, -(-examples // len(Conventions.all())))


def check_device(device: str) -> None:
    """A :class:`SetupError` unless ``device`` is ``cpu``, or ``cuda`` with a CUDA device present."""
    import torch

    if device not in ("cpu", "cuda"):
        raise SetupError(f"--device must be cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise SetupError("--device cuda: this torch sees no CUDA device")


def check_setup(config: CampaignConfig) -> Any:
    """The campaign's target, or a :class:`SetupError` naming what is wrong
    with the device, the target or the level."""
    check_device(config.device)
    for name in ("examples", "max_steps", "jobs"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SetupError(f"{name} must be an int >= 1, got {value!r}")
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) or config.seed < 0:
        raise SetupError(f"seed must be an int >= 0, got {config.seed!r}")
    try:
        return load_target(config.impl, cuda=config.device == "cuda", level=config.level)
    except ValueError as e:
        raise SetupError(str(e)) from e


def run_worker(config: CampaignConfig, worker: int, target: Any = None) -> dict:
    """One process's share of a campaign: every ``jobs``-th convention
    combination, each with its share of the examples (so every combination is
    reached whatever the example count). Returns statistics and failures.
    ``target``: the loaded implementation (loaded here when None)."""
    target = target if target is not None else check_setup(config)
    combos = Conventions.all()
    per_combo = examples_per_combination(config.examples)
    stats, failures = Statistics(), []
    start = time.perf_counter()
    for n in range(worker, len(combos), config.jobs):
        seed = config.seed * 1000 + n
        machine = _machine(config, target, seed, combos[n], stats)
        try:
            run_state_machine_as_test(machine, settings=_settings(per_combo, config.max_steps))
        except Exception as e:  # noqa: BLE001 - any failure of the implementation is a finding
            failures.append(_save_failure(config, machine, seed, e))
            break
    return {"stats": asdict(stats), "failures": failures, "seconds": time.perf_counter() - start}


def _save_failure(config: CampaignConfig, machine: type[ReplaySSMMachine], seed: int, error: Exception) -> str:
    """Write the shrunk failing run as a trace (Hypothesis runs the shrunk
    example last, so the last run's trace is it); returns its path. A failure
    before that run recorded its parameters is the harness's, raised.
    ``#meta.failure`` says what failed: ``discrepancy``, ``invariant`` (see
    :class:`Failure`) or ``exception`` (raised while running an action)."""
    trace = machine.last_trace
    if trace is None:
        raise RuntimeError(f"the fuzz harness failed before its run recorded a trace (seed {seed}): "
                           f"{type(error).__name__}: {error}") from error
    trace["states"] = spec_states(trace)
    trace["#meta"].update({"seed": seed, "impl": config.impl or "replayssm.impl", "level": config.level,
                           "device": config.device, "error": f"{type(error).__name__}: {error}"[:4000],
                           "failure": error.kind if isinstance(error, Failure) else "exception"})
    folder = Path(config.failures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz-failure-seed{seed}.json"
    path.write_text(json.dumps(trace))
    return str(path)


def _merge(parts: list[dict]) -> Statistics:
    total = Statistics()
    for p in parts:
        s = p["stats"]
        total.examples += s["examples"]
        total.request_steps += s["request_steps"]
        total.kernel_seconds += s["kernel_seconds"]
        total.spec_seconds += s["spec_seconds"]
        for k, v in s["rules"].items():
            total.count(total.rules, k, v)
        for k, v in s["scenarios"].items():
            total.count(total.scenarios, k, v)
    return total


def run_campaign(config: CampaignConfig, *, out=sys.stdout) -> dict:
    """Run a campaign on ``jobs`` processes; report and return its summary."""
    start = time.perf_counter()
    target = check_setup(config)
    examples = examples_per_combination(config.examples) * len(Conventions.all())
    print(f"fuzzing {config.impl or 'replayssm.impl'} ({config.level} level) on {config.device}: {examples} examples "
          f"x <= {config.max_steps} steps, seed {config.seed}, {config.jobs} process(es)", file=out, flush=True)
    if config.jobs <= 1:
        parts = [run_worker(config, 0, target)]
    else:
        ctx = multiprocessing.get_context("spawn" if config.device == "cuda" else "fork")
        with ProcessPoolExecutor(config.jobs, mp_context=ctx) as pool:
            futures = [pool.submit(run_worker, config, w) for w in range(config.jobs)]
            parts = []
            for f in futures:
                parts.append(f.result())
                print(f"  worker done: {parts[-1]['stats']['examples']} examples, "
                      f"{parts[-1]['stats']['request_steps']} request-steps, {parts[-1]['seconds']:.1f} s",
                      file=out, flush=True)
    stats = _merge(parts)
    failures = [f for p in parts for f in p["failures"]]
    seconds = time.perf_counter() - start
    missing = [s for s in SCENARIOS if not stats.scenarios.get(s)]
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
    for path in failures:
        print(f"FAILURE saved to {path}", file=out)
    if missing:
        print(f"scenario classes never reached: {', '.join(missing)}", file=out)
    passed = not failures and not missing
    print("PASSED" if passed else "FAILED", file=out, flush=True)
    return {"passed": passed, "examples": stats.examples, "request_steps": stats.request_steps,
            "seconds": round(seconds, 3), "scenarios": stats.scenarios, "rules": stats.rules,
            "kernel_seconds": round(stats.kernel_seconds, 3), "spec_seconds": round(stats.spec_seconds, 3),
            "worker_seconds": round(sum(p["seconds"] for p in parts), 3),
            "failures": failures, "missing_scenarios": missing}


def spec_states(trace: dict) -> list[dict]:
    """The spec's state buffers after each action of a trace."""
    spec = SpecSide(Setup.from_json(trace["params"]))
    states = []
    for action in trace["actions"]:
        spec.run(action)
        states.append({k: v.tolist() for k, v in spec.state().items()})
    return states


def load_trace(path: str) -> dict:
    """A saved trace with launch actions, or a ``ValueError`` saying why not."""
    try:
        trace = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"not a JSON trace: {e}") from e
    if not isinstance(trace, dict) or not isinstance(trace.get("params"), dict) \
            or not isinstance(trace.get("actions"), list):
        raise ValueError("not a replayable trace: it needs a params object and an actions list")
    if not isinstance(trace.get("#meta", {}), dict):
        raise ValueError(f"trace.#meta must be an object, got {trace['#meta']!r}")
    for n, action in enumerate(trace["actions"]):
        caller = action.get("caller", []) if isinstance(action, dict) else None
        if not isinstance(caller, list) or not all(isinstance(c, str) for c in caller):
            raise ValueError(f"trace.actions[{n}] must be an object whose caller is a list of strings, got {action!r}")
    if "layers_per_group" not in trace["params"]:
        from .system_traces import launch_trace

        trace = launch_trace(trace)
    return trace


def replay(path: str, impl: str | None, device: str, level: str = "kernel") -> tuple[bool, str]:
    """Re-run a saved trace's launch actions on the spec and the
    implementation; ``(False, report)`` when the implementation differs from
    the spec or raises. A malformed trace, a bad target or a missing device
    is a ``ValueError``."""
    import torch

    check_device(device)
    trace = load_trace(path)
    try:
        setup = Setup.from_json(trace["params"])
    except (KeyError, TypeError) as e:
        raise ValueError(f"the trace's params are malformed: {type(e).__name__}: {e}") from e
    spec = SpecSide(setup)
    target = load_target(impl, cuda=device == "cuda", level=level)
    lines: list[str] = []

    def raised(where: str, e: Exception) -> tuple[bool, str]:
        lines.append(f"  the implementation raised {type(e).__name__}: {e}")
        lines.append(f"failure reproduced {where}")
        return False, "\n".join(lines)

    try:
        side = LEVELS[level](setup, target, torch.device(device))
    except Exception as e:  # noqa: BLE001 - the implementation's own failure is the finding
        return raised("while building the implementation's buffers", e)
    for n, action in enumerate(trace["actions"]):
        try:
            spec.run(action)
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise ValueError(f"action {n} of the trace is malformed: {type(e).__name__}: {e}") from e
        caller = "; ".join(action.get("caller", []))
        if action["name"] != "set_state":
            lines.append(f"step {n}: {action['name']} {caller}".rstrip())
        try:
            side.run(action)
        except Exception as e:  # noqa: BLE001 - the implementation's own failure is the finding
            return raised(f"at step {n}", e)
        wrong = compare(spec.state(), side.state())
        if wrong:
            lines += [f"  {d}" for d in wrong[:12]]
            lines.append(f"discrepancy reproduced at step {n}")
            return False, "\n".join(lines)
    lines.append("no discrepancy: the implementation agrees with the spec on every step")
    meta = trace.get("#meta", {})
    if meta.get("failure") == "invariant":
        lines.append("(this trace was saved for a broken invariant of the spec against the callers' view of "
                     f"FlashInfer, which replay does not check: {meta.get('error', '')})")
    elif meta.get("failure") == "exception":
        lines.append(f"(this trace was saved for an exception, {meta.get('error', '')}; the implementation "
                     "did not raise here, so it came from the harness or the spec side)")
    return True, "\n".join(lines)


def summary_json(result: dict, path: str) -> None:
    Path(path).write_text(json.dumps({k: result[k] for k in (
        "passed", "examples", "request_steps", "seconds", "kernel_seconds", "spec_seconds", "scenarios",
        "failures")}, indent=2))

