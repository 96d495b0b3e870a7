// Per-request size limits enforced while decoding (RESOURCE_EXHAUSTED when exceeded).
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "common/memory_limit.h"
#include "server/ops/assimilate/assimilate.h"

namespace gpucompute {

// Dense models and requests.
struct DenseLimits {
  int64_t max_model_bytes = int64_t{64} << 30;  // stored bytes of one model (dense::StoredBytes)
  int max_models = 64;
  int max_layers = 1024;
  int64_t max_features = int64_t{1} << 20;      // in or out features of a layer
  int64_t max_rows_per_request = int64_t{1} << 20;
};

// Submit streams.
struct StreamLimits {
  int max_jobs_in_flight = 64;  // per stream; the next job is read when one finishes
};

struct ServiceLimits {
  // Server-wide: host memory the work in progress may hold (MemoryBudget): the periodogram's
  // decoded inputs (twice: with their working copies), and every operation's outputs and
  // copies of shared-memory inputs, from decoding until the reply.
  int64_t memory_budget_bytes = int64_t{1} << 30;
  // The part of that budget one caller's work may hold (0 < share <= 1). The server's flag
  // makes it 0.5 when callers are authenticated by tokens (else they name themselves, and a
  // share would bind only honest ones).
  double memory_budget_share = 1.0;
  // Server-wide: host memory the resident tensors and the work in progress hold together (the
  // one budget both take from; the two limits above and --tensor_store_bytes are parts of
  // it). Negative: ServerMemoryBytes' default.
  int64_t server_memory_bytes = -1;
  int64_t max_request_bytes = int64_t{1} << 30;    // gRPC receive limit
  // An upload stream (LoadModel) that sends nothing for this long is cancelled.
  absl::Duration upload_idle_timeout = absl::Seconds(60);
  int64_t max_response_bytes = int64_t{1} << 30;   // gRPC send limit; bounds total output
  int64_t max_series_per_request = 100000;
  int64_t max_samples_per_series = int64_t{1} << 24;
  int64_t max_frequencies_per_series = int64_t{1} << 26;
  int64_t max_pairs_per_request = int64_t{1} << 40;
  // False alarm by bootstrap: resampled samples per request (n_bootstraps x samples), which
  // the server holds while the request runs.
  int64_t max_bootstrap_samples = int64_t{1} << 26;
  DenseLimits dense;
  // Assimilate: problems per request, members N, and the largest m x m matrix (full R or the
  // observation-space form). The request and response byte limits bound n and m otherwise.
  assimilate::Limits assimilate;
  StreamLimits stream;
};

// The server's one memory budget: `server_memory_bytes` when >= 0, else three quarters of
// MemoryLimitBytes() (the host's memory, or the container's limit).
inline int64_t ServerMemoryBytes(int64_t server_memory_bytes) {
  return server_memory_bytes >= 0 ? server_memory_bytes : MemoryLimitBytes() / 4 * 3;
}

// --pinned_tensor_bytes: the page-locked host memory resident tensors may live in (a GPU reads
// them there by DMA). Negative: an eighth of the server's memory budget, so that locked memory
// stays a small part of the host's.
inline int64_t PinnedTensorBytes(int64_t pinned_tensor_bytes, int64_t server_memory_bytes) {
  return pinned_tensor_bytes >= 0 ? pinned_tensor_bytes : ServerMemoryBytes(server_memory_bytes) / 8;
}

}  // namespace gpucompute
