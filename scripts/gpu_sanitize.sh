#!/usr/bin/env bash
# Bounded fuzz campaigns under compute-sanitizer memcheck and racecheck, with
# the sanitizers' teeth first: a planted out-of-bounds store (CUDA C and
# Triton) must be reported by memcheck and a planted shared-memory race by
# racecheck, else the 0-error runs prove nothing.
#   bash scripts/gpu_sanitize.sh [LOGDIR] [SECONDS_PER_CAMPAIGN] [JOBS]
# Four campaigns (memcheck and racecheck x our kernels at kernel level and the
# row-blocked module at context level), one after the other, each 160 examples
# x <= 8 steps with JOBS worker processes (default 8) under one sanitizer; each
# campaign's fuzz process gets SECONDS (default 35) and is then stopped with
# SIGTERM (timeout runs inside the sanitizer), so it prints its partial summary
# with the request-steps it verified and the sanitizer its error summary. On
# CPU the same campaign reaches ~1,000 request-steps (160 x 8 examples; ~170
# in its first 20 s with one process); a campaign with none is VACUOUS.
# Whole script: set-up ~30 s + teeth ~40 s + 4 x (SECONDS + ~20 s) = ~5 min.
# Every run keeps PyTorch from caching allocations (PYTORCH_NO_CUDA_MEMORY_CACHING=1):
# with the caching allocator a store past a tensor lands inside a larger
# cudaMalloc block and memcheck cannot see it.
# Comes back (few files: the device tool brings back a limited number):
# sanitize.txt (one line per run: tool, what, errors, request-steps, verdict),
# sanitize.log (every run's output), sanitize_runs.tar.gz (the per-run logs,
# fuzz summaries and failure folders).
# The fuzz CLI imports z3 (replayssm.verify): carry its wheel in .gpu/whl.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
BUDGET=${2:-35}
JOBS=${3:-8}
ROOT=$(pwd)
mkdir -p "$LOG" && LOG=$(cd "$LOG" && pwd)  # absolute: the runs start in /tmp
source "$ROOT/scripts/gpu_env.sh" || exit 2
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
SUMMARY=$LOG/sanitize.txt
RUNS=/tmp/sanitize_runs  # per-run files, packed at the end
rm -rf "$RUNS" && mkdir -p "$RUNS"
: >"$SUMMARY"
SAN="compute-sanitizer --target-processes all --print-limit 20"

# The summary's error count; without one (stopped at the budget) the errors
# reported so far, marked as such.
errors() {
  local n; n=$(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+' "$1" | tail -1 | grep -Eo '[0-9]+$')
  [ -n "$n" ] && { echo "$n"; return; }
  echo "$(grep -cE '^========= +(Invalid|Race|Error|Warning)' "$1")-so-far"
}
record() {  # tool, name, log (a tooth: errors expected)
  local n; n=$(errors "$3")
  local verdict=ok
  if [ "$n" = 0 ] || [ "$n" = 0-so-far ]; then verdict=MISSED; fi
  echo "$1 | $2 | errors: $n | expected: errors | $verdict" | tee -a "$SUMMARY"
}

SECONDS=0
nvcc -O1 -o /tmp/planted_race "$ROOT/tests/gpu/planted_race.cu" || { echo "nvcc failed"; exit 2; }
$SAN --tool memcheck /tmp/planted_race oob >"$RUNS/sanitize_planted_oob_cuda.log" 2>&1
record memcheck "planted out-of-bounds store (CUDA C)" "$RUNS/sanitize_planted_oob_cuda.log"
cd /tmp
$SAN --tool memcheck python3 -P "$ROOT/tests/gpu/planted_oob_triton.py" >"$RUNS/sanitize_planted_oob_triton.log" 2>&1
record memcheck "planted out-of-bounds store (Triton)" "$RUNS/sanitize_planted_oob_triton.log"
$SAN --tool racecheck /tmp/planted_race race >"$RUNS/sanitize_planted_race.log" 2>&1
record racecheck "planted shared-memory race (CUDA C)" "$RUNS/sanitize_planted_race.log"

echo "teeth done: ${SECONDS}s"

# A campaign's verdict: its sanitizer errors, and the request-steps its fuzz
# summary (complete, or partial after the SIGTERM at the budget) counts.
campaign_record() {  # tool, what, log, json
  local n; n=$(errors "$3")
  local steps; steps=$(python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
print(d['request_steps'], d['examples'], d['exit_code'], 'stopped at the budget' if d['interrupted'] else 'complete')" \
    "$4" 2>/dev/null) || steps="0 0 none no-summary"
  set -- "$1" "$2" "$n" $steps
  local verdict=ok
  case "$3" in 0) ;; *-so-far) verdict="FAILED (no sanitizer summary)" ;; *) verdict=FAILED ;; esac
  [ "$6" = 1 ] && verdict="FAILED (fuzz finding)"
  [ "$4" = 0 ] && verdict=VACUOUS
  echo "$1 | $2 | errors: $3 | $4 request-steps, $5 runs, fuzz exit $6, ${*:7} | expected: clean | $verdict" | tee -a "$SUMMARY"
}

# The campaigns: our kernels (kernel level) and the row-blocked module's
# context (its launch holds the work-list scan), combinations in the
# campaign's pair-covering order until the budget. The context's materialize
# is the torch reference here: FlashInfer's would first JIT-build a module for
# the harness's 1 head x 2 x 2 slots (~35 s of the budget; it is not ours, and
# gpu_numeric.sh runs it at FlashInfer's real dims).
export REPLAYSSM_MATERIALIZE=torch
for tool in memcheck racecheck; do
  for target in "replayssm.impl.replayssm_utils kernel" "replayssm.impl.replayssm_utils_blocked context"; do
    set -- $target
    name=$tool-${1##*.}-$2
    SECONDS=0
    timeout $((BUDGET + 90)) $SAN --tool "$tool" timeout -s TERM "$BUDGET" python3 -P -m replayssm.cli fuzz \
      --device cuda --impl "$1" --level "$2" --examples 160 --max-steps 8 --jobs "$JOBS" \
      --failures "$RUNS/failures-$name" --json "$RUNS/fuzz-$name.json" >"$RUNS/sanitize_$name.log" 2>&1
    echo "$name: exit $?, ${SECONDS}s; $(grep -E '^[0-9]+ state-machine runs' "$RUNS/sanitize_$name.log" | cut -c1-160)"
    campaign_record "$tool" "fuzz campaign $1 ($2 level), 160 examples x <= 8 steps, $JOBS jobs, ${BUDGET} s" \
      "$RUNS/sanitize_$name.log" "$RUNS/fuzz-$name.json"
  done
done
for f in "$RUNS"/sanitize_*.log; do echo "=== $(basename "$f")"; cat "$f"; done >"$LOG/sanitize.log"
tar -czf "$LOG/sanitize_runs.tar.gz" -C "$RUNS" .
cd "$ROOT"
! grep -qE 'MISSED|FAILED|VACUOUS' "$SUMMARY"
