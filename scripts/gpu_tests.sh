#!/usr/bin/env bash
# Run the GPU test set of the implementation on a CUDA machine, in one command:
# compiled Triton kernels on CUDA tensors (every `gpu`-marked test in tests/impl),
# FlashInfer's replayssm_materialize against the torch reference, and a
# compute-sanitizer memcheck pass over the 32 postprocess variants when the
# machine supports it.
#
# Prerequisite, on a machine with a package registry, from the repository root:
#   bash ../shared/gpu/make_flashinfer_bundle.sh      # writes .gpu/ (git-ignored)
#   cp -r ../shared/reference .gpu/                    # optional: the corpus tests (differential, review)
#   (the fuzz scripts also need the z3-solver wheel in .gpu/whl: docs/gpu.md)
# Then, from the repository root on the GPU machine (the device tool: carry [".gpu"]):
#   bash scripts/gpu_tests.sh [LOGDIR]                 # LOGDIR: $OUT, else out/gpu
# Logs: env.txt, prebuild.log, pytest.log, comparison.jsonl, memcheck.log.
# Exit status: pytest's (the memcheck pass is informative and bounded to 150 s).
set -uo pipefail
LOG=${1:-${OUT:-out/gpu}}
mkdir -p "$LOG"
ROOT=$(pwd)

# FlashInfer bundle, the package mapping without an install, NVLS off, no
# TRITON_INTERPRET (see gpu_env.sh).
source "$ROOT/scripts/gpu_env.sh" || exit 2
export REPLAYSSM_GPU_REPORT=$LOG/comparison.jsonl
# The corpus (for the differential tests) does not travel with the repository;
# a copy under the carried .gpu/ does: cp -r ../shared/reference .gpu/
if [ -d .gpu/reference ]; then
  export REPLAYSSM_CORPUS=$ROOT/.gpu/reference
fi
rm -f "$REPLAYSSM_GPU_REPORT"

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton, flashinfer; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('triton', triton.__version__); print('flashinfer', flashinfer.__version__)"
  nvcc --version | tail -1
} 2>&1 | tee "$LOG/env.txt"
python3 -c "from flashinfer.mamba import replayssm_materialize" || { echo "flashinfer import failed"; exit 2; }

# JIT-build the three materialize modules the tests use, in parallel (~35 s each).
SECONDS=0
for dtype in float32 bfloat16 float16; do
  python3 -c "
import torch
from flashinfer.mamba.replayssm_materialize import _module
_module(torch.$dtype, torch.bfloat16, torch.float32, 64, 128, 3, 16, 0)
print('built $dtype')" >>"$LOG/prebuild.log" 2>&1 &
done
wait
echo "prebuild: ${SECONDS}s" | tee -a "$LOG/prebuild.log"

SECONDS=0
python3 -P -m pytest -m gpu tests/impl -q -rfEs -p no:cacheprovider 2>&1 | tee "$LOG/pytest.log"
status=${PIPESTATUS[0]}
echo "pytest: ${SECONDS}s, exit $status" | tee -a "$LOG/pytest.log"
# The provenance's FlashInfer citations (spec/provenance.py), against the bundle's FlashInfer source.
python3 -P -m pytest tests/spec/test_provenance.py -q -rs -k flashinfer -p no:cacheprovider 2>&1 | tee -a "$LOG/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "--- FlashInfer vs torch (comparison.jsonl)"
cat "$REPLAYSSM_GPU_REPORT" 2>/dev/null

if command -v compute-sanitizer >/dev/null && [ -z "${REPLAYSSM_SKIP_MEMCHECK:-}" ]; then
  SECONDS=0
  # Without PyTorch's caching allocator, so a store past a tensor is outside
  # every cudaMalloc block (scripts/gpu_sanitize.sh has the teeth of this).
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck --target-processes all \
    python3 -P -m pytest -m gpu tests/impl/test_impl_postprocess.py -q -k all_variants -p no:cacheprovider \
    >"$LOG/memcheck.log" 2>&1
  echo "memcheck: exit $?, ${SECONDS}s; $(grep -E 'ERROR SUMMARY|passed|failed' "$LOG/memcheck.log" | tail -3 | tr '\n' ' ')"
fi
exit "$status"
