#!/usr/bin/env bash
# Runs the GPU tests and benchmarks on the GPU machine from a device bundle (see README,
# "GPU machine"). Usage there: source .device/env.sh; tests/bench/run_gpu.sh [--quick]
# Writes logs and JSON lines under $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bin=$(dirname "$(command -v periodogram_bench)")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/nvidia-smi.txt"
status=0
for t in cuda_resources_test kernel_cache_test device_context_test periodogram_cuda_test dense_cuda_test; do
  "$bin/$t" --gtest_brief=1 > "$out/$t.log" 2>&1 || { status=1; grep -A6 Failure "$out/$t.log" | head -40; }
  echo "$t: $(tail -1 "$out/$t.log")"
done
GPUCOMPUTE_TEST_BACKEND=cuda "$bin/periodogram_server_test" --gtest_brief=1 > "$out/periodogram_server_test_cuda.log" 2>&1 || { status=1; grep -A6 Failure "$out/periodogram_server_test_cuda.log" | head -40; }
echo "periodogram_server_test (cuda): $(tail -1 "$out/periodogram_server_test_cuda.log")"
# The CLI demo against a CUDA server process, then SIGTERM: it must drain and exit 0.
rm -f /tmp/gc.port
gpucompute-server --address=127.0.0.1:0 --port_file=/tmp/gc.port --backend=cuda > "$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 300); do [ -s /tmp/gc.port ] && break; sleep 0.1; done
gpucompute --target="127.0.0.1:$(cat /tmp/gc.port)" demo || status=1
kill -TERM $spid; wait $spid; echo "server exit status after SIGTERM: $?"
# The Python client against the CUDA server, checked against Astropy references made on the
# build machine (tests/python/gpu/astropy_fixture_check.py make; bundled as fixture.npz).
root=$(dirname "$bin")
if [ -f "$root/fixture.npz" ] && [ -d "$root/python" ]; then
  rm -f /tmp/gc2.port
  gpucompute-server --address=127.0.0.1:0 --port_file=/tmp/gc2.port --backend=cuda > "$out/server2.log" 2>&1 &
  spid=$!
  for _ in $(seq 1 300); do [ -s /tmp/gc2.port ] && break; sleep 0.1; done
  PYTHONPATH="$root/python" python3 tests/python/gpu/astropy_fixture_check.py check "$root/fixture.npz" \
    "127.0.0.1:$(cat /tmp/gc2.port)" > "$out/astropy_check.log" 2>&1 || status=1
  grep -E "FAIL|passed|backend|Error|error" "$out/astropy_check.log" | head -20
  kill -TERM $spid; wait $spid
fi
echo "tests status $status"
[ "${SKIP_BENCH:-0}" = 1 ] && exit $status
periodogram_bench "$@" 2>"$out/bench.err" | tee "$out/bench.jsonl"
dense_bench "$@" 2>"$out/dense_bench.err" | tee "$out/dense_bench.jsonl"
if [ -f "$(dirname "$bin")/peers.py" ]; then
  python3 "$(dirname "$bin")/peers.py" ls 2>"$out/peers.err" | tee "$out/peers.jsonl"
  python3 "$(dirname "$bin")/peers.py" dense 2>"$out/dense_peers.err" | tee "$out/dense_peers.jsonl"
fi
exit $status
