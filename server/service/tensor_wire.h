// PutTensorChunk and TensorData in their wire form, so that the bulk of a resident tensor moves
// with one copy on the server: a PutTensorChunk's data is parsed where gRPC received it and
// copied straight into the tensor (not into a protobuf string first), and a TensorData's data
// is a slice of the tensor's own bytes, which gRPC sends from there (no copy into a message,
// none into its serialisation). The rest of each message (header, offset, info) is small and
// goes through protobuf as usual. Both forms are the protobuf encoding of the messages in
// compute.proto; clients see no difference.
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

namespace gpucompute {

// A PutTensorChunk as received: its data is the pieces of gRPC's slices that hold it, valid
// while `slices` lives.
struct PutTensorChunkView {
  std::vector<grpc::Slice> slices;
  std::optional<v1::PutTensorHeader> header;
  int64_t offset = 0;
  std::vector<absl::string_view> data;
  int64_t data_bytes() const;
};

// Parses `buffer` (one PutTensorChunk); INVALID_ARGUMENT when it is not one. Unknown fields
// are skipped; a repeated field's last value wins, as protobuf's own parser does.
absl::StatusOr<PutTensorChunkView> ParsePutTensorChunk(const grpc::ByteBuffer& buffer);

// One TensorData message: `info` (may be null), `offset`, and bytes [offset, offset + n) of
// `tensor` as the data, not copied: the message holds the tensor until gRPC has sent it.
grpc::ByteBuffer TensorDataMessage(const v1::TensorInfo* info,
                                   std::shared_ptr<const ResidentTensor> tensor, int64_t offset,
                                   int64_t n);

}  // namespace gpucompute
