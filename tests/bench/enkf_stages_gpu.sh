#!/usr/bin/env bash
# The seed EnKF's server time with resident tensors in page-locked memory (the default) and in
# plain memory (--pinned_tensor_bytes=0), alternating fresh servers three times on one host
# (tests/bench/enkf_stages.py against each). Usage on the GPU machine (bundle as
# docs/development.md "GPU machine": build/server/gpucompute-server and build/python):
#   source .dev/env.sh; tests/bench/enkf_stages_gpu.sh
# Writes $OUT (default gpu-out)/enkf-stages.jsonl and enkf-stages-servers.log.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
here=$(dirname "$0")
root=$(dirname "$(dirname "$(command -v gpucompute-server)")")
# shellcheck source=tests/bench/cuda_server.sh
source "$here/cuda_server.sh"
status=0
for round in 1 2 3; do
  for pinned in 0 -1; do
    start_server /tmp/enkf-stages.port "$out/enkf-stages-servers.log" --metrics_port=0 \
      --metrics_port_file=/tmp/enkf-stages.metrics --pinned_tensor_bytes="$pinned"
    for _ in $(seq 1 100); do [ -s /tmp/enkf-stages.metrics ] && break; sleep 0.1; done
    PYTHONPATH="$root/python" timeout 300 python3 "$here/enkf_stages.py" --target "$target" \
      --metrics-port "$(cat /tmp/enkf-stages.metrics)" \
      --label "round $round, --pinned_tensor_bytes=$pinned" | tee -a "$out/enkf-stages.jsonl" || status=1
    kill -TERM "$spid"; wait "$spid"
    rm -f /tmp/enkf-stages.metrics
  done
done
exit $status
