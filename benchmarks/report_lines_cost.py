"""What naming each written cell's writer costs the HTML report: its timelines replayed with and without.

    python3 benchmarks/report_lines_cost.py [VERSION] [--examples N] [--repeat N] [--json FILE]

Reviews VERSION (default the corpus's A1) once with ``--json`` and its traces, loads it in a process of its
own as review does, then replays the document's timelines (what ``review --html`` adds after the verdicts:
:func:`replayssm.review.timeline.timelines`) ``--repeat`` times each way, interleaved: with each cell's
writer recorded (the watch on the target's stores, the ghost's writers) and without. Prints the wall time
of each replay and each way's median, as JSON (and writes it with ``--json``). The review itself is not
timed: recording is done only for the HTML page (``benchmarks/review_time.py`` times the review).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import bad_options, emit, header  # noqa: E402

from replayssm.spec import corpus  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("version", nargs="?", default=str(corpus.versions() / "A1.py"))
    p.add_argument("--examples", type=int, default=4, help="review --examples (default: 4)")
    p.add_argument("--repeat", type=int, default=5, help="replays each way, interleaved (default: 5)")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    error = bad_options({"--examples": args.examples, "--repeat": args.repeat}, args.json, out_flag="--json")
    if error:
        print(error, file=sys.stderr)
        return 2
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from replayssm.base.isolation import load_isolated
    from replayssm.review.campaign import Version
    from replayssm.review.target import detect
    from replayssm.review.timeline import timelines

    out = Path(tempfile.mkdtemp(prefix="report-lines-"))
    subprocess.run([sys.executable, "-m", "replayssm.cli", "review", args.version, "--examples", str(args.examples),
                    "--seed", "0", "--traces", str(out / "traces"), "--json", str(out / "review.json")],
                   capture_output=True, check=False)
    document = json.loads((out / "review.json").read_text())
    module = load_isolated(args.version, "HEAD")
    runs = []
    try:
        version = Version(document["verdicts"][0]["version"], args.version, module, detect(module, None))
        for _ in range(args.repeat):
            for writers in (True, False):
                start = time.perf_counter()
                drawn = timelines(document, {version.label: version}, None, writers=writers)
                runs.append({"writers": writers, "wall_seconds": round(time.perf_counter() - start, 3),
                             "timelines": len(drawn), "load_average_before": round(os.getloadavg()[0], 2)})
    finally:
        module.close()
    medians = {way: statistics.median(r["wall_seconds"] for r in runs if r["writers"] == (way == "with"))
               for way in ("with", "without")}
    emit({**header(), "benchmark": "report_lines_cost", "version": args.version, "examples": args.examples,
          "runs": runs, "median_wall_seconds": medians}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
