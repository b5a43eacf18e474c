"""Latency of one postprocess step (commit + plan + compaction) under CUDA graphs.

    python3 -P benchmarks/latency.py [--rows 1 64 256 1024] [--groups 1 4] [--layers 8]
                                     [--repeat 2] [--json FILE]
    python3 -P benchmarks/latency.py --check-only [--device cpu]   # equality checks only

For each size (batch rows x cache groups, ``--layers`` layers per group, align
mode, the v1 and v2 callers' conventions) it times, in one run and
interleaved: the reference's two kernels (``_postprocess_replayssm_kernel``
then ``_compact_replayssm_requests_kernel``, cut from the page
the corpus's ``vllm-replayssm_utils.txt``: ``$REPLAYSSM_CORPUS``, default ``../shared/reference``),
ours (the same two launches, through the facade ``replayssm.impl.replayssm_utils``), the row-blocked
kernel (``replayssm.impl.kernels_blocked``, the compaction in the same launch)
at several rows per program and warps (``blocked rR wW``), and at the
context's default with the compaction as its own launch (``... + compaction``);
and the floor of one and of two empty launches. Each figure is the
median of ``triton.testing.do_bench_cudagraph`` (the step captured in a graph
and replayed); the table is measured ``--repeat`` times to show the spread.
Every variant's result is checked against the reference's on the same inputs
before timing (trackers, plan, slot tables, work list); ``--check-only`` runs
only those checks, also on CPU under ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # provenance, also under python3 -P
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "impl"))  # the reference loader
from provenance import bad_options, header  # noqa: E402

if "--check-only" in sys.argv and "cpu" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported
import torch  # noqa: E402
import triton  # noqa: E402

BLOCK_SIZE, WINDOW, RING, COLS, MAX_T = 64, 16, 20, 64, 4
BLOCKED = [(16, 1), (32, 1), (32, 2), (64, 2), (128, 4), (1024, 8)]
"""(rows per program, warps) of the timed row-blocked variants."""
CALLERS = {"v1": dict(QUERY_METADATA_IS_CUMULATIVE=False, NUM_COMPUTED_IS_POST_STEP=False, HAS_IDX_MAPPING=False),
           "v2": dict(QUERY_METADATA_IS_CUMULATIVE=True, NUM_COMPUTED_IS_POST_STEP=True, HAS_IDX_MAPPING=True)}


def _step(rows: int, groups: int, layers: int, caller: str, seed: int, device: str):
    """Buffers and inputs of one mixed step: 7 in 8 rows decode (T = 4, random
    accepted count, some crossing a block boundary), the rest prefill chunks
    over several blocks; every row owns its slots."""
    g = torch.Generator().manual_seed(seed)
    dev = torch.device(device)
    i32 = dict(dtype=torch.int32)
    slots = 1 + torch.arange(rows * COLS, **i32).reshape(rows, COLS)
    tables = [slots.clone().to(dev) for _ in range(groups)]
    num_slots = rows * COLS + 1
    prefill = torch.rand(rows, generator=g) < 0.125
    computed = torch.randint(BLOCK_SIZE, (COLS - 8) * BLOCK_SIZE, (rows,), generator=g, **i32)
    length = torch.where(prefill, torch.randint(1, 4 * BLOCK_SIZE, (rows,), generator=g, **i32),
                         torch.full((rows,), MAX_T, **i32))
    accepted = torch.randint(1, MAX_T + 1, (rows,), generator=g, **i32)
    after = computed + torch.where(prefill, length, accepted)
    live = (after + BLOCK_SIZE - 1) // BLOCK_SIZE - 1
    v2 = caller == "v2"
    inputs = dict(
        idx_mapping=torch.arange(rows, **i32) if v2 else None,
        query_metadata=torch.cat([torch.zeros(1, **i32), length.cumsum(0).to(torch.int32)]) if v2 else length,
        num_computed_tokens=after if v2 else computed,
        num_accepted_tokens=accepted, is_prefilling=prefill, live_cols=live,
    )
    inputs = {k: None if v is None else v.to(dev) for k, v in inputs.items()}
    trackers = [(torch.randint(0, RING, (num_slots,), generator=g, **i32).to(dev),
                 torch.randint(0, WINDOW - MAX_T + 1, (num_slots,), generator=g, **i32).to(dev))
                for _ in range(groups)]
    packed = [torch.zeros(layers * rows, device=dev, **i32) for _ in range(2 * groups)]
    plan = [torch.zeros(rows, device=dev, **i32), torch.full((rows,), -1, device=dev, **i32),
            torch.full((rows,), -1, device=dev, **i32)]
    return tables, trackers, packed, plan, inputs


class Step:
    """One step's buffers and the launches of each variant on them."""

    def __init__(self, rows: int, groups: int, layers: int, caller: str, device: str, seed: int = 0) -> None:
        self.rows, self.groups, self.caller = rows, groups, caller
        tables, trackers, packed, plan, self.inputs = _step(rows, groups, layers, caller, seed, device)
        self.initial = [t.clone() for pair in trackers for t in pair]
        self.tables, self.trackers, self.packed, self.plan = tables, trackers, packed, plan
        dev = tables[0].device

        def ptrs(ts):
            return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64, device=dev)

        self.table_ptrs = ptrs(tables)
        self.strides = torch.tensor([t.stride(0) for t in tables], dtype=torch.int64, device=dev)
        self.start_ptrs = ptrs([p[0] for p in trackers])
        self.committed_ptrs = ptrs([p[1] for p in trackers])
        self.src_ptrs = ptrs(packed[:groups])
        self.dst_ptrs = ptrs(packed[groups:])
        self.num_layers = torch.full((groups,), layers, dtype=torch.int32, device=dev)
        self.constexprs = dict(MAX_NUM_REQS=rows, MAMBA_BLOCK_SIZE=BLOCK_SIZE, LOGICAL_WINDOW=WINDOW,
                               RING_BUFFER_LEN=RING, PAD_SLOT_ID=0, MATERIALIZE_PREFIXES=True,
                               LIVE_COL_IS_ZERO=False, **CALLERS[caller])

    def _args(self) -> list:
        i = self.inputs
        return [i["idx_mapping"], i["query_metadata"], i["num_computed_tokens"], i["num_accepted_tokens"],
                i["is_prefilling"], i["live_cols"], self.table_ptrs, self.start_ptrs, self.committed_ptrs,
                self.src_ptrs, self.dst_ptrs, self.plan[0], self.plan[1]]

    def two_launches(self, module):
        """The reference's launch sequence over ``module``'s two kernels."""
        args = self._args()

        def run() -> None:
            module._postprocess_replayssm_kernel[(self.rows, self.groups)](
                *args, self.strides, self.num_layers, **self.constexprs)
            module._compact_replayssm_requests_kernel[(1,)](
                self.plan[1], self.plan[2], self.rows,
                MAX_NUM_REQS=self.rows, BLOCK_SIZE=triton.next_power_of_2(self.rows))
        return run

    def blocked(self, block: int, warps: int, fused: bool = True):
        """The row-blocked kernel, the compaction in the same launch or after it."""
        from replayssm.impl import replayssm_utils as ours
        from replayssm.impl.kernels_blocked import postprocess_replayssm_blocked_kernel

        args = self._args()

        def run() -> None:
            postprocess_replayssm_blocked_kernel[(triton.cdiv(self.rows, block) + fused, self.groups)](
                *args, self.plan[2], self.strides, self.num_layers, self.rows, **self.constexprs,
                ROWS_PER_PROGRAM=block, COMPACT=fused, COMPACT_BLOCK=triton.next_power_of_2(self.rows),
                num_warps=warps)
            if not fused:
                ours._compact_replayssm_requests_kernel[(1,)](
                    self.plan[1], self.plan[2], self.rows,
                    MAX_NUM_REQS=self.rows, BLOCK_SIZE=triton.next_power_of_2(self.rows))
        return run

    def reset(self) -> None:
        for t, t0 in zip([t for pair in self.trackers for t in pair], self.initial):
            t.copy_(t0)

    def result(self) -> list:
        return [t.clone() for t in [*[t for pair in self.trackers for t in pair], *self.packed, *self.plan]]


