# Sourced by the GPU scripts, from the repository root on the GPU machine:
# unpacks the carried FlashInfer bundle (.gpu/, built by
# ../shared/gpu/make_flashinfer_bundle.sh) and maps the packages of
# pyproject.toml (replayssm.impl -> impl/, ...) through a symlink shim, since
# the machine has no registry to install from. Run Python with `-P` or from
# another directory so that ./replayssm does not shadow the shim.
ROOT=${ROOT:-$(pwd)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
# replayssm_shim TREE SHIM: the packages of TREE's pyproject.toml package-dir
# ("replayssm.X" = "DIR") as symlinks under SHIM/replayssm (SHIM goes on PYTHONPATH).
replayssm_shim() {
  rm -rf "$2" && mkdir -p "$2/replayssm" || return 2
  for f in "$1"/replayssm/*; do ln -s "$f" "$2/replayssm/"; done
  sed -n 's/^"replayssm\.\([a-z_]*\)" = "\([a-z_]*\)"$/\1 \2/p' "$1/pyproject.toml" |
    while read -r name dir; do ln -s "$1/$dir" "$2/replayssm/$name"; done
}
# Done once per machine (a marker file): several scripts may run side by side in one
# call, and re-unpacking or re-linking under a running one would break its imports.
SHIM=/tmp/replayssm_shim
if [ ! -f /tmp/gpu_env.ready ]; then
  mkdir -p /tmp/fib && tar -xJf "$ROOT/.gpu/flashinfer_bundle.tar.xz" -C /tmp/fib &&
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$ROOT"/.gpu/whl/*.whl ||
    { echo "bundle setup failed"; return 2; }
  replayssm_shim "$ROOT" "$SHIM" || return 2
  touch /tmp/gpu_env.ready
fi
export PYTHONPATH=$SHIM:/tmp/fib:/tmp/site:${PYTHONPATH:-}
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
