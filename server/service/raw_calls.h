// Unary calls on their raw messages. The service parses requests itself so that a body that
// does not parse is INVALID_ARGUMENT naming the message type (gRPC's own parsing answers
// UNIMPLEMENTED with no message), and serializes the response once the call succeeded.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "server/transport/status_mapping.h"

namespace gpucompute {

// `raw` parsed into `out`; INVALID_ARGUMENT naming the type when it does not parse.
template <typename Request>
absl::Status ParseRequest(const grpc::ByteBuffer& raw, Request* out) {
  grpc::ByteBuffer copy(raw);  // shares the slices; parsing consumes the buffer
  if (grpc::SerializationTraits<Request>::Deserialize(&copy, out).ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the request does not parse as a ", Request::descriptor()->full_name()));
}

// `response` serialized into `raw`.
template <typename Response>
void SerializeResponse(const Response& response, grpc::ByteBuffer* raw) {
  bool own_buffer = false;
  (void)grpc::SerializationTraits<Response>::Serialize(response, raw, &own_buffer);
}

// A call answered at once: `body(request, &response)` (which authenticates as its call needs)
// runs on the parsed request; the reactor finishes with its status, and the response when OK.
template <typename Request, typename Response, typename Body>
grpc::ServerUnaryReactor* QuickCall(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* raw_request,
                                    grpc::ByteBuffer* raw_response, Body body) {
  Request request;
  Response response;
  absl::Status status = ParseRequest(*raw_request, &request);
  if (status.ok()) status = body(request, &response);
  if (status.ok()) SerializeResponse(response, raw_response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace gpucompute