@triton.jit
def _nothing(x) -> None:
    """An empty program: the launch floor."""


def _empty_launches(n: int):
    def run() -> None:
        for _ in range(n):
            _nothing[(1,)](0)
    return run


def variants(step: Step, reference) -> dict:
    """The timed variants of one step, by name."""
    from replayssm.impl import replayssm_utils as ours  # the reference's names
    from replayssm.impl.kernels_blocked import DEFAULT_ROWS_PER_PROGRAM, num_warps_for

    out = {"reference": step.two_launches(reference), "ours": step.two_launches(ours)}
    for block, warps in BLOCKED:
        out[f"blocked r{block}w{warps}"] = step.blocked(block, warps)
    rows = DEFAULT_ROWS_PER_PROGRAM
    out[f"blocked r{rows}w{num_warps_for(rows)} + compaction"] = step.blocked(rows, num_warps_for(rows), fused=False)
    out["floor: 1 empty launch"] = _empty_launches(1)
    out["floor: 2 empty launches"] = _empty_launches(2)
    return out


def check(step: Step, runs: dict) -> None:
    """Every variant leaves the same buffers as the reference from the same start."""
    want = None
    for name, run in runs.items():
        if name.startswith("floor"):
            continue
        step.reset()
        run()
        got = step.result()
        if want is None:
            want = got
        elif not all(torch.equal(a, b) for a, b in zip(want, got)):
            raise SystemExit(f"{name} differs from the reference at {step.rows} x {step.groups} ({step.caller})")


