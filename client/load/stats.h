// Per-request records and what a level's figures are made of: exact percentiles (nearest rank
// on the sorted latencies), throughput, errors by status code, the server's queue/compute split
// and batch sizes.
//
// Records are written by one thread at a time (a closed-loop slot's own vector, or an open-loop
// arrival's own entry) and merged after the level: no locks on the hot path, no histogram error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace gpucompute::load {

// One request. Times are nanoseconds since the level started.
struct Record {
  int64_t start_ns = 0;      // sent (open loop: its scheduled arrival time)
  int64_t end_ns = -1;       // completed; -1: never sent (dropped) or never completed
  int32_t code = -1;         // grpc::StatusCode; kDropped: not sent (open-loop overflow)
  int32_t job = 0;           // index into the workload's jobs
  int64_t response_bytes = 0;
  // Server timings (-1 when the server did not report them).
  int64_t decode_us = -1;  // unary calls only (Submit's timing has none)
  int64_t queue_us = -1;
  int64_t compute_us = -1;
  int64_t total_us = -1;
  int32_t batch_requests = -1;  // 0 from calls that are not batched (Echo): not counted
  bool measured = false;     // counts toward the level's figures (not warm-up)

  int64_t latency_ns() const { return end_ns - start_ns; }
};

inline constexpr int32_t kDropped = -2;

// "OK", "UNAVAILABLE", ..., "DROPPED" (kDropped), "CODE_42".
std::string StatusCodeName(int32_t code);

// Nearest-rank percentile (q in [0, 1]) of sorted values: the smallest value with at least
// q * n values at or below it. 0 for empty input.
double Percentile(absl::Span<const double> sorted, double q);

struct Distribution {
  int64_t count = 0;
  double min = 0, mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;
};
// Sorts `values` and summarises them.
Distribution Summarize(std::vector<double> values);

// What a job contributes to the byte counts (fixed per job, from the workload).
struct JobSize {
  int64_t request_bytes = 0;   // serialized request message
  int64_t payload_bytes = 0;   // the op's input tensor bytes, however they travel
};

// The figures of one set of records (a level, or one op of a mixed level).
struct Figures {
  int64_t requests = 0;        // measured requests that completed (any status)
  int64_t ok = 0;
  int64_t errors = 0;
  int64_t dropped = 0;         // open loop: arrivals not sent (too many in flight)
  std::map<std::string, int64_t> errors_by_code;
  double seconds = 0;          // the measurement window
  double requests_per_s = 0;   // completed OK per second
  double request_bytes_per_s = 0;   // serialized request messages sent
  double response_bytes_per_s = 0;  // serialized response messages received
  double payload_bytes_per_s = 0;   // input tensor bytes (= GB/s figure for echo)
  Distribution latency_us;     // OK requests, client-measured round trip
  Distribution decode_us;      // server: receipt to admission (unary calls)
  Distribution queue_us;       // server: admission to dispatch
  Distribution compute_us;     // server: the batch's compute
  Distribution server_total_us;  // server: receipt to response
  Distribution batch_requests;   // requests coalesced in the launch that ran each one
  std::map<int64_t, int64_t> batch_histogram;  // batch size -> requests
};

// Figures of the records with measured == true (and, when `job_filter` is non-empty, a job in
// it) over a window of `seconds`.
Figures ComputeFigures(absl::Span<const Record> records, absl::Span<const JobSize> jobs,
                       double seconds, absl::Span<const int> job_filter = {});

}  // namespace gpucompute::load
