#!/usr/bin/env bash
# Install replayssm-verify and everything it needs on a fresh machine (CPU).
# torch is pinned first: 2.13.0 is the CPU build on this machine's disk; an
# unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check torch==2.13.0
# The cluster extra (Ray) lets CI run `fuzz --ray` on a local Ray (tests/fuzz/test_ray.py).
python3 -m pip install -q --disable-pip-version-check -e ".[cluster]"
