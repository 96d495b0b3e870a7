#!/usr/bin/env bash
# Configures and builds into build/ (CUDA backend when the CUDA Toolkit is found).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 "$@"
cmake --build build -j "$jobs"
