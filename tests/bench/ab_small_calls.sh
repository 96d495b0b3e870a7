#!/usr/bin/env bash
# Small-call latency of two server builds on one host, alternating, so that a change can be
# told from the host's own spread (concurrency-1 latency on one GPU host swings by 1.5x between
# runs minutes apart). On the GPU machine, from a bundle holding both servers:
#   source .dev/env.sh; tests/bench/ab_small_calls.sh SERVER_A SERVER_B [rounds]
# Each round starts A, then B (CUDA backend), and runs gpucompute-load at concurrency 1 against
# each: a 1,000 x 1,000 periodogram and one dense row (1024 -> 4096 bf16), each beside an Echo
# of its bytes. Prints gpucompute-load's table lines, labelled.
set -uo pipefail
# shellcheck source=tests/bench/cuda_server.sh
source "$(dirname "$0")/cuda_server.sh"
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
a=$1 b=$2 rounds=${3:-2}
status=0
for round in $(seq 1 "$rounds"); do
  for server in "$a" "$b"; do
    rm -f /tmp/ab.port
    "$server" --address=127.0.0.1:0 --port_file=/tmp/ab.port --backend=cuda --log_level=warn &
    pid=$!
    wait_for_port /tmp/ab.port "$pid"
    for op in "--op periodogram --samples 1000 --frequencies 1000" \
              "--op dense --in 1024 --out 4096 --layers 1 --rows 1 --model-dtype bfloat16"; do
      echo "== round $round $(basename "$server") $op"
      # shellcheck disable=SC2086  # $op is several flags
      gpucompute-load --target "127.0.0.1:$(cat /tmp/ab.port)" --progress off --concurrency 1 $op \
        --compare-echo --duration 4s --warmup 1s 2>&1 | grep -E '^c=1|echo  ' || status=1
    done
    kill -TERM $pid; wait $pid || status=1
  done
done
exit $status
