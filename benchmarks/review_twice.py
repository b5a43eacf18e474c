"""Two reviews with the same seed give identical JSON verdicts (issue 36 item 5), shown on a set of versions.

    python3 benchmarks/review_twice.py [VERSION_OR_DIR ...] [--seed S] [--examples N] [--at-once]
                                       [--keep DIR] [--json FILE]

VERSION_OR_DIR defaults to the corpus's ``vllm-versions`` folder (``$REPLAYSSM_CORPUS``, default
``../shared/reference``). Runs ``replayssm-verify review VERSIONS --seed S --json rN.json --traces tN``
twice, each in its own process (``--at-once``: both at the same time, which also shows that the load does
not change a verdict), and compares the two reports' verdicts without what the clock decides
(``review/verdicts.py`` ``timeless``). Prints one JSON object: the header (date, machine, commit), each
run's wall and CPU seconds and exit code, each version's status and review seconds per run, whether the
verdicts are identical, and the versions that differ. ``--keep DIR`` keeps the first run's report and
traces there. Exit 0 when identical, 1 when not, 2 on bad options.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, header, write  # noqa: E402

from replayssm.review.verdicts import timeless  # noqa: E402
from replayssm.spec import corpus  # noqa: E402


def _command(versions: list[str], seed: int, examples: int | None, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "replayssm.cli", "review", *versions, "--seed", str(seed),
           "--json", str(out / "review.json"), "--traces", str(out / "traces")]
    return cmd + (["--examples", str(examples)] if examples is not None else [])


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _finish(proc: subprocess.Popen, start: float, cpu_before: float, out: Path) -> dict:
    """One run's result once it ends; ``cpu_before``: the children's CPU seconds before it was
    waited for (a child's time counts once it is waited for, so runs waited for in turn never mix)."""
    proc.wait()
    wall = time.perf_counter() - start
    report = out / "review.json"
    doc = json.loads(report.read_text()) if report.is_file() else {"verdicts": []}
    return {"exit_code": proc.returncode, "wall_seconds": round(wall, 1),
            "cpu_seconds": round(_cpu() - cpu_before, 1),
            "versions": {v["version"]: {"status": v["status"], "seconds": v["campaign"].get("total_seconds")}
                         for v in doc["verdicts"]},
            "verdicts": timeless(doc["verdicts"], str(out / "traces"))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("versions", nargs="*", default=[str(corpus.versions())])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=int, help="review --examples (default: the CLI's)")
    p.add_argument("--at-once", action="store_true", help="run the two reviews at the same time")
    p.add_argument("--keep", metavar="DIR", help="keep the first run's report and traces in DIR")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    error = bad_options({} if args.examples is None else {"--examples": args.examples}, args.json, out_flag="--json")
    if error is None and args.keep and not Path(args.keep).resolve().parent.is_dir():
        error = f"error: --keep's folder {Path(args.keep).resolve().parent} does not exist"
    if error:
        print(error, file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="review-twice-"))
    outs = [work / "r1", work / "r2"]
    runs: list[dict] = []
    started: list[tuple[subprocess.Popen, float, Path]] = []
    for out in outs:
        out.mkdir()
        proc = subprocess.Popen(_command(args.versions, args.seed, args.examples, out),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append((proc, time.perf_counter(), out))
        if not args.at_once:
            proc_, start, where = started.pop()
            runs.append(_finish(proc_, start, _cpu(), where))
    runs += [_finish(proc_, start, _cpu(), where) for proc_, start, where in started]
    first, second = (r.pop("verdicts") for r in runs)
    differ = sorted({a["version"] for a, b in zip(first, second) if a != b} | (
        {v["version"] for v in first + second} if len(first) != len(second) else set()))
    result = header(seed=args.seed, examples=args.examples, at_once=args.at_once, load_average=os.getloadavg())
    result.update(benchmark="review_twice", runs=runs, identical=first == second and bool(first), differ=differ)
    if args.keep:
        shutil.copytree(outs[0], args.keep, dirs_exist_ok=True)
    print(json.dumps(result, indent=2))
    if args.json:
        write(result, args.json)
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
