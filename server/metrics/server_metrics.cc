// gpucompute's metric families (see server_metrics.h).
#include "server/metrics/server_metrics.h"

#include <algorithm>

namespace gpucompute::metrics {

std::vector<double> ServerMetrics::DurationBucketsSeconds() {
  std::vector<double> out;
  // In whole microseconds, divided once: each bound is the nearest double to its decimal
  // (1e-05, 2.5e-05, ...), as Prometheus prints and matches it.
  for (double decade_us = 10; decade_us <= 1e7; decade_us *= 10) {
    for (double m : {1.0, 2.5, 5.0}) out.push_back(m * decade_us / 1e6);
  }
  return out;  // 10 µs .. 50 s
}

std::vector<double> ServerMetrics::BatchSizeBuckets() { return ExponentialBuckets(1, 2, 13); }

ServerMetrics::ServerMetrics(Registry* registry) : registry_(registry) {
  Registry& r = *registry;
  success_ = &r.AddCounter("gpucompute_request_success_total",
                           "Calls that finished OK, by operation.", {"op"});
  failure_ = &r.AddCounter("gpucompute_request_failure_total",
                           "Calls that failed, by operation and gRPC status code.", {"op", "code"});
  request_seconds_ = &r.AddHistogram(
      "gpucompute_request_duration_seconds",
      "Server-side duration of a call from its arrival to its status, any outcome.", {"op"},
      DurationBucketsSeconds());
  queue_seconds_ = &r.AddHistogram(
      "gpucompute_queue_duration_seconds",
      "Time a request waited in its scheduler's queue before dispatch.", {"op"},
      DurationBucketsSeconds());
  compute_seconds_ = &r.AddHistogram(
      "gpucompute_compute_duration_seconds",
      "Time from a request's dispatch to its batch's results (copies and kernels), once per "
      "request.",
      {"op"}, DurationBucketsSeconds());
  batch_size_ = &r.AddHistogram("gpucompute_batch_size",
                                "Requests coalesced into one backend launch, once per launch.",
                                {"op"}, BatchSizeBuckets());
  batch_stage_seconds_ = &r.AddHistogram(
      "gpucompute_batch_stage_duration_seconds",
      "Where a GPU batch's time goes, once per batch: launch (waiting for a stream, "
      "packing, queueing copies and kernels), device (until the batch is seen finished), "
      "finish (unpacking the results; the replies follow).",
      {"op", "stage"}, DurationBucketsSeconds());
  pending_ = &r.AddGauge("gpucompute_pending_requests",
                         "Requests queued in a scheduler, not yet dispatched.", {"op"});
}

void ServerMetrics::AddResidentTensors(std::function<ResidentTensorCounts()> counts) {
  registry_->AddCallback(MetricType::kGauge, "gpucompute_resident_tensors",
                         "Server-resident tensors (PutTensor, kept outputs).", {},
                         [counts] {
                           return std::vector<Sample>{{{}, static_cast<double>(counts().tensors)}};
                         });
  registry_->AddCallback(MetricType::kGauge, "gpucompute_resident_tensor_bytes",
                         "Bytes held by server-resident tensors.", {}, [counts] {
                           return std::vector<Sample>{{{}, static_cast<double>(counts().bytes)}};
                         });
}

SchedulerMetrics ServerMetrics::ForScheduler(absl::string_view op) {
  SchedulerMetrics m;
  m.queue_seconds = &queue_seconds_->WithLabels({op});
  m.compute_seconds = &compute_seconds_->WithLabels({op});
  m.batch_size = &batch_size_->WithLabels({op});
  m.pending = &pending_->WithLabels({op});
  return m;
}

BatchStageMetrics ServerMetrics::ForBatchStages(absl::string_view op) {
  BatchStageMetrics m;
  m.launch_seconds = &batch_stage_seconds_->WithLabels({op, "launch"});
  m.device_seconds = &batch_stage_seconds_->WithLabels({op, "device"});
  m.finish_seconds = &batch_stage_seconds_->WithLabels({op, "finish"});
  return m;
}

CallMetrics& ServerMetrics::Calls(absl::string_view op) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto it = calls_.find(op); it != calls_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  auto& slot = calls_[op];
  if (!slot) {
    slot = std::make_unique<CallMetrics>();
    slot->op_ = std::string(op);
    slot->success_ = &success_->WithLabels({op});
    slot->failure_family_ = failure_;
    slot->duration_seconds_ = &request_seconds_->WithLabels({op});
  }
  return *slot;
}

void CallMetrics::Record(absl::StatusCode code, absl::Duration total) {
  duration_seconds_->Observe(absl::ToDoubleSeconds(total));
  if (code == absl::StatusCode::kOk) {
    success_->Increment();
    return;
  }
  int i = static_cast<int>(code);
  if (i <= 0 || i >= kCodes) i = static_cast<int>(absl::StatusCode::kUnknown);
  Counter* c = failures_[i].load(std::memory_order_acquire);
  if (c == nullptr) {
    // Two racing first failures resolve the same series: the family returns one counter.
    c = &failure_family_->WithLabels(
        {op_, absl::StatusCodeToString(static_cast<absl::StatusCode>(i))});
    failures_[i].store(c, std::memory_order_release);
  }
  c->Increment();
}

void RegisterConnectionMetrics(Registry* registry, std::function<PeerConnectionStats()> stats) {
  registry->AddCallback(MetricType::kGauge, "gpucompute_connections_open",
                        "TCP connections admitted and not yet seen closed (counted lazily: "
                        "pruned when a limit is reached).",
                        {}, [stats] {
                          return std::vector<Sample>{{{}, static_cast<double>(stats().open)}};
                        });
  registry->AddCallback(MetricType::kCounter, "gpucompute_connections_refused_total",
                        "TCP connections closed as they were accepted: the peer held "
                        "--max_connections_per_peer (limit=peer) or all peers --max_connections "
                        "(limit=total).",
                        {"limit"}, [stats] {
                          const PeerConnectionStats s = stats();
                          return std::vector<Sample>{{{"peer"}, static_cast<double>(s.refused_peer)},
                                                     {{"total"}, static_cast<double>(s.refused_total)}};
                        });
}

}  // namespace gpucompute::metrics
