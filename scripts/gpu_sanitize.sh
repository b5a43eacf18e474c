#!/usr/bin/env bash
# Bounded fuzz campaigns under compute-sanitizer memcheck and racecheck, with
# the sanitizers' teeth first: a planted out-of-bounds store (CUDA C and
# Triton) must be reported by memcheck and a planted shared-memory race by
# racecheck, else the 0-error runs prove nothing.
#   bash scripts/gpu_sanitize.sh [LOGDIR] [SECONDS_PER_CAMPAIGN]
# Every run keeps PyTorch from caching allocations (PYTORCH_NO_CUDA_MEMORY_CACHING=1):
# with the caching allocator a store past a tensor lands inside a larger
# cudaMalloc block and memcheck cannot see it.
# Logs: sanitize_*.log; sanitize.txt (one line per run: tool, what, errors).
# The fuzz CLI imports z3 (replayssm.verify): carry its wheel in .gpu/whl.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
BUDGET=${2:-100}
ROOT=$(pwd)
mkdir -p "$LOG"
source "$ROOT/scripts/gpu_env.sh" || exit 2
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
SUMMARY=$LOG/sanitize.txt
: >"$SUMMARY"
SAN="compute-sanitizer --target-processes all --print-limit 20"

# The summary's error count; without one (stopped at the budget) the errors
# reported so far, marked as such.
errors() {
  local n; n=$(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+' "$1" | tail -1 | grep -Eo '[0-9]+$')
  [ -n "$n" ] && { echo "$n"; return; }
  echo "$(grep -cE '^========= +(Invalid|Race|Error|Warning)' "$1")-so-far"
}
record() {  # tool, name, log, expectation (errors|clean)
  local n; n=$(errors "$3")
  local verdict=ok
  # A campaign that verified no request-step launched nothing worth a verdict.
  if [ "$4" = clean ] && grep -qE ' 0 request-steps in ' "$3"; then n="$n (vacuous: 0 request-steps)"; fi
  if [ "$4" = errors ] && { [ "$n" = 0 ] || [ "$n" = 0-so-far ]; }; then verdict=MISSED; fi
  if [ "$4" = clean ] && [ "$n" != 0 ]; then verdict=FAILED; fi
  case "$n" in *vacuous*) verdict=VACUOUS ;; esac
  if [ "$4" = clean ] && [ "$n" = 0-so-far ]; then verdict="stopped at the budget, 0 errors so far"; fi
  echo "$1 | $2 | errors: $n | expected: $4 | $verdict" | tee -a "$SUMMARY"
}

nvcc -O1 -o /tmp/planted_race "$ROOT/tests/gpu/planted_race.cu" || { echo "nvcc failed"; exit 2; }
$SAN --tool memcheck /tmp/planted_race oob >"$LOG/sanitize_planted_oob_cuda.log" 2>&1
record memcheck "planted out-of-bounds store (CUDA C)" "$LOG/sanitize_planted_oob_cuda.log" errors
cd /tmp
$SAN --tool memcheck python3 -P "$ROOT/tests/gpu/planted_oob_triton.py" >"$LOG/sanitize_planted_oob_triton.log" 2>&1
record memcheck "planted out-of-bounds store (Triton)" "$LOG/sanitize_planted_oob_triton.log" errors
$SAN --tool racecheck /tmp/planted_race race >"$LOG/sanitize_planted_race.log" 2>&1
record racecheck "planted shared-memory race (CUDA C)" "$LOG/sanitize_planted_race.log" errors

# The campaigns: every convention combination 5 times, our kernels and
# the row-blocked module's context (its launch holds the work-list scan).
for tool in memcheck racecheck; do
  for target in "replayssm.impl.replayssm_utils kernel" "replayssm.impl.replayssm_utils_blocked context"; do
    set -- $target
    name=$tool-${1##*.}-$2
    SECONDS=0
    timeout "$BUDGET" $SAN --tool "$tool" python3 -P -m replayssm.cli fuzz --device cuda --impl "$1" --level "$2" \
      --examples 160 --max-steps 8 --jobs 1 --failures "$LOG/failures-$name" --json "$LOG/fuzz-$name.json" \
      >"$LOG/sanitize_$name.log" 2>&1
    echo "$name: exit $?, ${SECONDS}s; $(grep -E '^[0-9]+ state-machine runs' "$LOG/sanitize_$name.log" | cut -c1-160)"
    record "$tool" "fuzz campaign $1 ($2 level), 160 examples x <= 8 steps" "$LOG/sanitize_$name.log" clean
  done
done
cd "$ROOT"
! grep -qE 'MISSED|FAILED|VACUOUS' "$SUMMARY"
