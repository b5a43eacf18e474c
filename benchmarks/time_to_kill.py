"""Time to kill: seconds from starting ``fuzz`` to its first finding, per planted kernel.

    python3 -P benchmarks/time_to_kill.py [--seeds 0] [--jobs 2] [--only NAME] [--systems K]
        [--tree LABEL=PYTHON --tree LABEL=PYTHON | --sandbox off --sandbox require]
        [--out docs/results/time_to_kill.json]

Each planted kernel is a copy of ``impl/kernels.py`` with a one-line change,
written to a temporary folder and fuzzed as an ``--impl`` file with the ci
profile (its default watchdog and shrink limit) in a fresh
``replayssm-verify fuzz`` process. Measured per run: the wall time of that
process (start-up, fuzzing, shrinking and saving the trace: the campaign stops
at its first finding), the finding's time inside the campaign, its kind and
its trace's length. A kernel the campaign does not kill counts as the
process's wall time, marked ``killed: false``. Prints and writes one JSON
object with every run, the median and the maximum against the goals (median
<= 10 s, max <= 60 s). Run it on a quiet machine: the figures are wall times.

With ``--tree LABEL=PYTHON`` (twice or more) each run is made once per tree,
by the interpreter that imports it (a worktree with its own editable
install), the trees alternating within each (kernel, seed) and their order
turning from one to the next, so that a load that comes and goes falls on
every tree alike; the report then has each tree's median, maximum and
kernels not killed (``trees``). The planted kernels are this tree's.

With ``--sandbox SETTING`` (twice or more: ``off``, ``auto``, ``require``)
the same alternation compares this tree under each ``$REPLAYSSM_SANDBOX``
(``base/sandbox.py``): what the sandbox costs (each setting a "tree" of the
report, labelled ``sandbox=SETTING``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the sibling module, also when this folder is off sys.path (python3 -P, as the GPU scripts run Python)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import REPO, bad_options, emit, header, parse_trees, write  # noqa: E402

PLANTED = {
    "store one past the active list": (
        "    in_capacity = lane < MAX_NUM_REQS\n", "    in_capacity = lane <= MAX_NUM_REQS\n"),
    "write into the query metadata": (
        "    computed = tl.load(num_computed_tokens + req)\n",
        "    computed = tl.load(num_computed_tokens + req)\n    tl.store(query_metadata + batch, computed + 1)\n"),
    "write into a block table": (
        "    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)\n",
        "    valid_live = valid_live_col & (live_slot != PAD_SLOT_ID)\n"
        "    tl.store(block_table_row + live_col, PAD_SLOT_ID, mask=valid_live)\n"),
    "prefill reset one column past the row": (
        "last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE) - 1, 0)",
        "last_col = tl.maximum(tl.cdiv(computed_after, MAMBA_BLOCK_SIZE), 0)"),
    "hang": ("    valid_req = req >= 0\n", "    valid_req = req >= 0\n    while True: pass\n"),
    "os._exit": ("    valid_req = req >= 0\n", '    valid_req = req >= 0; __import__("os")._exit(1)\n'),
    "segfault": ("    valid_req = req >= 0\n", '    valid_req = req >= 0; __import__("ctypes").string_at(0)\n'),
    "reversed active list": (
        "tl.store(active_request_indices + running_count - 1, lane, mask=is_active)",
        "tl.store(active_request_indices + count - running_count, lane, mask=is_active)"),
    "migration skips the ring start": (
        "    tl.store(ring_start + dst_slot, start, mask=changed)\n", ""),
    "ring wrap by bit mask": ("% RING_BUFFER_LEN", "& (RING_BUFFER_LEN - 1)"),
}
"""Planted kernels: name -> (line of impl/kernels.py, its replacement). The
memory bugs are those of tests/fuzz/test_guards.py, the faults those of
tests/fuzz/test_faults.py, the last three the bugs planted before them."""

SANDBOX_SETTINGS = ("off", "auto", "require")
"""``$REPLAYSSM_SANDBOX``'s values (``base/sandbox.CHOICES``)."""

GOAL_MEDIAN_SECONDS = 10.0
GOAL_MAX_SECONDS = 60.0


def planted_file(folder: Path, name: str) -> Path:
    """The kernel module with the named change, as an --impl file in ``folder``."""
    old, new = PLANTED[name]
    source = (REPO / "impl" / "kernels.py").read_text()
    if source.count(old) != 1:
        raise SystemExit(f"error: the anchor of planted kernel {name!r} is not in impl/kernels.py exactly once: "
                         f"{old!r}")
    path = folder / f"planted_{len(list(folder.iterdir()))}.py"
    path.write_text(source.replace(old, new))
    return path


