// PutTensorChunk and TensorData on the server, in their wire form (proto/wire/tensor_chunk.h),
// so that the bulk of a resident tensor moves with one copy on the server: a PutTensorChunk's
// data is copied from where gRPC received it straight into the tensor, and a TensorData's data
// is a slice of the tensor's own bytes, which gRPC sends from there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/tensor_store.h"
#include "wire/tensor_chunk.h"

namespace gpucompute {

// A PutTensorChunk as received: its data is pieces of gRPC's slices (chunk.data).
struct PutTensorChunkView {
  wire::ChunkView chunk;
  std::optional<v1::PutTensorHeader> header;
};

// Parses `buffer` (one PutTensorChunk); INVALID_ARGUMENT naming PutTensor when it is not one.
absl::StatusOr<PutTensorChunkView> ParsePutTensorChunk(const grpc::ByteBuffer& buffer);

// One TensorData message: `info` (may be null), `offset`, and bytes [offset, offset + n) of
// `tensor` as the data, not copied: the message holds the tensor until gRPC has sent it.
grpc::ByteBuffer TensorDataMessage(const v1::TensorInfo* info,
                                   std::shared_ptr<const ResidentTensor> tensor, int64_t offset,
                                   int64_t n);

}  // namespace gpucompute
