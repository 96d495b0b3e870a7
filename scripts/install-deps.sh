#!/usr/bin/env bash
# The one list of system packages gpucompute needs (Debian 12 / Ubuntu 22.04+).
# Used by README.md, .ci/run and the Dockerfile. The CUDA Toolkit is not installed here:
# it is found at /usr/local/cuda when present, and the build falls back to CPU-only without it.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates openssl libssl-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev liblapacke-dev libfftw3-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libmicrohttpd-dev libjemalloc-dev
  clang libclang-rt-14-dev
  python3 python3-grpcio python3-protobuf python3-numpy python3-scipy python3-astropy python3-pytest python3-matplotlib
  python3-yaml python3-kubernetes python3-venv python3-setuptools python3-wheel
)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
