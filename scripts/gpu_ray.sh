#!/usr/bin/env bash
# `fuzz --ray --device cuda` on the device machine, in one bounded command: a local Ray on this
# machine's GPU(s), one Ray task per GPU, then the same campaign through the local process pool
# with one worker per GPU for comparison. Needs .gpu-ray/ (bash scripts/make_ray_bundle.sh); not
# the FlashInfer bundle (.gpu/): the kernel level launches our Triton kernels only.
#   bash scripts/gpu_ray.sh [LOGDIR ($OUT)] [SECONDS FOR THE RAY CAMPAIGN (100)] [FOR THE LOCAL ONE (60)] [FUZZ OPTIONS...]
# (further fuzz options, e.g. --systems 16, go to both campaigns)
# Both run the same campaign (96 examples x <= 20 steps, seed 0) with as many workers as GPUs, so when
# both finish, their summaries hold the same statistics (each combination's Hypothesis run is seeded).
# Writes LOGDIR/fuzz_ray.json (+ .log), LOGDIR/fuzz_local.json (+ .log), LOGDIR/env.txt.
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
RAY_BUDGET=${2:-100}
LOCAL_BUDGET=${3:-60}
shift $(( $# < 3 ? $# : 3 ))
ROOT=$(pwd)
mkdir -p "$LOG" /tmp/rayb
tar -xJf "$ROOT/.gpu-ray/ray_bundle.tar.xz" -C /tmp/rayb ||
  { echo "no Ray bundle: run bash scripts/make_ray_bundle.sh and carry .gpu-ray"; exit 2; }
# The packages of pyproject.toml through a symlink shim, as scripts/gpu_env.sh maps them.
SHIM=/tmp/replayssm_shim_ray  # its own: gpu_env.sh's may be in use by a script beside it
rm -rf "$SHIM" && mkdir -p "$SHIM/replayssm"
for f in "$ROOT"/replayssm/*; do ln -s "$f" "$SHIM/replayssm/"; done
sed -n 's/^"replayssm\.\([a-z_]*\)" = "\([a-z_]*\)"$/\1 \2/p' "$ROOT/pyproject.toml" |
  while read -r name dir; do ln -s "$ROOT/$dir" "$SHIM/replayssm/$name"; done
export PYTHONPATH=$SHIM:/tmp/rayb:${PYTHONPATH:-} PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset TRITON_INTERPRET
cd /tmp
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
{ date -u; nvidia-smi -L; python3 -c "import ray, torch, triton, hypothesis; print('ray', ray.__version__, 'torch',
  torch.__version__, 'triton', triton.__version__, 'hypothesis', hypothesis.__version__)"; echo "GPUs: $GPUS"
  git -C "$ROOT" rev-parse HEAD 2>/dev/null; } > "$LOG/env.txt" 2>&1
cat "$LOG/env.txt"
FUZZ=(fuzz --device cuda --profile dev --examples 96 --max-steps 20 --seed 0 --watchdog 120 "$@")
SECONDS=0
timeout "$RAY_BUDGET" python3 -P -m replayssm.cli "${FUZZ[@]}" --ray --json "$LOG/fuzz_ray.json" \
  --failures "$LOG/failures_ray" --database "$LOG/db" 2>&1 | tee "$LOG/fuzz_ray.log"
echo "fuzz --ray: exit ${PIPESTATUS[0]}, ${SECONDS}s"
SECONDS=0
timeout "$LOCAL_BUDGET" python3 -P -m replayssm.cli "${FUZZ[@]}" --jobs "$GPUS" --json "$LOG/fuzz_local.json" \
  --failures "$LOG/failures_local" 2>&1 | tee "$LOG/fuzz_local.log"
echo "fuzz (local pool): exit ${PIPESTATUS[0]}, ${SECONDS}s"
