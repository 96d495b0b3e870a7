// The chunked tensor messages (PutTensorChunk, TensorData) in their protobuf wire form, for
// both ends of PutTensor and GetTensor: a received message is read where gRPC received it
// (its data is pieces of gRPC's slices, copied once, straight to where the bytes belong), and
// a message to send carries the caller's bytes as a slice of their own (no copy into a
// protobuf string, none into its serialisation). The small fields (header or info, offset)
// go through protobuf as usual. The encoding is protobuf's own: peers that use the generated
// messages see no difference.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucompute::wire {

// Field numbers of a chunk message: its submessage (PutTensorChunk.header, TensorData.info),
// offset and data.
struct ChunkFields {
  int submessage;
  int offset;
  int data;
  const char* name;  // for errors
};
inline constexpr ChunkFields kPutTensorChunk{1, 2, 3, "PutTensorChunk"};
inline constexpr ChunkFields kTensorData{3, 1, 2, "TensorData"};

// A chunk message as received: `data` are pieces of `slices`, valid while `slices` lives.
struct ChunkView {
  std::vector<grpc::Slice> slices;
  std::optional<std::string> submessage;  // serialized, when present
  int64_t offset = 0;
  std::vector<absl::string_view> data;
  int64_t data_bytes() const;
};

// Parses `buffer` as a message with `fields`; INVALID_ARGUMENT when it is not one. Unknown
// fields are skipped; a repeated field's last value wins, as protobuf's own parser does.
absl::StatusOr<ChunkView> ParseChunk(const grpc::ByteBuffer& buffer, const ChunkFields& fields);

// A message with `fields`: `submessage` (serialized; null: none), `offset`, and `data`, which
// the message does not copy: `owner` is held until gRPC has sent it (null: the caller keeps
// `data` valid until the call is over).
grpc::ByteBuffer ChunkMessage(const ChunkFields& fields, const std::string* submessage, int64_t offset,
                              absl::string_view data, std::shared_ptr<const void> owner);

}  // namespace gpucompute::wire
