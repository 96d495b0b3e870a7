#!/usr/bin/env bash
# The LETKF benchmark (tests/bench/letkf_bench.py) on the GPU machine: a CUDA server and a CPU
# server (the host's cores) side by side, PyTorch in the same process as the client. Usage
# (bundle as docs/development.md "GPU machine": build/server/gpucompute-server and build/python):
#   source .dev/env.sh; tests/bench/letkf_gpu.sh [letkf_bench.py flags...]
# Writes $OUT (default gpu-out)/letkf.jsonl and letkf-servers.log. LETKF_CPU=0 leaves the CPU
# server out (its analysis of 10^6 variables takes minutes).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
here=$(dirname "$0")
root=$(dirname "$(dirname "$(command -v gpucompute-server)")")
# shellcheck source=tests/bench/cuda_server.sh
source "$here/cuda_server.sh"
log="$out/letkf-servers.log"
rm -f /tmp/letkf.metrics /tmp/letkf-cpu.port
start_server /tmp/letkf.port "$log" --metrics_port=0 --metrics_port_file=/tmp/letkf.metrics
for _ in $(seq 1 100); do [ -s /tmp/letkf.metrics ] && break; sleep 0.1; done
cpu=()
cpid=
if [ "${LETKF_CPU:-1}" = 1 ]; then
  gpucompute-server --address=127.0.0.1:0 --port_file=/tmp/letkf-cpu.port --backend=cpu >> "$log" 2>&1 &
  cpid=$!
  wait_for_port /tmp/letkf-cpu.port "$cpid" 300
  cpu=(--cpu-target "127.0.0.1:$(cat /tmp/letkf-cpu.port)")
fi
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^/{"card": "/; s/$/"}/' | tee -a "$out/letkf.jsonl"
PYTHONPATH="$root/python" python3 "$here/letkf_bench.py" --target "$target" \
  --metrics-port "$(cat /tmp/letkf.metrics)" "${cpu[@]}" "$@" \
  | tee -a "$out/letkf.jsonl"
status=${PIPESTATUS[0]}
kill -TERM "$spid" $cpid; wait "$spid" $cpid
exit "$status"
