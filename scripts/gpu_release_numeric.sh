#!/usr/bin/env bash
# The released vLLM 0.33.0's ReplaySSM numerically on CUDA (fuzz/release_numeric.py, docs/gpu.md):
# the release's Triton decode kernel with its CPU cursor and flush, and its tracker kernels around
# FlashInfer's checkpointing_ssu, many passes against float64, over the configurations 0.33.0 accepts;
# the two planted faults (each must fail); compute-sanitizer memcheck over short runs of both paths.
#   bash scripts/gpu_release_numeric.sh [LOGDIR] [PASSES]      (carry .gpu, with .gpu/reference)
# PARTS (default "triton flashinfer plants memcheck"): which of the four to run.
# Logs under LOGDIR/release: one .jsonl per process (a line per campaign, then a summary line), .err,
# memcheck_*.log, and release.txt (the summary table). Exit 1 when a campaign failed or a plant passed.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}/release
PASSES=${2:-64}
[[ $PASSES =~ ^[1-9][0-9]*$ ]] || { echo "PASSES must be an int >= 1, got $PASSES" >&2; exit 2; }
mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
ROOT=$(pwd)
source "$ROOT/scripts/gpu_env.sh" || exit 2
[ -d "$ROOT/.gpu/reference" ] && export REPLAYSSM_CORPUS=$ROOT/.gpu/reference
cd /tmp
RN="python3 -P -m replayssm.fuzz.release_numeric --device cuda --input-dtype bfloat16 --requests 4"
run() {  # run NAME ARGS...: one process, its campaigns' JSON lines in NAME.jsonl
  local name=$1; shift
  $RN "$@" >"$LOG/$name.jsonl" 2>"$LOG/$name.err"
  echo "$name: exit $?" >>"$LOG/exits.txt"
}
rm -f "$LOG/exits.txt"
PARTS=" ${PARTS:-triton flashinfer plants memcheck} "
SECONDS=0
if [[ $PARTS == *" flashinfer "* ]]; then
# FlashInfer: one process per checkpointing_ssu specialization (each JIT-builds its own, in parallel).
run fi_t4_w16_f32 --backend flashinfer --query-len 4 --buffer-len 16 --state-dtype float32 --passes "$PASSES" &
run fi_t4_w16_bf16 --backend flashinfer --query-len 4 --buffer-len 16 --state-dtype bfloat16 --passes "$PASSES" &
run fi_t2_w4_f32 --backend flashinfer --query-len 2 --buffer-len 4 --state-dtype float32 --passes "$PASSES" &
run fi_t1_w16_f32 --backend flashinfer --query-len 1 --buffer-len 16 --state-dtype float32 --passes "$PASSES" &
fi
if [[ $PARTS == *" triton "* ]]; then
# Triton: every state dtype, buffer lengths 1, 5 and 16, modes none and align (blocks of 12).
run triton_f32 --backend triton --state-dtype float32 --buffer-len 1,5,16 --cache-mode none,align \
  --block-size 12 --passes "$PASSES" &
run triton_half --backend triton --state-dtype bfloat16,float16 --buffer-len 1,5,16 --cache-mode none,align \
  --block-size 12 --passes "$PASSES" &
fi
wait
echo "campaigns: ${SECONDS}s"
SECONDS=0
if [[ $PARTS == *" plants "* ]]; then
run plant_flush_late --backend triton --state-dtype bfloat16 --buffer-len 16 --passes "$PASSES" \
  --plant "flush one step late" &
run plant_commit_short --backend flashinfer --query-len 4 --buffer-len 16 --state-dtype float32 \
  --passes "$PASSES" --plant "commit one token short" &
fi
wait
echo "plants: ${SECONDS}s"
SECONDS=0
if [[ $PARTS == *" memcheck "* ]] && command -v compute-sanitizer >/dev/null; then
  for path in "triton --state-dtype bfloat16 --buffer-len 5 --cache-mode align --block-size 12" \
              "flashinfer --query-len 4 --buffer-len 16 --state-dtype float32"; do
    name=memcheck_${path%% *}
    # Each process's report in a file of its own (%p: its pid): the target's process writes its
    # standard output to its own folder, which goes with it.
    # shellcheck disable=SC2086
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${MEMCHECK_SECONDS:-150}" compute-sanitizer --tool memcheck \
      --target-processes all --log-file "$LOG/${name}_%p.log" \
      $RN --backend $path --passes "${MEMCHECK_PASSES:-6}" >"$LOG/$name.log" 2>&1
    status=$?
    echo "$name: exit $status, $(ls "$LOG/${name}"_*.log 2>/dev/null | wc -l) processes checked:" \
      "$(cat "$LOG/${name}"_*.log 2>/dev/null | grep -E 'ERROR SUMMARY' | sort | uniq -c | tr '\n' ' ')" \
      | tee -a "$LOG/exits.txt"
  done
fi
echo "memcheck: ${SECONDS}s"
python3 - "$LOG" <<'EOF' | tee "$LOG/release.txt"
import json, pathlib, sys
log, bad = pathlib.Path(sys.argv[1]), 0
print(f"{'process':22} {'campaign':58} {'passes':>6} {'outputs':>8} {'states':>7} {'worst out':>10} {'worst st':>9}  verdict")
for f in sorted(log.glob("*.jsonl")):
    lines = [json.loads(x) for x in f.read_text().splitlines() if x.startswith("{")]
    planted = f.stem.startswith("plant_")
    if not lines:
        bad += 1
        print(f"{f.stem:22} NO RESULT: {(log / (f.stem + '.err')).read_text()[-400:]!r}")
        continue
    for c in lines[:-1]:
        k = c["config"]
        name = f"{k['backend']} W{k['buffer_len']} T{k['query_len']} {k['cache_mode']} {k['state_dtype']}"
        verdict = ("caught" if c["failure"] else "MISSED") if planted else ("ok" if not c["failure"] else "FAILED")
        bad += verdict in ("MISSED", "FAILED")
        print(f"{f.stem:22} {name:58} {c['passes']:>6} {c['outputs']:>8} {c['states']:>7} "
              f"{c['worst_output']:>10.3g} {c['worst_state']:>9.3g}  {verdict} {c['failure'] or ''}"[:400])
print("verdict:", "all as expected" if not bad else f"{bad} unexpected")
sys.exit(1 if bad else 0)
EOF
status=$?
cat "$LOG/exits.txt"
exit $status
