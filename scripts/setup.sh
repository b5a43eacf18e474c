#!/usr/bin/env bash
# Install replayssm-verify and everything it needs on a fresh machine (CPU).
# torch is pinned first: 2.13.0 is the CPU build on this machine's disk; an
# unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check torch==2.13.0
# The cluster extra (Ray) lets CI run `fuzz --ray` on a local Ray (tests/fuzz/test_ray.py); the test
# extra checks the SARIF and HTML reports (the SARIF 2.1.0 schema, screenshots) and holds the type
# checker of tests/test_types.py. The versions the tests rely on exactly are pinned in pyproject.toml.
python3 -m pip install -q --disable-pip-version-check -e ".[cluster,test]"
# Headless Chromium renders the HTML report in its test (tests/review/test_ci_recipe.py): Debian's package,
# installed where it is missing.
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# Bubblewrap sandboxes every CPU target host (base/sandbox.py; tests/fuzz/test_sandbox.py): Debian's package,
# installed where it is missing.
if ! command -v bwrap >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi
