#!/usr/bin/env bash
# Packs programs built here, with the shared libraries they load, into one tarball for a GPU
# machine that has the NVIDIA driver and the CUDA Toolkit (same major version) but no gRPC:
#
#   scripts/gpu-bundle.sh OUT.txz PROGRAM... [-- FILE_OR_DIR...]
#
# Programs go to bin/ (stripped), their libraries to lib/, except glibc's, the driver's and the
# CUDA Toolkit's, which the GPU machine has; what follows `--` is copied as it is (build/python,
# test data). The tarball also holds env.sh, which puts bin/ on PATH and lib/ before the CUDA
# Toolkit on LD_LIBRARY_PATH. GPU_BUNDLE_KEEP_SYMBOLS=1 leaves the programs unstripped (for
# perf on the GPU machine: bundle /usr/bin/perf too). GPU_BUNDLE_SMALL=1 packs with xz -9 on one
# thread (minutes, not seconds): the test programs' identical kernels then compress away, which
# keeps every GPU test and benchmark in about 30 MiB. On the GPU machine:
#   mkdir -p .dev && tar xJf OUT.txz -C .dev && source .dev/env.sh
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
out=$(realpath -m "$1"); shift
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/lib"
extras=0
for a in "$@"; do
  if [ "$a" = "--" ]; then extras=1; continue; fi
  if [ $extras = 1 ]; then cp -r "$a" "$dir/"; continue; fi
  [ -x "$a" ] || { echo "gpu-bundle: not a program: $a" >&2; exit 2; }
  cp "$a" "$dir/bin/"
  if [ "${GPU_BUNDLE_KEEP_SYMBOLS:-0}" != 1 ]; then
    strip --strip-unneeded "$dir/bin/$(basename "$a")" 2>/dev/null || true
  fi
  ldd "$a" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$lib" in
      */libc.so*|*/libm.so*|*/libpthread.so*|*/libdl.so*|*/librt.so*|*/ld-linux*) ;;
      */libcuda.so*|*/libnvidia-*|/usr/local/cuda*) ;;
      *) [ -e "$dir/lib/$(basename "$lib")" ] || cp -L "$lib" "$dir/lib/" ;;
    esac
  done
done
find "$dir" -name __pycache__ -type d -prune -exec rm -rf {} +
cat > "$dir/env.sh" <<'ENV'
# Source on the GPU machine: the bundle's programs and libraries, then the CUDA Toolkit's.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cudalib=$(dirname "$(ls /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.* /usr/local/cuda/lib64/libcublas.so.* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$here/lib:$cudalib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
ENV
xz_flags=(-6 -T0); [ "${GPU_BUNDLE_SMALL:-0}" = 1 ] && xz_flags=(-9 -T1)
tar cf - -C "$dir" . | xz "${xz_flags[@]}" > "$out"
echo "gpu-bundle: $out ($(du -m "$out" | cut -f1) MiB)"
