#!/usr/bin/env bash
# The stateful campaign's throughput of two trees on a CUDA machine, interleaved in one call:
# this tree ("after") and BEFORE (another tree's packages, pyproject.toml and benchmarks/,
# carried under .gpu/, e.g. `git archive REV replayssm spec base impl verify fuzz review
# benchmarks pyproject.toml | tar -x -C .gpu/before`), each with its own benchmarks/fuzz_throughput.py.
#   bash scripts/gpu_throughput_trees.sh LOGDIR BEFORE [ROUNDS]
# Rounds alternate before, after, before, after, ... (the first run also compiles the Triton
# kernels both trees share: compare the later rounds and the medians). The first "after" run
# also measures the wide runner (WIDE_ROUNDS > 0: instead, that many rounds of the wide runner of
# both trees, interleaved, after the stateful rounds: wide_{before,after}_ROUND.json). WARM=1: first an
# untimed 64-example campaign of this tree, which compiles the kernels both trees share;
# WIDE_WARM=1: an untimed 2-step wide run of this tree before the wide rounds (its kernels'
# compiles). STATEFUL_TREES ("before after"): the trees whose stateful campaign runs each round. Sizes:
# SYSTEMS (256), JOBS (min(16, nproc)), STATEFUL_EXAMPLES (256), STATEFUL_STEPS (12), RUN_SECONDS (150,
# per run). Logs: throughput_{before,after}_ROUND.json and .log. Each run is a fresh Python process.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: bash scripts/gpu_throughput_trees.sh LOGDIR BEFORE [ROUNDS]" >&2; exit 2; }
LOG=$1
[ -f "$2/pyproject.toml" ] && [ -d "$2/benchmarks" ] ||
  { echo "BEFORE $2: not a tree (no pyproject.toml and benchmarks/ there)" >&2; exit 2; }
BEFORE=$(cd "$2" && pwd)
ROUNDS=${3:-2}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be an int >= 1, got $ROUNDS" >&2; exit 2; }
ROOT=$(pwd)
mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
source "$ROOT/scripts/gpu_env.sh" || exit 2
replayssm_shim "$BEFORE" /tmp/replayssm_shim_before || exit 2
JOBS=${JOBS:-$(( $(nproc) > 16 ? 16 : $(nproc) ))}
cd /tmp
WIDE="--rows ${WIDE_ROWS:-4096} --steps ${WIDE_STEPS:-40} --wide-jobs 8"
WIDE_ROUNDS=${WIDE_ROUNDS:-0}
if [ -n "${WARM:-}" ]; then
  SECONDS=0
  timeout 200 python3 -P "$ROOT/benchmarks/fuzz_throughput.py" --device cuda --systems "${SYSTEMS:-256}" \
    --jobs "$JOBS" --stateful-examples 64 --no-wide > "$LOG/warm.log" 2>&1
  echo "warm-up: exit $?, ${SECONDS}s"
fi
tree_of() {  # sets dir and path for tree $1
  if [ "$1" = before ]; then dir=$BEFORE path=${PYTHONPATH/$SHIM/\/tmp\/replayssm_shim_before}
  else dir=$ROOT path=$PYTHONPATH; fi
}
for round in $(seq "$ROUNDS"); do
  for tree in ${STATEFUL_TREES:-before after}; do
    tree_of $tree
    wide=$([ "$tree" = after ] && [ "$round" = 1 ] && [ "$WIDE_ROUNDS" = 0 ] && echo "$WIDE" || echo --no-wide)
    SECONDS=0
    PYTHONPATH=$path timeout "${RUN_SECONDS:-150}" python3 -P "$dir/benchmarks/fuzz_throughput.py" --device cuda \
      --systems "${SYSTEMS:-256}" --jobs "$JOBS" --stateful-examples "${STATEFUL_EXAMPLES:-256}" \
      --stateful-steps "${STATEFUL_STEPS:-12}" $wide --out "$LOG/throughput_${tree}_$round.json" \
      > "$LOG/throughput_${tree}_$round.log" 2>&1
    echo "$tree round $round: exit $?, ${SECONDS}s"
  done
done
if [ -n "${WIDE_WARM:-}" ] && [ "$WIDE_ROUNDS" != 0 ]; then
  SECONDS=0
  timeout 120 python3 -P "$ROOT/benchmarks/fuzz_throughput.py" --device cuda --systems 1 --jobs 1 \
    --stateful-examples 1 --stateful-steps 1 --rows "${WIDE_ROWS:-4096}" --steps 2 --wide-jobs 8 \
    > "$LOG/wide_warm.log" 2>&1
  echo "wide warm-up: exit $?, ${SECONDS}s"
fi
for round in $(seq "$WIDE_ROUNDS"); do  # the wide runner beside a one-example-per-combination campaign
  for tree in before after; do
    tree_of $tree
    SECONDS=0
    PYTHONPATH=$path timeout 120 python3 -P "$dir/benchmarks/fuzz_throughput.py" --device cuda --systems 1 \
      --jobs 1 --stateful-examples 1 --stateful-steps 1 $WIDE --out "$LOG/wide_${tree}_$round.json" \
      > "$LOG/wide_${tree}_$round.log" 2>&1
    echo "wide $tree round $round: exit $?, ${SECONDS}s"
  done
done
python3 - "$LOG" <<'PY'  # one line per run: the rates and where the wall time went
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    try:
        r = json.loads(f.read_text())
    except ValueError:
        print(f"{f.stem}: unreadable")
        continue
    w = r.get("wide") if f.stem.startswith("wide") else None
    if w:
        print(f"{f.stem}: wide {w['request_steps_per_s']:,.0f}/s, wall {w['seconds']} s, split {w['time_split']}, "
              f"discrepancies {w['discrepancies']}")
    for k, s in (r.get("stateful") or {}).items():
        if not f.stem.startswith("wide"):
            for run in s["runs"]:
                print(f"{f.stem}: stateful K={k} {run['request_steps_per_s']:,.0f}/s from the start, busy "
                      f"{run['busy_request_steps_per_s']:,.0f}/s, {run['request_steps']} request-steps in "
                      f"{run['seconds']} s, passed {run['passed']}, findings {run['findings']}")
PY
