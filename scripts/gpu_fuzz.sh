#!/usr/bin/env bash
# The fuzzer on a CUDA machine, in one command: a nightly-profile campaign
# against the compiled implementation, then the throughput benchmark.
#   bash scripts/gpu_fuzz.sh [LOGDIR] [CAMPAIGN_SECONDS]
# The fuzz CLI imports z3: carry the z3-solver wheel in .gpu/whl (docs/gpu.md).
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
BUDGET=${2:-240}
ROOT=$(pwd)
mkdir -p "$LOG"
source "$ROOT/scripts/gpu_env.sh" || exit 2
JOBS=$(( $(nproc) > 14 ? 14 : $(nproc) ))
cd /tmp
SECONDS=0
timeout "$BUDGET" python3 -P -m replayssm.cli fuzz --device cuda --profile nightly --jobs "$JOBS" \
  --failures "$LOG/failures" --json "$LOG/fuzz_nightly.json" 2>&1 | tee "$LOG/fuzz_nightly.log"
echo "fuzz: exit ${PIPESTATUS[0]}, ${SECONDS}s"
SECONDS=0
python3 -P "$ROOT/benchmarks/fuzz_throughput.py" --device cuda --rows 4096 --steps 40 --jobs 8 \
  --stateful-examples 256 2>&1 | tee "$LOG/throughput.json"
echo "benchmark: ${SECONDS}s"
