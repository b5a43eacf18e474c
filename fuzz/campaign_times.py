"""Where a campaign's wall time goes, per worker: start-up, busy, tail.

A campaign's rate from its start is its request-steps over its wall time; a
worker is busy only between its target being loaded and its last example's
end. :func:`time_split` splits each worker's share of the wall time into

* ``start_up``: the campaign's start to the worker's first example, itself
  ``before_start`` (the parent's set-up until it started this worker),
  ``spawn`` (the process's start and its imports, until the worker's body ran)
  and ``load`` (loading the target in its own process);
* ``busy``: the worker's examples (``first_launch``: how long its first launch
  took to land after the target was loaded: the first example's draws and its
  kernels' compile or load);
* ``tail``: its last example's end to the campaign's end (the wait for the
  slowest worker).

The three add up to the wall time for every worker. Marks are wall-clock
times (``time.time()``) of the parent (the campaign's start and end, each
worker's start) and of the worker (:func:`.campaign_worker.run_worker`'s
``clock``), all on one machine.
"""

from __future__ import annotations

import statistics

PARTS = ("before_start", "spawn", "load", "start_up", "first_launch", "busy", "tail")
"""The fields of each worker's split (seconds), in order."""


def time_split(start: float, end: float, started: dict[int, float], results: dict[int, dict]) -> dict:
    """The split of the wall time ``end - start`` for each worker whose
    ``results`` (a worker's returned dict, with its ``clock``) came back;
    ``started``: when the parent started each worker. Returns ``wall``,
    ``workers`` (one dict per worker with :data:`PARTS`, ``combinations`` and
    ``worker``), ``mean`` (each part's mean over those workers),
    ``busy_fraction`` (mean busy over wall) and ``workers_without_result``
    (stopped before they returned: not split)."""
    rows = []
    for w in sorted(results):
        clock = results[w]["clock"]
        row = {"worker": w, "before_start": started[w] - start, "spawn": clock["entered"] - started[w],
               "load": clock["ready"] - clock["entered"], "start_up": clock["ready"] - start,
               "first_launch": clock["first_launch"] - clock["ready"] if "first_launch" in clock else None,
               "busy": clock["end"] - clock["ready"], "tail": end - clock["end"]}
        rows.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
                    | {"combinations": results[w].get("combinations", [])})
    wall = end - start
    mean = {p: round(statistics.fmean(vals), 3) if (vals := [r[p] for r in rows if r[p] is not None]) else None
            for p in PARTS}
    return {"wall": round(wall, 3), "mean": mean,
            "busy_fraction": round(busy / wall, 4) if (busy := mean["busy"]) is not None and wall > 0 else None,
            "workers": rows, "workers_without_result": sorted(set(started) - set(results))}
