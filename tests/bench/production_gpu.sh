#!/usr/bin/env bash
# Faults, worker mode, several GPUs and soaks on the GPU machine, from a device bundle (see
# docs/development.md "GPU machine"):
#   source .device/env.sh; tests/bench/production_gpu.sh faults|workers|multigpu|soak [seconds]
# faults:   fault_injection_check.py: GPU out of memory on one GPU; a sticky fault on one GPU
#           of one (CUDA_VISIBLE_DEVICES=0) and, with two GPUs, on the second of two.
# workers:  worker mode (--workers=-1): a sticky fault on one GPU's worker (fault_injection_check.py
#           workers), then the periodogram throughput through the front with one GPU and two.
# multigpu: gpucompute-load on three loads (a compute-bound periodogram, also with its inputs
#           resident and its power discarded; one-row dense with 256 callers; many small
#           assimilate problems) against a server that sees one GPU, then two, in one process and
#           in worker mode, with Echo of the same bytes beside each; JSON lines, each load's
#           ratio and the front's cost, and per server its busiest threads and the load
#           tester's (multigpu-threads-<mode>-<case>-<gpus>.txt) and its queue, compute,
#           batch-stage and per-GPU batch metrics (multigpu-metrics-<mode>-<case>-<gpus>.txt).
#           MULTIGPU_SECONDS (default 20) per level; MULTIGPU_MODES (default "single workers";
#           also handoff: worker mode with --worker_connections=handoff);
#           MULTIGPU_CASES: only these cases (default all); MULTIGPU_CHANNELS: every load over
#           this many channels instead of its own; MULTIGPU_CONCURRENCY: with this many callers; MULTIGPU_SERVER_FLAGS: more server flags
#           (e.g. --worker_channels=16); MULTIGPU_TAG: a label on each line (and in the ratios).
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
    # run), in one process and in worker mode (--workers=-1), then the ratios. Dense loads a
    # model given at start (--model_manifest, on every worker), like the one gpucompute-load
    # would load. MULTIGPU_MODES: single, workers (the front proxies), handoff (the front hands
    # each connection to a worker). Beside each load shape, Echo with the same bytes
    # per call, callers and channels: what the transport and the load tester carry with no
    # GPU work at all (the ceiling of a load that is not GPU-bound).
    seconds=${MULTIGPU_SECONDS:-20} tag_label=${MULTIGPU_TAG:-}
    read -r -a extra_server_flags <<< "${MULTIGPU_SERVER_FLAGS:-}"
    lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Socket|NUMA node\(s\))" > "$out/lscpu-multigpu.txt"
    start_server() {  # mode, visible GPUs; sets spid
      local flags=(--address=127.0.0.1:0 --port_file=/tmp/mg.port --backend=cuda --log_level=warn
                   --metrics_port=0 --metrics_port_file=/tmp/mg.metrics)
      [ "$1" = workers ] && flags+=(--workers=-1)
      [ "$1" = handoff ] && flags+=(--workers=-1 --worker_connections=handoff)
      # The dense load's model, on every worker from the start (a handed connection's
      # LoadModel would reach its own worker only).
      flags+=(--model_manifest="mgdense=$out/mgdense/manifest.json")
      flags+=("${extra_server_flags[@]}")
      rm -f /tmp/mg.port /tmp/mg.metrics
      CUDA_VISIBLE_DEVICES=$2 gpucompute-server "${flags[@]}" >> "$out/multigpu_server.log" 2>&1 &
      spid=$!
      for _ in $(seq 1 600); do [ -s /tmp/mg.port ] && [ -s /tmp/mg.metrics ] && break; sleep 0.1; done
    }
    # One 1,024 -> 4,096 layer (LayerNorm, GELU), bfloat16: the shape gpucompute-load loads.
    python3 - "$out/mgdense" <<'EOF'
import json, os, sys
import numpy as np
folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
rng = np.random.default_rng(1)
np.save(f"{folder}/w.npy", (rng.standard_normal((1024, 4096)) / 32).astype(np.float32))
np.save(f"{folder}/b.npy", (0.1 * rng.standard_normal(4096)).astype(np.float32))
json.dump({"dtype": "bfloat16", "layers": [{"weight": "w.npy", "bias": "b.npy", "layernorm": True,
                                           "activation": "gelu_tanh"}]},
          open(f"{folder}/manifest.json", "w"))
