#!/usr/bin/env bash
# The released vLLM 0.33.0's ReplaySSM numerically on CUDA (fuzz/release_numeric.py, docs/gpu.md):
# the release's Triton decode kernel with its CPU cursor and flush, and its tracker kernels around
# FlashInfer's checkpointing_ssu, many passes against float64, over the configurations 0.33.0 accepts;
# the two planted faults (each must fail); compute-sanitizer memcheck over short runs of both paths,
# the target's process reporting (it ends in order), and a planted out-of-bounds store it must catch.
#   bash scripts/gpu_release_numeric.sh [LOGDIR] [PASSES]      (carry .gpu, with .gpu/reference)
# PARTS (default "triton flashinfer plants memcheck"): which of the four to run; MEMCHECK_RUNS (default
# "triton flashinfer planted"): which memcheck runs.
# Logs under LOGDIR/release: one .jsonl per process (a line per campaign, then a summary line), .err,
# mc_*.log (memcheck's reports), and release.txt (the summary table, scripts/release_numeric_verdict.py).
# Exit 1 when a campaign failed or checked no output, a plant passed or failed otherwise than it must,
# or memcheck did not show the target's report (or missed its plant).
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
run() {  # run NAME ARGS...: one process, its campaigns' JSON lines in NAME.jsonl (judged at the end)
  local name=$1; shift
  $RN "$@" >"$LOG/$name.jsonl" 2>"$LOG/$name.err"
  echo "$name: exit $?" >>"$LOG/exits.txt"
}
warm() {  # warm NAME ARGS...: a build run, not judged (its lines in NAME.warm)
  local name=$1; shift
  $RN "$@" >"$LOG/$name.warm" 2>"$LOG/$name.err"
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
# memcheck (compute-sanitizer --target-processes all: one report for the judging process and the
# target's, mc_NAME.log, its ERROR SUMMARY counting both). The target's process runs the release's
# kernels and, asked to end in order, waits for the device and exits 0 ("target_exit": 0 in NAME.out),
# so the report covers it to its end. Each run must show "ERROR SUMMARY: 0 errors" and target_exit 0.
# Teeth (memcheck_planted): a copy of the release whose decode kernel stores each row's output one row
# further (the last row's past the end of `out`): the report must name an invalid global write made
# in the target's process (its host backtrace through base/target_host.py). FlashInfer's modules are
# JIT-built first without the sanitizer (fi_warm), so that its run checks kernels, not the build.
memcheck() {  # memcheck NAME ARGS...: appends "NAME: ..." to exits.txt
  local name=$1; shift
  # shellcheck disable=SC2086
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${MEMCHECK_SECONDS:-200}" compute-sanitizer --tool memcheck \
    --target-processes all --destroy-on-device-error kernel --log-file "$LOG/mc_$name.log" \
    $RN "$@" --passes "${MEMCHECK_PASSES:-6}" >"$LOG/$name.out" 2>"$LOG/$name.err"
  echo "$name: exit $?, $(grep -h 'ERROR SUMMARY' "$LOG/mc_$name.log" | head -1 || echo NO REPORT);" \
    "$(grep -c 'Invalid __global__' "$LOG/mc_$name.log") invalid global accesses reported," \
    "$(grep -c 'main in target_host.py' "$LOG/mc_$name.log") of them launched in the target's process" \
    "(pid $(sed -n 's/^{"target_pid": \([0-9]*\)}$/\1/p' "$LOG/$name.err" | head -1));" \
    "$(sed -n 's/.*"target_exit": \(-*[0-9a-z]*\), "release_calls": \([0-9]*\).*/target_exit \1, release calls \2/p' \
       "$LOG/$name.out" | tail -1)" | tee -a "$LOG/exits.txt"
}
clean() {  # clean NAME: its report says 0 errors and its target ended in order
  grep -q 'ERROR SUMMARY: 0 errors' "$LOG/mc_$1.log" && grep -q '"target_exit": 0,' "$LOG/$1.out" ||
    echo "$1: NOT SHOWN" | tee -a "$LOG/exits.txt"
}
RUNS=" ${MEMCHECK_RUNS:-triton flashinfer planted} "
if [[ $PARTS == *" memcheck "* ]] && command -v compute-sanitizer >/dev/null; then
  if [[ $RUNS == *" triton "* ]]; then
  memcheck memcheck_triton --backend triton --state-dtype bfloat16 --buffer-len 5 --cache-mode align --block-size 12
  clean memcheck_triton
  fi
  if [[ $RUNS == *" flashinfer "* ]]; then
  FI="--backend flashinfer --query-len 4 --buffer-len 16 --state-dtype float32"
  # shellcheck disable=SC2086
  warm fi_warm $FI --passes 1
  # shellcheck disable=SC2086
  memcheck memcheck_flashinfer $FI
  clean memcheck_flashinfer
  fi
  if [[ $RUNS == *" planted "* ]]; then
  PLANTED=/tmp/planted_corpus
  [ -n "${REPLAYSSM_CORPUS:-}" ] || REPLAYSSM_CORPUS=$(python3 -c "from replayssm.spec import corpus; print(corpus.root())")
  rm -rf "$PLANTED" && mkdir -p "$PLANTED" && cp -r "$REPLAYSSM_CORPUS"/. "$PLANTED"/
  F=$PLANTED/vllm-0.33.0/vllm/model_executor/layers/mamba/ops/selective_state_update_replayssm_output_only.py
  sed -i 's/tl.store(out_ptr + offs_m \* stride_out_dim, out, mask=offs_m < dim)/tl.store(out_ptr + stride_out_batch + offs_m * stride_out_dim, out, mask=offs_m < dim)/' "$F"
  if grep -q 'out_ptr + stride_out_batch + offs_m' "$F"; then
    REPLAYSSM_CORPUS=$PLANTED memcheck memcheck_planted --backend triton --state-dtype bfloat16 --buffer-len 5 \
      --cache-mode align --block-size 12
    grep -q 'main in target_host.py' "$LOG/mc_memcheck_planted.log" || echo "memcheck_planted: MISSED" | tee -a "$LOG/exits.txt"
  else
    echo "memcheck_planted: the planted line did not apply" | tee -a "$LOG/exits.txt"
  fi
  fi
fi
echo "memcheck: ${SECONDS}s"
python3 "$ROOT/scripts/release_numeric_verdict.py" "$LOG" | tee "$LOG/release.txt"
status=${PIPESTATUS[0]}
grep -qE 'NOT SHOWN|MISSED|did not apply' "$LOG/exits.txt" && status=1
cat "$LOG/exits.txt"
exit $status
