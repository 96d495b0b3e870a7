#!/usr/bin/env bash
# Issue 6 on the GPU machine, from a device bundle (see README, "GPU machine"):
#   source .device/env.sh; tests/bench/production_gpu.sh faults|workers|multigpu|soak [seconds]
# faults:   fault_injection_check.py: GPU out of memory on one GPU; a sticky fault on one GPU
#           of one (CUDA_VISIBLE_DEVICES=0) and, with two GPUs, on the second of two.
# workers:  worker mode (--workers=-1): a sticky fault on one GPU's worker (fault_injection_check.py
#           workers), then the periodogram throughput through the front with one GPU and two.
# multigpu: gpucompute-load on three loads (a compute-bound periodogram, one-row dense with 256
#           callers, many small assimilate problems) against a server that sees one GPU, then
#           two; JSON lines and each load's ratio, and for each server its busiest threads 10 s
#           in (top -H: multigpu-threads-<case>-<gpus>.txt) and its queue, compute, batch-stage
#           and per-GPU batch metrics at the end (multigpu-metrics-<case>-<gpus>.txt).
# soak:     soak.py for the given seconds (default 600) on the GPUs it sees.
# Results go under $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bin=$(dirname "$(command -v gpucompute-server)")
root=$(dirname "$bin")
export PYTHONPATH="$root/python"
what=${1:-faults}
gpus=$(nvidia-smi -L | grep -c "^GPU ")
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$out/nvidia-smi-$what.txt"
status=0
case "$what" in
  faults)
    CUDA_VISIBLE_DEVICES=0 python3 tests/python/gpu/fault_injection_check.py "$bin/gpucompute-server" \
      "$out/faults.jsonl" all || status=1
    if [ "$gpus" -ge 2 ]; then
      CUDA_VISIBLE_DEVICES=0,1 python3 tests/python/gpu/fault_injection_check.py "$bin/gpucompute-server" \
        "$out/faults.jsonl" sticky || status=1
    fi
    ;;
  workers)
    # Worker mode (--workers=-1): a sticky fault on the last GPU ends only its worker process.
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1))) python3 tests/python/gpu/fault_injection_check.py \
      "$bin/gpucompute-server" "$out/workers-faults.jsonl" workers || status=1
    # Throughput through the front: one GPU (one worker), then two, as in multigpu.
    for visible in 0 0,1; do
      [ "$visible" = 0,1 ] && [ "$gpus" -lt 2 ] && break
      rm -f /tmp/mg.port
      CUDA_VISIBLE_DEVICES=$visible gpucompute-server --workers=-1 --address=127.0.0.1:0 \
        --port_file=/tmp/mg.port --backend=cuda --log_level=warn >> "$out/workers_server.log" 2>&1 &
      spid=$!
      for _ in $(seq 1 600); do [ -s /tmp/mg.port ] && break; sleep 0.1; done
      gpucompute-load --target "127.0.0.1:$(cat /tmp/mg.port)" --op periodogram --samples 16384 \
        --frequencies 65536 --series 1 --dtype float64 --concurrency 64 --channels 8 \
        --duration 20s --warmup 3s --json /dev/stdout 2> "$out/workers_load.err" \
        | grep '^{' | sed "s/^{/{\"workers\":true,\"visible_gpus\":\"$visible\",/" \
        | tee -a "$out/workers-multigpu.jsonl"
      kill -TERM $spid; wait $spid
    done
    ;;
  multigpu)
    # Each load against a server that sees one GPU, then two (the one-GPU baseline in the same
    # run), then their ratio. Dense loads a model of its own (gpucompute-load does).
    multigpu_case() {  # name, op (for the metrics), gpucompute-load flags...
      local name=$1 op=$2 visible
      shift 2
      for visible in 0 0,1; do
        [ "$visible" = 0,1 ] && [ "$gpus" -lt 2 ] && break
        rm -f /tmp/mg.port /tmp/mg.metrics
        CUDA_VISIBLE_DEVICES=$visible gpucompute-server --address=127.0.0.1:0 --port_file=/tmp/mg.port \
          --backend=cuda --log_level=warn --metrics_port=0 --metrics_port_file=/tmp/mg.metrics \
          >> "$out/multigpu_server.log" 2>&1 &
        spid=$!
        for _ in $(seq 1 600); do [ -s /tmp/mg.port ] && break; sleep 0.1; done
        # The server's threads are named (gc-disp-<op>, gc-poller-<gpu>, gc-completion; gRPC's own).
        (sleep 10; top -H -b -n 2 -d 3 -p "$spid" | awk '/^top/{n++} n==2' | head -40) \
          > "$out/multigpu-threads-$name-$visible.txt" 2>&1 &
        tpid=$!
        gpucompute-load --target "127.0.0.1:$(cat /tmp/mg.port)" "$@" --duration 20s --warmup 3s \
          --json /dev/stdout 2>> "$out/multigpu_load.err" | grep "^{" \
          | sed "s/^{/{\"case\":\"$name\",\"visible_gpus\":\"$visible\",/" | tee -a "$out/multigpu.jsonl"
        wait $tpid
        curl -s "http://127.0.0.1:$(cat /tmp/mg.metrics)/metrics" \
          | grep -E "^gpucompute_((queue_duration_us|compute_duration_us|batch_size|batch_stage_duration_us)_(sum|count)\{op=\"$op\"|gpu_batches_total)" \
          > "$out/multigpu-metrics-$name-$visible.txt"
        kill -TERM $spid; wait $spid
      done
    }
    # Compute-bound: one float64 series of 16,384 samples x 65,536 frequencies per request
    # (1.07e9 pairs, ~1.1 ms of kernel) with 0.4 MB in and 0.5 MB out.
    multigpu_case periodogram periodogram --op periodogram --samples 16384 --frequencies 65536 \
      --series 1 --dtype float64 --concurrency 64 --channels 8
    # One row each (1024 -> 4096 bf16), 256 callers: the dense batcher's load.
    multigpu_case dense_row dense --op dense --in 1024 --out 4096 --layers 1 --rows 1 \
      --model-dtype bfloat16 --concurrency 256 --channels 8
    # Many small problems: 64 ETKF analyses of n = m = 40, N = 20 per request, 64 callers.
    multigpu_case assimilate_small assimilate --op assimilate --n 40 --m 40 --members 20 \
      --problems 64 --method etkf --concurrency 64 --channels 8
    python3 - "$out/multigpu.jsonl" <<'EOF' | tee -a "$out/multigpu.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"case\"")]
rate = {}
for r in rows:
    rate[(r["case"], r["visible_gpus"])] = r["figures"]["requests_per_s"] if "figures" in r else r["requests_per_s"]
for case in dict.fromkeys(r["case"] for r in rows):
    one, two = rate.get((case, "0")), rate.get((case, "0,1"))
    if one and two:
        print(json.dumps({"summary": "two GPUs vs one", "case": case, "one_gpu_rps": one,
                          "two_gpu_rps": two, "ratio": two / one, "target": 1.8}))
EOF
    ;;
  soak)
    python3 tests/bench/soak.py "$bin/gpucompute-server" "$bin/gpucompute-load" "${2:-600}" "$out" || status=1
    ;;
  *) echo "unknown: $what"; exit 2 ;;
esac
echo "production $what status $status"
exit $status
