// gpucompute's own metric families (`gpucompute_*`, base units): per-call outcomes and
// latency, the schedulers' queue/compute split, batch sizes and pending requests, and resident
// tensors (counted at scrape time by the tensor store). Device memory, kernel cache and model bytes are computed at scrape time from
// the runtime (server/runtime/runtime_metrics.h).
// docs/server.md's "Metrics" section lists every name.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/peer_connections.h"
#include "server/metrics/metrics.h"

namespace gpucompute::metrics {

// What one operation's scheduler records. Null members (a scheduler built without metrics,
// as in unit tests) record nothing.
struct SchedulerMetrics {
  Histogram* queue_seconds = nullptr;    // per request: enqueue -> dispatch (or drop)
  Histogram* compute_seconds = nullptr;  // per request: dispatch -> results ready (its batch's)
  Histogram* batch_size = nullptr;  // per launch: requests in it
  Gauge* pending = nullptr;         // requests queued, not yet dispatched
};

// Where a GPU batch's time goes, once per batch (the CUDA backend records it; null members
// record nothing): launch, from the backend taking the batch to its work being queued on a
// stream (waiting for a slot, packing, copies and launches); device, from then until the
// batch is seen finished (the GPU's work and the copy back); finish, unpacking the results
// (the replies are sent after it).
struct BatchStageMetrics {
  Histogram* launch_seconds = nullptr;
  Histogram* device_seconds = nullptr;
  Histogram* finish_seconds = nullptr;
};

// What the tensor store holds now.
struct ResidentTensorCounts {
  int64_t tensors = 0;
  int64_t bytes = 0;
};

// The outcome counters and latency of one operation's calls, resolved once.
class CallMetrics {
 public:
  // Counts one finished call (`code` OK: success, else a failure with that code) and observes
  // its duration (all outcomes). Lock-free after the first failure with a given code.
  void Record(absl::StatusCode code, absl::Duration total);

 private:
  friend class ServerMetrics;
  static constexpr int kCodes = 17;  // absl::StatusCode 0 (OK) .. 16 (UNAUTHENTICATED)

  std::string op_;
  Counter* success_ = nullptr;
  Family<Counter>* failure_family_ = nullptr;
  std::array<std::atomic<Counter*>, kCodes> failures_{};  // filled on first use of a code
  Histogram* duration_seconds_ = nullptr;
};

class ServerMetrics {
 public:
  // Registers gpucompute's request, scheduler and tensor families in `registry` (borrowed;
  // it must outlive this).
  explicit ServerMetrics(Registry* registry);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // The `op`-labelled series a scheduler records into.
  SchedulerMetrics ForScheduler(absl::string_view op);
  // The `op`-labelled series of a backend's batches.
  BatchStageMetrics ForBatchStages(absl::string_view op);

  // The call metrics of `op` (periodogram, dense, assimilate, load_model, ...), created on
  // first use; the reference lives as long as this.
  CallMetrics& Calls(absl::string_view op);
  // Calls(op).Record(code, total): one map lookup under a reader lock.
  void RecordCall(absl::string_view op, absl::StatusCode code, absl::Duration total) {
    Calls(op).Record(code, total);
  }

  // Registers gpucompute_resident_tensors and gpucompute_resident_tensor_bytes, computed at
  // each scrape by `counts` (the tensor store's statistics; it must stay callable, and what
  // it reads alive, for every scrape). Once only.
  void AddResidentTensors(std::function<ResidentTensorCounts()> counts);


  Registry& registry() { return *registry_; }

  // Histogram bounds: durations in µs, 1-2.5-5 steps from 10 µs to 50 s; batch sizes 1, 2,
  // 4 ... 4096.
  static std::vector<double> DurationBucketsSeconds();
  static std::vector<double> BatchSizeBuckets();

 private:
  Registry* const registry_;
  Family<Counter>* success_;
  Family<Counter>* failure_;
  Family<Histogram>* request_seconds_;
  Family<Histogram>* queue_seconds_;
  Family<Histogram>* compute_seconds_;
  Family<Histogram>* batch_size_;
  Family<Histogram>* batch_stage_seconds_;
  Family<Gauge>* pending_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<CallMetrics>> calls_ ABSL_GUARDED_BY(mu_);
};

// Registers gpucompute_connections_open and gpucompute_connections_refused_total{limit} on
// `registry`, computed at each scrape by `stats` (the process's PeerConnections; it must stay
// callable for every scrape). Once per registry.
void RegisterConnectionMetrics(Registry* registry, std::function<PeerConnectionStats()> stats);

}  // namespace gpucompute::metrics
