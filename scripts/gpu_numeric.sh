#!/usr/bin/env bash
# The numeric fuzz layer on a CUDA machine, in one device call of about
# SECONDS + 80 s: FlashInfer's checkpointing_ssu as the decode forward and
# replayssm_materialize on real states (6 heads, dim 64, dstate 128, 2 B groups,
# window 16, <= 3 layers in 2 groups), checked against the float64 truth
# (docs/gpu.md). Five processes share the GPU, each under its own budget:
#   - the float32 and the bfloat16 state campaigns (every convention combination,
#     each stopped at its share of SECONDS; a budget stop is a result);
#   - the three teeth, float32: a plan one row short, a ring start off by one and a
#     dropped checkpoint, each planted in turn; each must be caught numerically
#     (exit 1 with a "numeric:" finding) within SECONDS.
# The FlashInfer modules are JIT-built on first use (~35 s materialize, ~230-250 s
# checkpointing_ssu; the budget's clock starts after, and the timeout allows
# 420 s for it); a workspace carried as .gpu/fiws.tar.xz (a previous call's
# $OUT/fiws.tar.xz) is unpacked first, with the mtimes ninja needs to find it
# up to date, and brought back again.
#   bash scripts/gpu_numeric.sh [LOGDIR] [SECONDS]      (SECONDS default 150)
# Comes back (few files: the device tool brings back a limited number):
# numeric.txt (one line per run: counts and verdict), numeric.json (every run's
# summary with its exit status), numeric.log (every run's console output),
# numeric_runs.tar.gz (the per-run files), fiws.tar.xz.
# The fuzz CLI imports z3: carry its wheel in .gpu/whl.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
BUDGET=${2:-150}
ROOT=$(pwd)
mkdir -p "$LOG" && LOG=$(cd "$LOG" && pwd)  # absolute: the runs start in /tmp
SECONDS=0
source "$ROOT/scripts/gpu_env.sh" || exit 2
if [ -f "$ROOT/.gpu/fiws.tar.xz" ]; then
  tar -xJf "$ROOT/.gpu/fiws.tar.xz" -C /tmp
  # FlashInfer leaves the freshness of a built module to ninja, whose recorded
  # dependencies include the tvm-ffi headers pip has just installed with
  # today's mtimes (pip does not keep a wheel's): the carried modules were
  # rebuilt for that alone (19:30 UTC). Same wheel and bundle every call, so
  # their files get one fixed old mtime and ninja finds the modules up to date.
  find /tmp/site /tmp/fib -exec touch -h -d '2026-01-01 00:00' {} +
fi
echo "set-up: ${SECONDS}s"
cd /tmp
SUMMARY=$LOG/numeric.txt
: >"$SUMMARY"
RUNS=/tmp/numeric_runs  # per-run files, packed at the end
rm -rf "$RUNS" && mkdir -p "$RUNS"

campaign() {  # name, extra options...
  local name=$1; shift
  timeout $((BUDGET + 420)) python3 -P -m replayssm.cli fuzz --numeric --device cuda --examples 100000 \
    --max-steps 16 --numeric-seconds "$BUDGET" --json "$RUNS/numeric_$name.json" "$@" >"$RUNS/numeric_$name.log" 2>&1
  echo $? >"$RUNS/numeric_$name.rc"
}
TEETH=("plan one row short" "ring start off by one" "dropped checkpoint")
campaign float32 --state-dtype float32 &
campaign bfloat16 --state-dtype bfloat16 &
for plant in "${TEETH[@]}"; do
  campaign "tooth_${plant// /_}" --state-dtype float32 --numeric-plant "$plant" &
done
wait
echo "campaigns done: ${SECONDS}s"

verdict() {  # name, expectation (passed|caught)
  local rc; rc=$(cat "$RUNS/numeric_$1.rc")
  local got; got=$(python3 - "$RUNS/numeric_$1.json" "$rc" "$2" <<'EOF'
import json, sys
path, rc, want = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    r = json.load(open(path))
except (OSError, ValueError):
    print(f"exit {rc}, no summary | FAILED"); sys.exit()
counts = (f"exit {rc}, {r['combinations']}/{r['combinations_total']} combinations, {r['examples']} runs, "
          f"{r['request_steps']} request-steps, {r['checks']} slot checks, forwards {r['forwards']}, "
          f"worst error/bound {r['worst_error_over_bound']:.3f}, {r['seconds']} s, "
          f"FlashInfer ready {r['flashinfer_ready_seconds']} s, stopped: {r['stopped']}")
failure = " ".join((r["failure"] or "").split("\n")[:2])[:300]
if want == "passed":
    ok = rc == 0 and r["finished"] and not r["failure"] and r["checks"] > 0
    print(f"{counts}{'; ' + failure if failure else ''} | {'ok' if ok else 'FAILED'}")
else:
    ok = rc == 1 and (r["failure"] or "").startswith("numeric:")
    print(f"{counts}; {failure or 'no finding'} | {'caught' if ok else 'MISSED'}")
EOF
)
  echo "$1 | $got" | tee -a "$SUMMARY"
}
verdict float32 passed
verdict bfloat16 passed
for plant in "${TEETH[@]}"; do verdict "tooth_${plant// /_}" caught; done
python3 - "$RUNS" >"$LOG/numeric.json" <<'PY'
import json, pathlib, sys
runs = {}
for rc in sorted(pathlib.Path(sys.argv[1]).glob("numeric_*.rc")):
    try:
        summary = json.loads(rc.with_suffix(".json").read_text())
    except (OSError, ValueError):
        summary = None
    runs[rc.stem.removeprefix("numeric_")] = {"exit": int(rc.read_text()), "summary": summary}
print(json.dumps(runs, indent=2))
PY
for f in "$RUNS"/numeric_*.log; do echo "=== $(basename "$f")"; cat "$f"; done >"$LOG/numeric.log"
tar -czf "$LOG/numeric_runs.tar.gz" -C "$RUNS" .
tar -cJf "$LOG/fiws.tar.xz" -C /tmp fiws 2>/dev/null
echo "total: ${SECONDS}s"
cd "$ROOT"
! grep -qE 'FAILED|MISSED' "$SUMMARY"
