// Who makes a call: the caller's id (owner of resident tensors and regions) and, on a server
// with tokens, its token, read from the call's metadata. Shared by the one-process server's
// handlers and worker mode's front.
#pragma once

#include <string>
#include <utility>

#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/transport/auth.h"

namespace gpucompute {

// The request metadata key that names the caller (owner of resident tensors, quotas) on a
// server without tokens.
inline constexpr char kClientIdKey[] = "x-gpucompute-client";
// The request metadata key that marks the worker-mode front's own calls to a worker that also
// serves handed client connections (--worker_connections=handoff): its value is a secret the
// front gives its workers (kFrontCallSecretVariable), so a client cannot pass for the front.
inline constexpr char kFrontCallKey[] = "x-gpucompute-front-call";
inline constexpr char kFrontCallSecretVariable[] = "GPUCOMPUTE_FRONT_CALL_SECRET";
// The request metadata key of bearer tokens ("Bearer <token>").
inline constexpr char kAuthorizationKey[] = "authorization";

// The caller: the x-gpucompute-client metadata value, else the peer's address without its
// port (so that every channel of one host is one caller).
std::string CallerId(const grpc::CallbackServerContext& context);

// Whether a process that passes a call on to another (the worker-mode front to a worker, a
// worker relaying to the front) copies this client metadata key: not gRPC's own, nor the
// identity keys the passing process sets itself (authorization, caller id, the front's mark).
bool PassedOnMetadata(absl::string_view key);

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

}  // namespace gpucompute
