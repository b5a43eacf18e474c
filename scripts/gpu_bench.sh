#!/usr/bin/env bash
# Kernel latency on a CUDA machine, in one command: the postprocess step of the
# reference, ours and the row-blocked kernel under CUDA graphs
# (benchmarks/latency.py; needs the corpus in .gpu/reference, see gpu_tests.sh).
#   bash scripts/gpu_bench.sh [LOGDIR]          # LOGDIR: $OUT, else out/gpu
# Logs: latency.json (every figure), latency.log (the table).
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
ROOT=$(pwd)
mkdir -p "$LOG"
source "$ROOT/scripts/gpu_env.sh" || exit 2
export REPLAYSSM_CORPUS=$ROOT/.gpu/reference
[ -f "$REPLAYSSM_CORPUS/vllm-replayssm_utils.txt" ] || { echo "no reference page in $REPLAYSSM_CORPUS"; exit 2; }
SECONDS=0
python3 -P "$ROOT/benchmarks/latency.py" --json "$LOG/latency.json" 2>"$LOG/latency.err" | tee "$LOG/latency.log"
status=${PIPESTATUS[0]}
echo "latency: exit $status, ${SECONDS}s"
[ "$status" = 0 ] || tail -20 "$LOG/latency.err"
exit "$status"