def run_one(name: str, seed: int, jobs: int, limit: float, systems: int = 1, python: str = sys.executable,
            env: dict[str, str] | None = None) -> dict:
    """One campaign against one planted kernel, timed from the process's start (``python``'s tree; ``env``:
    variables set for it)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        impl = planted_file(folder, name)
        summary = folder / "summary.json"
        command = [python, "-m", "replayssm.cli", "fuzz", "--impl", str(impl), "--profile", "ci",
                   "--seed", str(seed), "--jobs", str(jobs), "--json", str(summary), "--failures",
                   str(folder / "failures"), "--systems", str(systems)]
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=limit,
                                  env={**os.environ, **(env or {})})
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
        wall = time.perf_counter() - start
        result = json.loads(summary.read_text()) if summary.exists() else {}
        saved = [Path(f) for f in result.get("failures", []) if Path(f).exists()]
        lockstep = json.loads(saved[0].read_text())["#meta"].get("lockstep") if saved else None
    finding = (result.get("findings") or [None])[0]
    return {"planted": name, "seed": seed, "seconds": round(wall, 2), "exit_code": code, "killed": code == 1,
            "kind": finding["kind"] if finding else None,
            "finding_seconds": finding["seconds"] if finding else None,
            "trace_actions": finding["actions"] if finding else None,
            "shrunk": finding["shrunk"] if finding else None,
            "reason": finding["reason"] if finding else None,
            "lockstep": lockstep}


def summary(runs: list[dict]) -> dict:
    """The median and maximum seconds of ``runs``, the kernels they did not kill, and the goals."""
    seconds = [r["seconds"] for r in runs]
    return {"median_seconds": statistics.median(seconds), "max_seconds": max(seconds),
            "not_killed": [r["planted"] for r in runs if not r["killed"]],
            "goals": {"median_seconds": GOAL_MEDIAN_SECONDS, "max_seconds": GOAL_MAX_SECONDS,
                      "met": statistics.median(seconds) <= GOAL_MEDIAN_SECONDS and max(seconds) <= GOAL_MAX_SECONDS
                      and all(r["killed"] for r in runs)}}


def report(runs: list[dict], trees: dict[str, str], torch_version: str, triton_version: str) -> dict:
    """The JSON report of ``runs``: header, runs, their summary and (several trees) each tree's."""
    out = {**header(torch=torch_version, triton=triton_version), "runs": runs, **summary(runs)}
    if len(trees) > 1:
        out["trees"] = {label: {"python": python, **summary([r for r in runs if r.get("tree") == label])}
                        for label, python in trees.items() if any(r.get("tree") == label for r in runs)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="campaign seeds (default: 0, the ci default)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", metavar="NAME", help="the planted kernels whose name contains NAME")
    p.add_argument("--limit", type=float, default=300.0, help="seconds before a campaign is stopped as not killed")
    p.add_argument("--out", metavar="FILE", help="also write the JSON here")
    p.add_argument("--systems", type=int, default=1, help="fuzz --systems K: small systems per launch (default 1)")
    p.add_argument("--tree", action="append", default=[], metavar="LABEL=PYTHON",
                   help="a tree to time, by the interpreter that imports it (give two or more; default: this one)")
    p.add_argument("--sandbox", action="append", default=[], choices=SANDBOX_SETTINGS,
                   help="a $REPLAYSSM_SANDBOX setting to time this tree under (give two or more, not with --tree)")
    args = p.parse_args()
    names = [n for n in PLANTED if args.only is None or args.only in n]
    if not names:
        print(f"error: --only {args.only!r} matches none of {list(PLANTED)}", file=sys.stderr)
        return 2
    error = bad_options({"--jobs": args.jobs}, args.out)
    if error is None and args.limit <= 0:
        error = f"error: --limit must be > 0 seconds, got {args.limit}"
    if error is None and any(s < 0 for s in args.seeds):
        error = f"error: --seeds must be >= 0, got {args.seeds}"
    if error is None and not 1 <= args.systems <= 256:
        error = f"error: --systems must be in [1, 256], got {args.systems}"
    trees = parse_trees(args.tree) if args.tree else {"": sys.executable}
    if error is None and isinstance(trees, str):
        error = trees
    if error is None and args.sandbox:
        error = ("error: --sandbox and --tree are not given together (compare trees, or settings of this one)"
                 if args.tree else "error: give --sandbox at least twice, each setting once (e.g. --sandbox off "
                 "--sandbox require)" if len(set(args.sandbox)) < 2 or len(set(args.sandbox)) != len(args.sandbox)
                 else None)
        trees = {f"sandbox={s}": sys.executable for s in args.sandbox}
    if error:
        print(error, file=sys.stderr)
        return 2
    assert isinstance(trees, dict)
    import torch
    import triton

    runs = []
    for name in names:
        for seed in args.seeds:
            order = list(trees.items())
            turn = len(runs) // len(order) % len(order)
            for label, python in order[turn:] + order[:turn]:
                env = {"REPLAYSSM_SANDBOX": label.removeprefix("sandbox=")} if args.sandbox else None
                runs.append({**run_one(name, seed, args.jobs, args.limit, args.systems, python, env),
                             **({"tree": label} if label else {})})
                r = runs[-1]
                print(f"{label + ' ' if label else ''}{name:<40} seed {seed}: {r['seconds']:6.1f} s  "
                      f"{r['kind'] or 'NOT KILLED'} {r['reason'] or ''}"[:160], file=sys.stderr, flush=True)
                if args.out:  # an interrupted run keeps what it measured
                    write({**report(runs, trees, torch.__version__, triton.__version__), "complete": False}, args.out)
    emit({**report(runs, trees, torch.__version__, triton.__version__), "complete": True}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
