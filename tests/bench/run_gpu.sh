#!/usr/bin/env bash
# Runs the GPU tests and benchmarks on the GPU machine from a device bundle (see
# docs/development.md "GPU machine").
# Usage there: source .device/env.sh; tests/bench/run_gpu.sh [--quick]
# Writes under $OUT (or ./gpu-out): tests.log (every test's output), servers.log, and JSON
# lines per benchmark. ONLY=dense|periodogram|assimilate limits the benchmarks to one operation;
# ONLY=service runs the stream, resident-tensor, metrics and load-tester tests on the CUDA
# server and the load benchmarks (load_gpu.sh); SKIP_BENCH=1 runs the tests only.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bin=$(dirname "$(command -v gpucompute-server)")
root=$(dirname "$bin")
only=${ONLY:-all}
log="$out/tests.log"; : > "$log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/nvidia-smi.txt"
status=0
run_test() {  # name, then the command
  local name=$1; shift
  echo "==== $name" >> "$log"
  local tmp; tmp=$(mktemp)
  "$@" > "$tmp" 2>&1 || { status=1; grep -B2 -A8 -E "Failure|FAILED|Error" "$tmp" | head -40; }
  cat "$tmp" >> "$log"
  echo "$name: $(grep -E "PASSED|FAILED|passed|failed" "$tmp" | tail -1)"
  rm -f "$tmp"
}
# ONLY limits the operation tests too (a smaller bundle then suffices).
ops="periodogram dense assimilate"; [ "$only" != all ] && ops=$only
[ "$only" = service ] && ops=""
for t in cuda_resources_test kernel_cache_test device_context_test slot_cache_test cufft_plan_test fft_plans_test completion_poller_test \
         periodogram_batch_plan_test dense_batch_plan_test assimilate_batch_plan_test; do
  run_test "$t" "$bin/$t" --gtest_brief=1
done
for op in $ops; do
  run_test "${op}_cuda_test" "$bin/${op}_cuda_test" --gtest_brief=1
  run_test "${op}_server_test (cuda)" env GPUCOMPUTE_TEST_BACKEND=cuda "$bin/${op}_server_test" --gtest_brief=1
done

# shellcheck source=tests/bench/cuda_server.sh
source "$(dirname "$0")/cuda_server.sh"
# The CLI demo against a CUDA server process, then SIGTERM: it must drain and exit 0.
start_server /tmp/gc.port "$out/servers.log"
gpucompute --target="$target" demo | tee -a "$log" || status=1
kill -TERM $spid; wait $spid; echo "server exit status after SIGTERM: $?"
# The Python client against the CUDA server: periodograms checked against Astropy references
# made on the build machine (tests/python/gpu/astropy_fixture_check.py make; bundled as
# fixture.npz), dense models and assimilation against NumPy float64 (tests/python/test_dense*.py,
# test_assimilate*.py, with the Lorenz-96 twin experiment).
if [ -d "$root/python" ]; then
  if [ -f "$root/fixture.npz" ] && [ "$only" != dense ]; then
    start_server /tmp/gc2.port "$out/servers.log"
    run_test "astropy fixture check" env PYTHONPATH="$root/python" python3 tests/python/gpu/astropy_fixture_check.py \
      check "$root/fixture.npz" "$target"
    kill -TERM $spid; wait $spid
  fi
  declare -A pytests=([dense]="tests/python/test_dense.py tests/python/test_dense_client_local.py"
                      [assimilate]="tests/python/test_assimilate.py tests/python/test_assimilate_lorenz96.py")
  for op in $ops; do
    [ -n "${pytests[$op]:-}" ] || continue
    # shellcheck disable=SC2086
    run_test "python $op tests (cuda)" env PYTHONPATH="$root/python" GPUCOMPUTE_SERVER="$bin/gpucompute-server" \
      GPUCOMPUTE_BACKEND=cuda python3 -m pytest -q -p no:cacheprovider ${pytests[$op]}
  done
fi
if [ "$only" = all ] || [ "$only" = service ]; then
  run_test "metrics_server_test (cuda)" env GPUCOMPUTE_TEST_BACKEND=cuda "$bin/metrics_server_test" --gtest_brief=1
  run_test "python service tests (cuda)" env PYTHONPATH="$root/python" GPUCOMPUTE_SERVER="$bin/gpucompute-server" \
    GPUCOMPUTE_LOAD="$bin/gpucompute-load" GPUCOMPUTE_BACKEND=cuda python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_stream.py tests/python/test_resident_tensors.py tests/python/test_metrics.py tests/python/test_load.py
fi
echo "tests status $status"
[ "${SKIP_BENCH:-0}" = 1 ] && exit $status
peers=""; [ -f "$root/peers.py" ] && peers="$root/peers.py"
if [ "$only" = all ] || [ "$only" = periodogram ]; then
  periodogram_bench "$@" 2>>"$out/bench.err" | tee "$out/periodogram_bench.jsonl"
  [ -n "$peers" ] && python3 "$peers" ls 2>>"$out/bench.err" | tee "$out/periodogram_peers.jsonl"
fi
if [ "$only" = all ] || [ "$only" = dense ]; then
  dense_bench "$@" 2>>"$out/bench.err" | tee "$out/dense_bench.jsonl"
  # One row sits at its bound, within the run-to-run noise: four more processes time it (and
  # the 4-layer stack's row) for the spread.
  for _ in 1 2 3 4; do
    dense_bench --only=rows1/bf16/auto/flush 2>>"$out/bench.err" | tee -a "$out/dense_bench_one_row_repeats.jsonl"
  done
  # Batching on vs off, 256 callback-client callers, by model size: an 8 MiB layer and a
  # 32 MiB 4-layer stack (transport-bound: the first run also measures the Echo ceiling of the
  # same calls), 512 MiB and 2 GiB stacks of 8192 <-> 16384 layers (one unbatched row costs
  # ~0.13 / ~0.5 ms of weight reads). The 8 MiB layer once more with a thread per caller.
  for shape in "--layers=1" "--layers=1 --client=sync --no-echo" "--layers=4 --no-echo" \
      "--in=8192 --out=16384 --layers=2 --no-echo" "--in=8192 --out=16384 --layers=8 --seconds=5 --no-echo"; do
    # shellcheck disable=SC2086
    dense_server_bench --backend=cuda --seconds=3 --concurrency=256 $shape 2>>"$out/bench.err" \
      | tee -a "$out/dense_server_bench.jsonl"
  done
  # The same question from gpucompute-load, out of process, unary and over Submit streams.
  if command -v gpucompute-load > /dev/null; then
    OUT=$out "$(dirname "$0")/load_dense_gpu.sh"
  else
    echo "no gpucompute-load in the bundle: load_dense_gpu.sh skipped"
  fi
  [ -n "$peers" ] && python3 "$peers" dense 2>>"$out/bench.err" | tee "$out/dense_peers.jsonl"
fi
if [ "$only" = all ] || [ "$only" = assimilate ]; then
  assimilate_bench "$@" 2>>"$out/bench.err" | tee "$out/assimilate_bench.jsonl"
  # The seed problem (n = m = N = 3000) end to end through the server: transfer vs compute.
  assimilate_server_bench --backend=cuda 2>>"$out/bench.err" | tee "$out/assimilate_server_bench.jsonl"
  [ -n "$peers" ] && python3 "$peers" enkf enkf-large 2>>"$out/bench.err" | tee "$out/assimilate_peers.jsonl"
fi
if [ "$only" = all ] || [ "$only" = service ]; then
  OUT=$out "$(dirname "$0")/load_gpu.sh"
fi
exit $status
