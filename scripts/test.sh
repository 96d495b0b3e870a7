#!/usr/bin/env bash
# The README's second command (and CI's): install packages, build, run the whole test suite, then
# fuzz request decoding for FUZZ_SECONDS per target (default 60; 0 skips it).
# GPU tests skip themselves without a device; on the GPU machine use tests/bench/run_gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
if [ "${FUZZ_SECONDS:-60}" -gt 0 ]; then
  ./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
