// Deadlines in and server-side timings out, shared by every unary handler.
#pragma once

#include <chrono>

#include <grpcpp/server_context.h>

#include "absl/time/time.h"
#include "server/runtime/scheduler.h"

namespace gpucompute {

// A gRPC deadline as absl::Time (no deadline: InfiniteFuture).
absl::Time ToAbslTime(std::chrono::system_clock::time_point tp);

// Trailing metadata: x-gpucompute-queue-us, -compute-us, -total-us (since `start`) and
// -batch-requests.
void AddTimings(grpc::CallbackServerContext* context, const JobTimings& t, absl::Time start);

}  // namespace gpucompute
