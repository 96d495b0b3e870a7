// What comes in with every call (deadline, caller) and what goes out at its end (server-side
// timings, the call's record), shared by the unary handlers and the Submit stream.
#pragma once

#include <chrono>
#include <string>

#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/metrics/server_metrics.h"
#include "server/runtime/scheduler.h"

namespace gpucompute {

// The request metadata key that names the caller (owner of resident tensors, quotas).
inline constexpr char kClientIdKey[] = "x-gpucompute-client";

// A gRPC deadline as absl::Time (no deadline: InfiniteFuture).
absl::Time ToAbslTime(std::chrono::system_clock::time_point tp);

// The caller: the x-gpucompute-client metadata value, else the peer's address without its
// port (so that every channel of one host is one caller).
std::string CallerId(const grpc::CallbackServerContext& context);

// Trailing metadata: x-gpucompute-queue-us, -compute-us, -total-us (since `start`) and
// -batch-requests.
void AddTimings(grpc::CallbackServerContext* context, const JobTimings& t, absl::Time start);

// Every operation call, unary or on a stream, ends here once, before its reply is sent (so a
// scrape after the reply counts it): `op` is its name ("periodogram", "dense", "assimilate",
// "echo"; "load_model", "unload_model"). Records the outcome by op and status code and the
// duration since `start` into `metrics` (null: nothing recorded).
void RecordCallEnd(metrics::ServerMetrics* metrics, absl::string_view op,
                   const absl::Status& status, const JobTimings& timings, absl::Time start);

}  // namespace gpucompute
