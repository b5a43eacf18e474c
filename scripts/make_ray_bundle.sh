#!/usr/bin/env bash
# Build .gpu-ray/ (git-ignored) for `fuzz --ray` on the device machine, which has no registry and no Ray:
#   bash scripts/make_ray_bundle.sh [PYTHON_VERSION (312)] [OUT_DIR (.gpu-ray)]
# Downloads Ray 2.60.0 for CPython PYTHON_VERSION on manylinux x86_64 with every package it requires
# except filelock (torch requires it, so the image has it), and the z3-solver wheel (the CLI imports
# z3; taken from .gpu/whl when it is there). Unpacks them into one tree, drops what a `ray.init()` on
# one machine does not use (the Java jars, the dashboard, the libraries built on Ray: data, serve,
# train, tune, rllib, llm, air; bytecode caches; the wheels' scripts), strips the debug symbols of
# Ray's binaries and packs the tree as OUT_DIR/ray_bundle.tar.xz. scripts/gpu_ray.sh unpacks it
# and puts it on PYTHONPATH. Check a bundle built for this machine's Python (311) with:
#   bash scripts/make_ray_bundle.sh 311 /tmp/ray311 && mkdir -p /tmp/rb && tar -xJf /tmp/ray311/ray_bundle.tar.xz -C /tmp/rb
#   PYTHONPATH=/tmp/rb python3 -m pytest -q tests/fuzz/test_ray.py   (a Python without Ray installed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-312}
OUT=${2:-.gpu-ray}
RAY_VERSION=2.60.0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PLATFORMS=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version "$PY" \
  --implementation cp --abi "cp$PY" "${PLATFORMS[@]}" -d "$WORK/whl" "ray==$RAY_VERSION"
rm -f "$WORK"/whl/filelock-*.whl
Z3=$(ls .gpu/whl/z3_solver-*.whl 2>/dev/null | head -1 || true)
if [ -n "$Z3" ]; then
  cp "$Z3" "$WORK/whl/"
else
  python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --no-deps --python-version "$PY" \
    --implementation cp "${PLATFORMS[@]}" -d "$WORK/whl" "z3-solver>=4.12"
fi
mkdir -p "$WORK/site"
for w in "$WORK"/whl/*.whl; do
  python3 -m zipfile -e "$w" "$WORK/site"
done
SITE="$WORK/site"
rm -rf "$SITE"/*.data "$SITE"/ray/jars "$SITE"/ray/dashboard/client "$SITE"/ray/data "$SITE"/ray/serve \
  "$SITE"/ray/train "$SITE"/ray/tune "$SITE"/ray/rllib "$SITE"/ray/llm "$SITE"/ray/air "$SITE"/ray/tests
find "$SITE" -name __pycache__ -prune -exec rm -rf {} + -o -name '*.pyi' -exec rm -f {} +
if command -v strip >/dev/null; then
  for f in "$SITE"/ray/_raylet.so "$SITE"/ray/core/src/ray/gcs/gcs_server "$SITE"/ray/core/src/ray/raylet/raylet; do
    [ -f "$f" ] && strip --strip-unneeded "$f"
  done
fi
# The executables keep their mode through zipfile only when it is set again.
chmod +x "$SITE"/ray/core/src/ray/gcs/gcs_server "$SITE"/ray/core/src/ray/raylet/raylet
mkdir -p "$OUT"
rm -f "$OUT/ray_bundle.tar.xz"
XZ_OPT="-9 -T0" tar -cJf "$OUT/ray_bundle.tar.xz" -C "$SITE" .
echo "$OUT/ray_bundle.tar.xz: $(du -h "$OUT/ray_bundle.tar.xz" | cut -f1) ($(du -sh "$SITE" | cut -f1) unpacked): $(ls "$WORK/whl" | tr '\n' ' ')"
