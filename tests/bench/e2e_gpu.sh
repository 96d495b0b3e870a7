#!/usr/bin/env bash
# End-to-end figures on the GPU machine against one CUDA server (shared memory allowed): what a
# user's call costs through the Python client next to the raw stub, NumPy on the host and
# PyTorch on the GPU (tests/bench/e2e_bench.py), then the C++ client's figures for the same
# cases at concurrency 1 from gpucompute-load. Usage there (bundle as docs/development.md
# "GPU machine"):
#   source .dev/env.sh; tests/bench/e2e_gpu.sh [e2e_bench.py flags, e.g. --quick]
# Writes $OUT (default gpu-out)/e2e_bench.jsonl, e2e-load-<case>[-r<round>].jsonl,
# e2e-assimilate-server.jsonl (when assimilate_server_bench is bundled), e2e-metrics.txt (the
# server's metrics at the end: gpucompute_batch_stage_duration_seconds), e2e-servers.log and
# e2e-bench.err. gpucompute-load's dense rows travel in the model's dtype (bfloat16: 2 KiB, the
# Python rows are float32) and its EnKF draws the perturbations on the server.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
here=$(dirname "$0")
root=$(dirname "$(dirname "$(command -v gpucompute-server)")")
# shellcheck source=tests/bench/cuda_server.sh
source "$here/cuda_server.sh"
start_server /tmp/gce.port "$out/e2e-servers.log" --allow_shared_memory --metrics_port=0 \
  --metrics_port_file=/tmp/gce.metrics
status=0
PYTHONPATH="$root/python" python3 "$here/e2e_bench.py" --target "$target" "$@" \
  2>>"$out/e2e-bench.err" | tee "$out/e2e_bench.jsonl" || status=1
load() {  # case name, then gpucompute-load flags (concurrency 1 unless they say otherwise)
  local name=$1; shift
  echo "==== gpucompute-load $name: $*"
  gpucompute-load --target "$target" --progress off --concurrency "${CONCURRENCY:-1}" \
    --json "$out/e2e-load-$name.jsonl" "$@" 2>>"$out/e2e-bench.err" || status=1
}
# Small requests under load: throughput at concurrency 64 against Echo's.
CONCURRENCY=64 load periodogram-c64 --op periodogram --samples 1000 --frequencies 1000 \
  --compare-echo --duration 5s --warmup 1s
# A small call at concurrency 1 against an Echo of its input bytes, the two interleaved call by
# call (gpucompute-load's mix; each op's own figures), in ROUNDS (default 3) rounds of 10 s:
# the figure is the median over rounds of (p50 - Echo's p50). Not --compare-echo's separate
# phases: on one H100 host the periodogram measured +46 / +104 / +123 µs over Echo in phases
# and +37 / +51 / +33 interleaved, the same binaries in the same minutes
# (results/2026-11-27-nvidia-h100-small-calls-interleaved.jsonl).
for round in $(seq "${ROUNDS:-3}"); do
  load "periodogram-r$round" --op mix --mix periodogram:1,echo:1 --bytes 24000 --samples 1000 \
    --frequencies 1000 --duration 10s --warmup 1s
  load "dense_row-r$round" --op mix --mix dense:1,echo:1 --bytes 2048 --in 1024 --out 4096 \
    --layers 1 --rows 1 --model-dtype bfloat16 --duration 10s --warmup 1s
done
load enkf --op assimilate --n 3000 --m 3000 --members 3000 --method enkf --variants 1 \
  --requests 7 --warmup 2s
load echo-72MB --op echo --bytes 72000000 --variants 1 --requests 7 --warmup 1s
load echo-4KiB --op echo --bytes 4Ki --duration 5s --warmup 1s
# Where the GPU batches spent their time over the whole run (mean per stage and op).
curl -s "http://127.0.0.1:$(cat /tmp/gce.metrics)/metrics" > "$out/e2e-metrics.txt" || status=1
grep '^gpucompute_batch_stage_duration_seconds_\(sum\|count\)' "$out/e2e-metrics.txt"
kill -TERM "$spid"; wait "$spid" || status=1
# The C++ client's plain Assimilate call (parallel transfers) against a server of its own.
if command -v assimilate_server_bench > /dev/null; then
  assimilate_server_bench --reps=7 2>>"$out/e2e-bench.err" | tee "$out/e2e-assimilate-server.jsonl" || status=1
fi
exit $status
