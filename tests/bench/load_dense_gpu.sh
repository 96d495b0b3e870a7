#!/usr/bin/env bash
# Issue 3's batching figure from the project's own load tester, out of process: 256 concurrent
# one-row Dense requests, unary and over Submit streams, against a CUDA server with batching on
# (default flags) and one with it off (--dense_max_batch_size=1), for three model sizes: an
# 8 MiB layer (1024 -> 4096; transport-bound: the batched runs also measure Echo with the same
# bytes, --compare-echo), a 512 MiB layer and a 2 GiB stack of four (16384 -> 16384; an
# unbatched row then costs ~0.13 / ~0.5 ms of weight reads). Called by run_gpu.sh (ONLY=dense);
# writes load-dense-<model>-<mode>-<batching>.jsonl, packed into $OUT/load-dense.tgz (the
# device tool returns a limited number of files).
set -uo pipefail
top=${OUT:-gpu-out}; out=$(mktemp -d); mkdir -p "$top"
# shellcheck source=tests/bench/cuda_server.sh
source "$(dirname "$0")/cuda_server.sh"
start_server /tmp/gcd-on.port "$out/servers.log"
on_pid=$spid on_target=$target
start_server /tmp/gcd-off.port "$out/servers.log" --dense_max_batch_size=1
off_pid=$spid
declare -A targets=([on]="$on_target" [off]="$target")
declare -A model=([8MiB]="--in 1024 --out 4096 --layers 1" [512MiB]="--in 16384 --out 16384 --layers 1"
                  [2GiB]="--in 16384 --out 16384 --layers 4")
for m in 8MiB 512MiB 2GiB; do
  for mode in unary stream; do
    for batching in on off; do
      extra=""; [ "$batching" = on ] && [ "$m" = 8MiB ] && extra="--compare-echo"
      echo "==== gpucompute-load dense $m $mode batching $batching"
      # shellcheck disable=SC2086
      gpucompute-load --target "${targets[$batching]}" --progress off \
        --json "$out/load-dense-$m-$mode-$batching.jsonl" --op dense ${model[$m]} --rows 1 \
        --model-dtype bfloat16 --mode "$mode" --channels 8 --concurrency 256 --duration 5s \
        --warmup 1s $extra 2>>"$out/bench.err"
    done
  done
done
kill -TERM "$on_pid" "$off_pid"; wait "$on_pid" "$off_pid"
tar czf "$top/load-dense.tgz" -C "$out" . && rm -rf "$out"
