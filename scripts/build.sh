#!/usr/bin/env bash
# Configures (CMakePresets.json's `release` preset: build/, Release; CUDA backend when the CUDA
# Toolkit is found) and builds. Extra arguments go to the configure step. CI and the
# Dockerfile both build through here.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
cmake --preset release "$@"
cmake --build build -j "$jobs"
