// What comes in with every call (its deadline; its caller: transport/caller.h) and what goes
// out at its end (server-side timings, the call's record), shared by the unary handlers and the
// streams.
#pragma once

#include <chrono>
#include <string>
#include <utility>

#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/metrics/server_metrics.h"
#include "server/runtime/op_schedulers.h"
#include "server/transport/caller.h"
#include "server/service/service_parts.h"

namespace gpucompute {

// A gRPC deadline as absl::Time (no deadline: InfiniteFuture).
absl::Time ToAbslTime(std::chrono::system_clock::time_point tp);

// Trailing metadata: x-gpucompute-decode-us, -queue-us, -compute-us, -total-us (since `start`)
// and -batch-requests.
void AddTimings(grpc::CallbackServerContext* context, const JobTimings& t, absl::Time start);

// The status a call is recorded with: a call that its client cancelled before its deadline is
// CANCELLED, whatever the server saw: a failure (a batch that every caller left reports
// DEADLINE_EXCEEDED to them all, cancelled or not) and a success alike (a GPU batch runs to
// its end, and the reply then reaches no one).
absl::Status RecordedStatus(const absl::Status& status, bool cancelled, absl::Time deadline);

// Every operation call, unary or on a stream, ends here once, before its reply is sent (so a
// scrape after the reply counts it): `op` is its name ("periodogram", "dense", "assimilate",
// "echo"; "load_model", "unload_model"). Records the outcome by op and status code and the
// duration since `start` into parts.metrics (null: nothing recorded), and logs the call as
// parts.call_log says, with the trace of `context`'s traceparent (trace_context.h).
void RecordCallEnd(const ServiceParts& parts, const grpc::CallbackServerContext& context,
                   absl::string_view op, const absl::Status& status, const JobTimings& timings,
                   absl::Time start);

}  // namespace gpucompute
