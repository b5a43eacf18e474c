#!/usr/bin/env bash
# The numeric fuzz layer on a CUDA machine: FlashInfer's checkpointing_ssu as
# the decode forward and replayssm_materialize on real states (6 heads, dim 64,
# dstate 128, 2 B groups, window 16), per state dtype, checked against the
# float64 recurrence (docs/gpu.md). The FlashInfer modules are JIT-built on
# first use (~35 s materialize, ~210 s checkpointing_ssu); a workspace carried
# as .gpu/fiws.tar.xz (a previous call's $OUT) is unpacked first.
#   bash scripts/gpu_numeric.sh [LOGDIR] [SECONDS_PER_DTYPE]
# Logs: numeric_<dtype>.json and .log. The fuzz CLI imports z3: carry its wheel in .gpu/whl.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
BUDGET=${2:-90}
ROOT=$(pwd)
mkdir -p "$LOG"
source "$ROOT/scripts/gpu_env.sh" || exit 2
[ -f "$ROOT/.gpu/fiws.tar.xz" ] && tar -xJf "$ROOT/.gpu/fiws.tar.xz" -C /tmp
cd /tmp
status=0
for dtype in float32 bfloat16; do
  SECONDS=0
  timeout $((BUDGET + 60)) python3 -P -m replayssm.cli fuzz --numeric --device cuda --state-dtype "$dtype" \
    --examples 256 --max-steps 8 --numeric-seconds "$BUDGET" --json "$LOG/numeric_$dtype.json" \
    >"$LOG/numeric_$dtype.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || status=$rc
  echo "numeric $dtype: exit $rc, ${SECONDS}s"; tail -2 "$LOG/numeric_$dtype.log"
done
exit "$status"