def measure(args: argparse.Namespace) -> dict:
    from triton.testing import do_bench_cudagraph

    import impl_reference_kernels

    reference = impl_reference_kernels.load()
    table = []
    for repeat in range(args.repeat):
        for rows in args.rows:
            for groups in args.groups:
                for caller in CALLERS:
                    step = Step(rows, groups, args.layers, caller, args.device)
                    runs = variants(step, reference)
                    check(step, runs)
                    if args.check_only:
                        print(f"{rows} x {groups} ({caller}): every variant equals the reference", flush=True)
                        continue
                    entry = {"repeat": repeat, "rows": rows, "groups": groups, "layers": args.layers,
                             "caller": caller}
                    for name, run in runs.items():
                        entry[name] = round(1000 * do_bench_cudagraph(run, rep=args.rep_ms, return_mode="median"), 3)
                    table.append(entry)
                    print(json.dumps(entry), file=sys.stderr, flush=True)
    if args.check_only:
        return {}
    return {**header(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, triton=triton.__version__),
            "unit": "us per step (median of CUDA-graph replays)", "table": table}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 64, 256, 1024])
    p.add_argument("--groups", type=int, nargs="+", default=[1, 4])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--rep-ms", type=int, default=200)
    p.add_argument("--json", default=None)
    p.add_argument("--check-only", action="store_true", help="only check every variant against the reference")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: --check-only, interpreted")
    args = p.parse_args()
    if args.device == "cpu" and not args.check_only:
        print("error: --device cpu needs --check-only (timings need CUDA graphs)", file=sys.stderr)
        return 2
    for name in ("rows", "groups"):
        bad = [v for v in getattr(args, name) if not 1 <= v <= 4096]
        if bad:
            print(f"error: --{name} values must be in [1, 4096], got {bad}", file=sys.stderr)
            return 2
    error = bad_options({"--layers": args.layers, "--repeat": args.repeat, "--rep-ms": args.rep_ms}, args.json,
                        out_flag="--json")
    if error:
        print(error, file=sys.stderr)
        return 2
    if not torch.cuda.is_available() and args.device == "cuda":
        print("error: --device cuda: this torch sees no CUDA device", file=sys.stderr)
        return 2
    out = measure(args)
    if args.check_only:
        return 0
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    names = [k for k in out["table"][0] if k not in ("repeat", "rows", "groups", "layers", "caller")]
    print("rows x groups caller | " + " | ".join(names))
    for e in out["table"]:
        print(f"{e['rows']:>4} x {e['groups']} {e['caller']} r{e['repeat']} | "
              + " | ".join(f"{e.get(n, float('nan')):.2f}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
