#!/usr/bin/env bash
# `fuzz --ray --device cuda` scaling over the GPUs of the device machine, in one bounded command:
#  1. for each GPU count N of GPU_COUNTS (default: 1 2 4 8 up to this machine's count), the same
#     campaign on a local Ray that sees the first N GPUs (CUDA_VISIBLE_DEVICES), one Ray task per GPU
#     (the job count comes from the GPUs), each with its own example database folder;
#  2. a planted kernel (the checkpoint's `% RING_BUFFER_LEN` written as a bit mask, as in
#     tests/fuzz/test_ray.py) on all the GPUs: it must be found (exit 1) and its trace must replay;
#  3. optionally the last count's campaign through the local process pool, for comparison;
#  4. LOGDIR/scaling.md: verified request-steps/s per count, the ratio to one GPU against the goal
#     0.9 x N, whether each task had its own GPU and every task used the shared database.
# Needs .gpu-ray/ (bash scripts/make_ray_bundle.sh); not the FlashInfer bundle (.gpu/).
#   [GPU_COUNTS="1 2 4"] [PLANTED_SECONDS=100] bash scripts/gpu_ray.sh [LOGDIR ($OUT)]
#       [SECONDS PER RAY CAMPAIGN (120)] [SECONDS FOR THE LOCAL POOL (0: not run)] [FUZZ OPTIONS...]
# The campaign: --profile nightly --systems 64 --examples 64 --max-steps 40 --seed 0; FUZZ OPTIONS
# are appended (the last of an option wins), e.g. --examples 512. A campaign cut by its limit is
# interrupted (SIGTERM): its partial summary still counts verified request-steps, marked in the table.
# Writes LOGDIR/fuzz_ray_N.json (+ .log) per count, LOGDIR/planted.json (+ .log, replay.txt),
# LOGDIR/fuzz_local.json (+ .log) when asked, LOGDIR/scaling.md, LOGDIR/env.txt.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
RAY_BUDGET=${2:-120}
LOCAL_BUDGET=${3:-0}
shift $(( $# < 3 ? $# : 3 ))
ROOT=$(pwd)
mkdir -p "$LOG" /tmp/rayb
LOG=$(cd "$LOG" && pwd)
tar -xJf "$ROOT/.gpu-ray/ray_bundle.tar.xz" -C /tmp/rayb ||
  { echo "no Ray bundle: run bash scripts/make_ray_bundle.sh and carry .gpu-ray"; exit 2; }
# The packages of pyproject.toml through a symlink shim, as scripts/gpu_env.sh maps them.
SHIM=/tmp/replayssm_shim_ray  # its own: gpu_env.sh's may be in use by a script beside it
rm -rf "$SHIM" && mkdir -p "$SHIM/replayssm"
for f in "$ROOT"/replayssm/*; do ln -s "$f" "$SHIM/replayssm/"; done
sed -n 's/^"replayssm\.\([a-z_]*\)" = "\([a-z_]*\)"$/\1 \2/p' "$ROOT/pyproject.toml" |
  while read -r name dir; do ln -s "$ROOT/$dir" "$SHIM/replayssm/$name"; done
export PYTHONPATH=$SHIM:/tmp/rayb:${PYTHONPATH:-} PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset TRITON_INTERPRET CUDA_VISIBLE_DEVICES REPLAYSSM_RAY_CPU_GPUS
cd /tmp
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ -z "${GPU_COUNTS:-}" ]; then
  GPU_COUNTS=$(for n in 1 2 4 8; do (( n <= GPUS )) && echo -n "$n "; done)
fi
for n in $GPU_COUNTS; do
  (( n >= 1 && n <= GPUS )) || { echo "GPU_COUNTS: $n is not between 1 and this machine's $GPUS GPU(s)"; exit 2; }
done
{ date -u; nvidia-smi -L; python3 -c "import ray, torch, triton, hypothesis; print('ray', ray.__version__, 'torch',
  torch.__version__, 'triton', triton.__version__, 'hypothesis', hypothesis.__version__)"
  echo "GPUs: $GPUS, counts: $GPU_COUNTS"; git -C "$ROOT" rev-parse HEAD 2>/dev/null; } > "$LOG/env.txt" 2>&1
cat "$LOG/env.txt"
FUZZ=(fuzz --device cuda --profile nightly --systems 64 --examples 64 --max-steps 40 --seed 0 --watchdog 120 "$@")
visible() { seq -s, 0 $(( $1 - 1 )); }  # the first N GPUs
for n in $GPU_COUNTS; do
  SECONDS=0
  CUDA_VISIBLE_DEVICES=$(visible "$n") timeout "$RAY_BUDGET" python3 -P -m replayssm.cli "${FUZZ[@]}" --ray \
    --json "$LOG/fuzz_ray_$n.json" --failures "$LOG/failures_ray_$n" --database "$LOG/db_$n" 2>&1 |
    tee "$LOG/fuzz_ray_$n.log"
  echo "fuzz --ray on $n GPU(s): exit ${PIPESTATUS[0]}, ${SECONDS}s"
done
LAST=$(echo $GPU_COUNTS | awk '{print $NF}')  # the largest count asked for, last
# The planted kernel, on the last count's GPUs: found through the tasks, its trace replayed.
mkdir -p /tmp/planted
ANCHOR='% RING_BUFFER_LEN'
if [ "$(grep -c -F "$ANCHOR" "$ROOT/impl/kernels.py")" = 1 ]; then
  sed "s/$ANCHOR/\& (RING_BUFFER_LEN - 1)/" "$ROOT/impl/kernels.py" > /tmp/planted/planted_kernels.py
  SECONDS=0
  CUDA_VISIBLE_DEVICES=$(visible "$LAST") timeout "${PLANTED_SECONDS:-100}" python3 -P -m replayssm.cli fuzz \
    --device cuda --impl /tmp/planted/planted_kernels.py --examples 64 --max-steps 12 --seed 0 --shrink-seconds 30 \
    --ray --json "$LOG/planted.json" --failures "$LOG/failures_planted" --database "$LOG/db_planted" 2>&1 |
    tee "$LOG/planted.log"
  echo "planted kernel on $LAST GPU(s): exit ${PIPESTATUS[0]} (1 expected), ${SECONDS}s"
  TRACE=$(python3 -c "import json, sys; f = json.load(open(sys.argv[1]))['findings']; print(f[0]['trace'] if f else '')" \
    "$LOG/planted.json" 2>/dev/null)
  if [ -n "$TRACE" ]; then
    python3 -P -m replayssm.cli replay "$TRACE" --impl /tmp/planted/planted_kernels.py --device cuda \
      > "$LOG/replay.txt" 2>&1
    echo "replay of $TRACE: exit $? (non-zero expected: the discrepancy reproduced)" | tee -a "$LOG/replay.txt"
  else
    echo "the planted kernel's campaign wrote no finding" | tee "$LOG/replay.txt"
  fi
else
  echo "planted kernel: the anchor '$ANCHOR' is not in impl/kernels.py exactly once; not run" | tee "$LOG/replay.txt"
fi
if (( LOCAL_BUDGET > 0 )); then
  SECONDS=0
  CUDA_VISIBLE_DEVICES=$(visible "$LAST") timeout "$LOCAL_BUDGET" python3 -P -m replayssm.cli "${FUZZ[@]}" \
    --jobs "$LAST" --json "$LOG/fuzz_local.json" --failures "$LOG/failures_local" 2>&1 | tee "$LOG/fuzz_local.log"
  echo "fuzz (local pool, $LAST GPU(s)): exit ${PIPESTATUS[0]}, ${SECONDS}s"
fi
python3 - "$LOG" $GPU_COUNTS <<'EOF' | tee "$LOG/scaling.md"
import json, re, sys
from pathlib import Path

log, counts = Path(sys.argv[1]), [int(n) for n in sys.argv[2:]]
print("| GPUs | status | tasks: GPU ids (CUDA_VISIBLE_DEVICES) | own GPU each | database used by all | request-steps "
      "| seconds (Ray start) | verified request-steps/s (without Ray's start) | x one GPU | goal 0.9 x N |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
base = None
for n in counts:
    try:
        s = json.loads((log / f"fuzz_ray_{n}.json").read_text())
    except (OSError, ValueError):
        print(f"| {n} | no summary | | | | | | | | |")
        continue
    start = re.search(r"started in ([0-9.]+) s", (log / f"fuzz_ray_{n}.log").read_text())
    ray_start = float(start.group(1)) if start else 0.0
    tasks = s.get("ray_tasks", [])
    ids = [tuple(t["gpus"]) for t in tasks]
    own = len(tasks) == n and all(len(i) == 1 for i in ids) and len(set(ids)) == n and all(
        t["cuda_visible_devices"] == t["gpus"][0] for t in tasks if t["gpus"])
    rate = s["request_steps"] / max(s["seconds"] - ray_start, 1e-9)
    base = rate if n == 1 else base
    ratio = f"{rate / base:.2f}" if base else ""
    goal = ("met" if base and rate / base >= 0.9 * n else "not met") if base else ""
    shown = ", ".join(f"{','.join(t['gpus'])} ({t['cuda_visible_devices']})" for t in tasks)
    print(f"| {n} | {s['status']} | {shown} | {'yes' if own else 'NO'} | "
          f"{'yes' if tasks and all(t['database_calls'] > 0 for t in tasks) else 'NO'} | {s['request_steps']} | "
          f"{s['seconds']:.1f} ({ray_start:.1f}) | {rate:,.0f} | {ratio} | {goal} |")
EOF
