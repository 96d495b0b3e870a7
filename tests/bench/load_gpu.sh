#!/usr/bin/env bash
# Issue 5's figures on the GPU machine, all from gpucompute-load against one CUDA server with
# shared memory allowed: small periodograms against Echo at concurrency 1..256 (unary and
# stream), a 256 MiB tensor over gRPC (one call, then split over 8 and 16 channels) and through
# shared memory. Called by run_gpu.sh (ONLY=service); writes JSON Lines and CSV, packed into
# $out/load.tgz (the device tool returns a limited number of files). Draw the PNGs on the build
# machine: client/load/plot_load.py RESULTS.jsonl OUT.png.
set -uo pipefail
top=${OUT:-gpu-out}; out=$(mktemp -d); mkdir -p "$top"
# shellcheck source=tests/bench/cuda_server.sh
source "$(dirname "$0")/cuda_server.sh"
start_server /tmp/gcl.port "$out/servers.log" --allow_shared_memory
load() {  # name, then gpucompute-load flags
  local name=$1; shift
  echo "==== gpucompute-load $name: $*"
  gpucompute-load --target "$target" --progress off --json "$out/load-$name.jsonl" \
    --csv "$out/load-$name.csv" "$@" 2>>"$out/bench.err"
}
# Small requests: one 1,000-sample periodogram on 1,000 frequencies, against Echo of its bytes.
for mode in unary stream; do
  load "periodogram-$mode" --op periodogram --samples 1000 --frequencies 1000 --mode "$mode" \
    --channels 8 --concurrency 1,8,64,256 --duration 5s --warmup 1s --compare-echo
done
# A 256 MiB tensor: one call, then split over 8 and 16 channels; then through shared memory.
load echo-256MiB-1 --op echo --bytes 256Mi --concurrency 1 --requests 10 --warmup 1s
for k in 8 16; do
  load "echo-256MiB-split$k" --op echo --bytes 256Mi --split "$k" --channels "$k" \
    --concurrency 1 --requests 20 --warmup 1s
done
load echo-256MiB-shm --op echo --bytes 256Mi --input shm --concurrency 1 --requests 40 --warmup 1s
kill -TERM $spid; wait $spid
tar czf "$top/load.tgz" -C "$out" . && rm -rf "$out"
