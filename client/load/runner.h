// One level of a run: a closed loop (`concurrency` requests always in flight, each slot sending
// its next request when the last one completes) or an open loop (requests sent at scheduled
// arrival times whatever the server does; latency counted from the scheduled time, so a slow
// server is not hidden by a slowed-down client). Warm-up first, excluded from the figures.
//
// Measured requests: closed loop with a duration, those completing inside
// [warmup, warmup + duration]; with --requests N, the N requests sent after the warm-up; open
// loop, the arrivals scheduled after the warm-up.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/load/channels.h"
#include "client/load/config.h"
#include "client/load/stats.h"
#include "client/load/workload.h"

namespace gpucompute::load {

struct LevelPlan {
  int concurrency = 0;      // closed loop when > 0
  double rate = 0;          // open loop (requests/s) when > 0
  Arrival arrival = Arrival::kConstant;
  Mode mode = Mode::kUnary;
  absl::Duration warmup = absl::ZeroDuration();
  absl::Duration duration = absl::Seconds(10);
  int64_t requests = 0;     // > 0: measured requests instead of a duration
  absl::Duration timeout = absl::Seconds(30);
  int streams_per_channel = 1;
  int64_t max_in_flight = 100000;
  uint64_t seed = 1;
  std::string client_id;
};

// Live counters for the progress line, and a stop switch (SIGINT).
struct LiveCounters {
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> elapsed_ns{0};   // updated by the runner's waiting thread
  std::atomic<bool> measuring{false};   // past the warm-up
  const std::atomic<bool>* stop = nullptr;  // when set and true, the level ends early
};

struct LevelRun {
  std::vector<Record> records;  // every request, warm-up ones with measured == false
  double seconds = 0;           // the measurement window
  bool interrupted = false;
};

// Runs one level; `tick` is called about every 250 ms from the calling thread (progress line).
absl::StatusOr<LevelRun> RunLevel(const LevelPlan& plan, const Workload& workload,
                                  const std::vector<LoadChannel>& channels, LiveCounters& live,
                                  const std::function<void()>& tick);

}  // namespace gpucompute::load
