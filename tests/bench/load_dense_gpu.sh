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
rm -f /tmp/gcd-on.port /tmp/gcd-off.port
gpucompute-server --address=127.0.0.1:0 --port_file=/tmp/gcd-on.port --backend=cuda \
  >> "$out/servers.log" 2>&1 &
on_pid=$!
gpucompute-server --address=127.0.0.1:0 --port_file=/tmp/gcd-off.port --backend=cuda \
  --dense_max_batch_size=1 >> "$out/servers.log" 2>&1 &
off_pid=$!
for _ in $(seq 1 300); do [ -s /tmp/gcd-on.port ] && [ -s /tmp/gcd-off.port ] && break; sleep 0.1; done
declare -A target=([on]="127.0.0.1:$(cat /tmp/gcd-on.port)" [off]="127.0.0.1:$(cat /tmp/gcd-off.port)")
declare -A model=([8MiB]="--in 1024 --out 4096 --layers 1" [512MiB]="--in 16384 --out 16384 --layers 1"
                  [2GiB]="--in 16384 --out 16384 --layers 4")
for m in 8MiB 512MiB 2GiB; do
  for mode in unary stream; do
    for batching in on off; do
      extra=""; [ "$batching" = on ] && [ "$m" = 8MiB ] && extra="--compare-echo"
      echo "==== gpucompute-load dense $m $mode batching $batching"
      # shellcheck disable=SC2086
      gpucompute-load --target "${target[$batching]}" --progress off \
        --json "$out/load-dense-$m-$mode-$batching.jsonl" --op dense ${model[$m]} --rows 1 \
        --model-dtype bfloat16 --mode "$mode" --channels 8 --concurrency 256 --duration 5s \
        --warmup 1s $extra 2>>"$out/bench.err"
    done
  done
done
kill -TERM "$on_pid" "$off_pid"; wait "$on_pid" "$off_pid"
tar czf "$top/load-dense.tgz" -C "$out" . && rm -rf "$out"
