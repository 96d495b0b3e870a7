// Percentiles and per-level figures.
#include "client/load/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/status_code_enum.h"

namespace gpucompute::load {

std::string StatusCodeName(int32_t code) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",        "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if (code == kDropped) return "DROPPED";
  if (code >= 0 && code < static_cast<int32_t>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

double Percentile(absl::Span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // Rank ceil(q n), at least 1; the small epsilon keeps q n = 99.0000000001 from rounding up.
  int64_t rank = static_cast<int64_t>(std::ceil(q * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
  return sorted[rank - 1];
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  d.min = values.front();
  d.max = values.back();
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(d.count);
  d.p50 = Percentile(values, 0.50);
  d.p90 = Percentile(values, 0.90);
  d.p95 = Percentile(values, 0.95);
  d.p99 = Percentile(values, 0.99);
  d.p999 = Percentile(values, 0.999);
  return d;
}

Figures ComputeFigures(absl::Span<const Record> records, absl::Span<const JobSize> jobs,
                       double seconds, absl::Span<const int> job_filter) {
  Figures f;
  f.seconds = seconds;
  std::vector<double> latency, decode, queue, compute, total, batch;
  double request_bytes = 0, response_bytes = 0, payload_bytes = 0;
  for (const Record& r : records) {
    if (!r.measured) continue;
    if (!job_filter.empty() &&
        std::find(job_filter.begin(), job_filter.end(), r.job) == job_filter.end()) {
      continue;
    }
    if (r.code == kDropped) {
      ++f.dropped;
      ++f.errors_by_code[StatusCodeName(r.code)];
      continue;
    }
    if (r.end_ns < 0) continue;
    ++f.requests;
    if (r.code != static_cast<int32_t>(grpc::StatusCode::OK)) {
      ++f.errors;
      ++f.errors_by_code[StatusCodeName(r.code)];
      continue;
    }
    ++f.ok;
    const JobSize& size = jobs[r.job];
    request_bytes += static_cast<double>(size.request_bytes);
    payload_bytes += static_cast<double>(size.payload_bytes);
    response_bytes += static_cast<double>(r.response_bytes);
    latency.push_back(static_cast<double>(r.latency_ns()) / 1e3);
    if (r.decode_us >= 0) decode.push_back(static_cast<double>(r.decode_us));
    if (r.queue_us >= 0) queue.push_back(static_cast<double>(r.queue_us));
    if (r.compute_us >= 0) compute.push_back(static_cast<double>(r.compute_us));
    if (r.total_us >= 0) total.push_back(static_cast<double>(r.total_us));
    if (r.batch_requests > 0) {  // 0: not batched (Echo)
      batch.push_back(r.batch_requests);
      ++f.batch_histogram[r.batch_requests];
    }
  }
  if (seconds > 0) {
    f.requests_per_s = static_cast<double>(f.ok) / seconds;
    f.request_bytes_per_s = request_bytes / seconds;
    f.response_bytes_per_s = response_bytes / seconds;
    f.payload_bytes_per_s = payload_bytes / seconds;
  }
  f.latency_us = Summarize(std::move(latency));
  f.decode_us = Summarize(std::move(decode));
  f.queue_us = Summarize(std::move(queue));
  f.compute_us = Summarize(std::move(compute));
  f.server_total_us = Summarize(std::move(total));
  f.batch_requests = Summarize(std::move(batch));
  return f;
}

}  // namespace gpucompute::load
