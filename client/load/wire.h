// Pre-serialized messages for the hot path: every request is serialized once, before the run,
// and each call sends a reference-counted copy of its slice (no per-call protobuf work). A
// Submit job is the serialized SubmitRequest without its id, prefixed per send with the id and
// timeout fields (protobuf fields may come in any order). Responses are not parsed on the
// unary path (status, trailers and size suffice); SubmitResponse is read only for its id,
// code, message and timing, skipping the result bytes without copying them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "gpucompute/v1/compute.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace gpucompute::load {

// The message's bytes in one slice.
grpc::Slice SerializeToSlice(const google::protobuf::Message& message);

// A ByteBuffer holding `slice` (by reference, no copy).
grpc::ByteBuffer BufferOf(const grpc::Slice& slice);

// The bytes that, put before a serialized SubmitRequest without id, give it id = decimal
// `token` and (when positive) timeout_us.
std::string SubmitPrefix(uint64_t token, int64_t timeout_us);

// One Submit job on the wire: prefix + job bytes (two slices, the job's shared).
grpc::ByteBuffer SubmitBuffer(uint64_t token, int64_t timeout_us, const grpc::Slice& job);

// What the load tester needs of a SubmitResponse.
struct SubmitResponseHead {
  std::optional<uint64_t> token;  // the id, when it is a decimal number
  int code = 0;                   // grpc::StatusCode
  std::string message;
  bool has_timing = false;
  v1::JobTiming timing;
};

// Reads id, code, message and timing; skips the result. INVALID_ARGUMENT on malformed bytes.
absl::StatusOr<SubmitResponseHead> ParseSubmitResponseHead(grpc::ByteBuffer& buffer);

}  // namespace gpucompute::load