EOF
    multigpu_case() {  # mode, name, op (for the metrics), GPU sets, gpucompute-load flags...
      local mode=$1 name=$2 op=$3 sets=$4 visible tag arg
      shift 4
      if [ -n "${MULTIGPU_CASES:-}" ] && [[ " $MULTIGPU_CASES " != *" $name "* ]]; then return; fi
      local load_flags=() prev=
      for arg in "$@"; do  # --channels N and --concurrency N, or MULTIGPU_CHANNELS's and _CONCURRENCY's
        [ -n "${MULTIGPU_CHANNELS:-}" ] && [ "$prev" = --channels ] && arg=$MULTIGPU_CHANNELS
        [ -n "${MULTIGPU_CONCURRENCY:-}" ] && [ "$prev" = --concurrency ] && arg=$MULTIGPU_CONCURRENCY
        load_flags+=("$arg"); prev=$arg
      done
      for visible in $sets; do
        [ "$visible" = 0,1 ] && [ "$gpus" -lt 2 ] && break
        start_server "$mode" "$visible"
        tag=$mode-$name-${visible//,/+}${tag_label:+-$tag_label}
        # The busiest threads of the server (gc-disp-<op>, gc-poller-<gpu>, gc-completion,
        # gRPC's; in worker mode the front's and its workers') and of the load tester, 8 s in.
        (sleep 8; pids=$(pgrep -d, -P "$spid" gpucompute-ser)
         top -H -b -w 160 -n 2 -d 3 -p "$spid,${pids:+$pids,}$(pgrep -n gpucompute-load)" \
           | awk '/^top/{n++} n==2' | head -60) > "$out/multigpu-threads-$tag.txt" 2>&1 &
        tpid=$!
        gpucompute-load --target "127.0.0.1:$(cat /tmp/mg.port)" "${load_flags[@]}" \
          --duration "${seconds}s" --warmup 3s --progress off --json /dev/stdout \
          2>> "$out/multigpu_load.err" | grep "^{" \
          | sed "s/^{/{\"mode\":\"$mode\",\"case\":\"$name\",\"visible_gpus\":\"$visible\",\"tag\":\"$tag_label\",/" \
          | tee -a "$out/multigpu.jsonl"
        wait $tpid
        curl -s "http://127.0.0.1:$(cat /tmp/mg.metrics)/metrics" \
          | grep -E "^gpucompute_((queue_duration_seconds|compute_duration_seconds|batch_size|batch_stage_duration_seconds)_(sum|count)\{.*op=\"$op\"|gpu_batches_total)" \
          > "$out/multigpu-metrics-$tag.txt"
        kill -TERM $spid; wait $spid
      done
    }
    for mode in ${MULTIGPU_MODES:-single workers}; do
      # Compute-bound on the GPU of its day: one float64 series of 16,384 samples x 65,536
      # frequencies per request (1.07e9 pairs), 0.4 MB in and 0.5 MB out, 64 callers.
      multigpu_case $mode periodogram periodogram "0 0,1" --op periodogram --samples 16384 \
        --frequencies 65536 --series 1 --dtype float64 --concurrency 64 --channels 8
      # The same GPU work without the bulk bytes: inputs resident (uploaded once), the power
      # left on the server, the 5 highest peaks returned (a survey's call).
      # (In worker mode resident inputs live in the worker that received them, so every call
      # goes there: run in one process only.)
      [ "$mode" = single ] && multigpu_case $mode periodogram_resident periodogram "0 0,1" --op periodogram \
        --samples 16384 --frequencies 65536 --series 1 --dtype float64 --concurrency 64 \
        --channels 8 --input handle --output discard --top-k 5
      # Echo of the periodogram's bytes (0.45 MB each way), same callers and channels.
      multigpu_case $mode echo_periodogram echo "0" --op echo --bytes 448Ki --concurrency 64 \
        --channels 8
      # One row each (1024 -> 4096 bf16), 256 callers: the dense batcher's load.
      multigpu_case $mode dense_row dense "0 0,1" --op dense --model mgdense --in 1024 \
        --rows 1 --model-dtype bfloat16 --concurrency 256 --channels 8
      multigpu_case $mode echo_dense_row echo "0" --op echo --bytes 5Ki --concurrency 256 \
        --channels 8
      # Many small problems: 64 ETKF analyses of n = m = 40, N = 20 per request, 64 callers.
      multigpu_case $mode assimilate_small assimilate "0 0,1" --op assimilate --n 40 --m 40 \
        --members 20 --problems 64 --method etkf --concurrency 64 --channels 8
    done
    python3 - "$out/multigpu.jsonl" <<'EOF' | tee -a "$out/multigpu.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"mode\"")]
rate = {(r["mode"], r["case"], r.get("tag", ""), r["visible_gpus"]): r["requests_per_s"] for r in rows}
for mode, case, tag in dict.fromkeys((r["mode"], r["case"], r.get("tag", "")) for r in rows):
    one, two = rate.get((mode, case, tag, "0")), rate.get((mode, case, tag, "0,1"))
    if one and two:
        print(json.dumps({"summary": "two GPUs vs one", "mode": mode, "case": case, "tag": tag,
                          "one_gpu_rps": one, "two_gpu_rps": two, "ratio": two / one,
                          "target": 1.8}))
for case, tag in dict.fromkeys((r["case"], r.get("tag", "")) for r in rows):
    for mode in ("workers", "handoff"):
        single, front = rate.get(("single", case, tag, "0")), rate.get((mode, case, tag, "0"))
        if single and front:
            print(json.dumps({"summary": "worker mode vs one process, one GPU", "mode": mode,
                              "case": case, "tag": tag, "single_rps": single, "workers_rps": front,
                              "front_cost": 1 - front / single, "target": 0.10}))
EOF
    ;;
  soak)
    python3 tests/bench/soak.py "$bin/gpucompute-server" "$bin/gpucompute-load" "${2:-600}" "$out" || status=1
    ;;
  *) echo "unknown: $what"; exit 2 ;;
esac
echo "production $what status $status"
exit $status
