#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in build-fuzz/ and runs
# each for SECONDS (default 60) from its seed corpus; fails on any finding. Crash inputs and the
# grown corpora stay under build-fuzz/. CI runs it after ctest (scripts/test.sh).
#   scripts/fuzz.sh [SECONDS]      build and fuzz
#   scripts/fuzz.sh --seeds        rewrite the committed seeds (tests/fuzz/corpus/) from fuzz_seeds.cc
# Reproduce a finding: build-fuzz/tests/fuzz/<target> build-fuzz/findings/<target>/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz
targets=(request_fuzzer model_upload_fuzzer tensor_stream_fuzzer operation_fuzzer shared_memory_fuzzer)
# Each target's committed seeds: operation_fuzzer runs the requests request_fuzzer decodes.
seeds_of() { if [ "$1" = operation_fuzzer ]; then echo tests/fuzz/corpus/request_fuzzer; else echo "tests/fuzz/corpus/$1"; fi; }

cmake -S . -B "$build" -G Ninja -DGPUCOMPUTE_CUDA=OFF -DGPUCOMPUTE_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1" >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" fuzz_seeds

if [ "${1:-}" = "--seeds" ]; then
  for t in "${targets[@]}"; do rm -rf "$(seeds_of "$t")"; mkdir -p "$(seeds_of "$t")"; done
  "$build/tests/fuzz/fuzz_seeds" tests/fuzz/corpus
  exit 0
fi

seconds="${1:-60}"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  # A request bigger than 64 KiB adds nothing that a small one does not reach; -rss_limit_mb and
  # -malloc_limit_mb catch an allocation that the input's sizes drive beyond any limit.
  echo "fuzz.sh: $t for ${seconds}s"
  if ! "$build/tests/fuzz/$t" "$corpus" "$(seeds_of "$t")" -dict=tests/fuzz/gpucompute.dict \
       -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -malloc_limit_mb=1024 -artifact_prefix="$findings/" -print_final_stats=1 \
       >"$build/$t.log" 2>&1; then
    status=1
    tail -n 60 "$build/$t.log"
    echo "fuzz.sh: $t found a problem; inputs in $findings/" >&2
  else
    grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)" \
      "$build/$t.log" || true
  fi
done
exit $status
