// What comes in with every call (deadline, caller and its token) and what goes out at its end
// (server-side timings, the call's record), shared by the unary handlers and the streams.
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
#include "server/runtime/scheduler.h"
#include "server/service/auth.h"
#include "server/service/service_parts.h"

namespace gpucompute {

// The request metadata key that names the caller (owner of resident tensors, quotas) on a
// server without tokens.
inline constexpr char kClientIdKey[] = "x-gpucompute-client";
// The request metadata key of bearer tokens ("Bearer <token>").
inline constexpr char kAuthorizationKey[] = "authorization";

// A gRPC deadline as absl::Time (no deadline: InfiniteFuture).
absl::Time ToAbslTime(std::chrono::system_clock::time_point tp);

// The caller: the x-gpucompute-client metadata value, else the peer's address without its
// port (so that every channel of one host is one caller).
std::string CallerId(const grpc::CallbackServerContext& context);

// Who makes a call.
struct Caller {
  std::string id;  // owner of resident tensors and regions, tensor quotas: the token's name
                   // on a server with tokens, else CallerId
  TokenAuthenticator::TokenRef token;  // null on a server without tokens
};

// The caller of `context`. With `auth` (a server with tokens) the call must carry a valid
// bearer token, else UNAUTHENTICATED. Every handler but ServerInfo starts here (most through
// AuthenticateAndEnter).
absl::StatusOr<Caller> Authenticate(const grpc::CallbackServerContext& context,
                                    const TokenAuthenticator* auth);

// Authenticate, then one of the token's in-flight slots (RESOURCE_EXHAUSTED when all are
// taken): every handler but ServerInfo and Submit (whose jobs take one each) starts here.
// The slot is to be released before the call's reply is sent.
absl::StatusOr<std::pair<Caller, InFlightSlot>> AuthenticateAndEnter(
    const grpc::CallbackServerContext& context, const TokenAuthenticator* auth);

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
