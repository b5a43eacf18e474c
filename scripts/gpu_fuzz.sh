#!/usr/bin/env bash
# The fuzzer on a CUDA machine, in one command: a nightly-profile campaign
# against the compiled implementation with SYSTEMS small systems per launch,
# then the throughput benchmark (the wide runner; the stateful campaign with
# 1 and SYSTEMS systems per launch, warmed up, interleaved).
#   bash scripts/gpu_fuzz.sh [LOGDIR] [CAMPAIGN_SECONDS] [SYSTEMS]
# CAMPAIGN_SECONDS 0 skips the campaign: the benchmark alone, bounded to
# BENCH_SECONDS (default 220 s; it writes LOGDIR/throughput.json after each
# run, so a cut-short call keeps what it measured). SYSTEMS defaults to 64.
# Benchmark sizes: STATEFUL_EXAMPLES (448), STATEFUL_STEPS (12), WIDE_ROWS (4096), WIDE_STEPS (40),
# 8 wide-runner processes;
# JOBS: campaign workers (default: min(14, nproc)); SYSTEMS_LIST: the --systems
# values benchmarked (default "1 SYSTEMS"); WARM: "--warm" (default) or "" (no
# untimed first run); REPEAT: timed rounds (1).
# The fuzz CLI imports z3: carry the z3-solver wheel in .gpu/whl (docs/gpu.md).
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
BUDGET=${2:-240}
SYSTEMS=${3:-64}
ROOT=$(pwd)
mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
source "$ROOT/scripts/gpu_env.sh" || exit 2
JOBS=${JOBS:-$(( $(nproc) > 14 ? 14 : $(nproc) ))}
cd /tmp
SECONDS=0
if [ "$BUDGET" -gt 0 ]; then
  timeout "$BUDGET" python3 -P -m replayssm.cli fuzz --device cuda --profile nightly --jobs "$JOBS" \
    --systems "$SYSTEMS" --failures "$LOG/failures" --json "$LOG/fuzz_nightly.json" 2>&1 | tee "$LOG/fuzz_nightly.log"
  echo "fuzz: exit ${PIPESTATUS[0]}, ${SECONDS}s"
fi
SECONDS=0
timeout "${BENCH_SECONDS:-220}" python3 -P "$ROOT/benchmarks/fuzz_throughput.py" --device cuda \
  --systems ${SYSTEMS_LIST:-1 $SYSTEMS} ${WARM---warm} --repeat "${REPEAT:-1}" --jobs "$JOBS" \
  --stateful-examples "${STATEFUL_EXAMPLES:-448}" \
  --stateful-steps "${STATEFUL_STEPS:-12}" --rows "${WIDE_ROWS:-4096}" --steps "${WIDE_STEPS:-40}" --wide-jobs 8 \
  --out "$LOG/throughput.json" 2>&1 | tee "$LOG/throughput.log"
echo "benchmark: exit ${PIPESTATUS[0]}, ${SECONDS}s"
