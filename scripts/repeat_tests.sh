#!/usr/bin/env bash
# Run the randomized and timing-sensitive tests RUNS times in a row (default 5), to show that none
# of them is flaky: a test that fails in any run is a defect (it can stop a submission landing).
#
#   bash scripts/repeat_tests.sh [RUNS] [PYTEST_ARGS...]
#
# The tests: campaigns with time budgets, signals, watchdogs and supervised processes, the target
# host's isolation, the planted bugs a fuzz campaign or a proof must find (Hypothesis's and Z3's
# choices), the GPU-racy comparisons' CPU side. Each run's log goes to out/repeat/run-N.log; the
# summary prints each run's closing pytest line. Exit status: 0 every run passed, 1 some run
# failed, 2 bad arguments (before any run).
set -uo pipefail
cd "$(dirname "$0")/.."

TESTS=(
  tests/fuzz/test_numeric.py
  tests/fuzz/test_guards.py
  tests/fuzz/test_faults.py
  tests/fuzz/test_isolation.py
  tests/fuzz/test_lockstep.py
  tests/fuzz/test_fuzz.py
  tests/fuzz/test_hostile_targets.py
  tests/fuzz/test_host_faults.py
  tests/review/test_review_interrupts.py
  tests/review/test_review_isolation.py
  tests/verify/test_kernel_blocked_teeth.py
  tests/verify/test_obligation.py
)

runs="${1:-5}"
if ! [[ "$runs" =~ ^[0-9]+$ ]] || (( runs < 1 || runs > 100 )); then
  echo "error: RUNS must be a whole number from 1 to 100, got '$runs'" >&2
  exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))
for t in "${TESTS[@]}"; do
  if [[ ! -f "$t" ]]; then
    echo "error: $t is listed in scripts/repeat_tests.sh but does not exist" >&2
    exit 2
  fi
done

mkdir -p out/repeat
failed=0
summary=()
for (( i = 1; i <= runs; i++ )); do
  log="out/repeat/run-$i.log"
  start=$SECONDS
  python3 -m pytest -q -p no:cacheprovider "${TESTS[@]}" "$@" >"$log" 2>&1
  status=$?
  line=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$log" | tail -1)
  summary+=("run $i/$runs: exit $status in $(( SECONDS - start )) s: ${line:-no closing line, see $log}")
  echo "${summary[-1]}"
  if (( status != 0 )); then
    failed=1
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /'
  fi
done
echo "summary (${#TESTS[@]} test files, $runs runs, logs in out/repeat/):"
printf '  %s\n' "${summary[@]}"
exit $failed
