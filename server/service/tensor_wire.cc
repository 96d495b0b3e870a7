// PutTensorChunk and TensorData on the server (see tensor_wire.h).
#include "server/service/tensor_wire.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpucompute {

absl::StatusOr<PutTensorChunkView> ParsePutTensorChunk(const grpc::ByteBuffer& buffer) {
  auto chunk = wire::ParseChunk(buffer, wire::kPutTensorChunk);
  if (!chunk.ok()) return absl::InvalidArgumentError(absl::StrCat("PutTensor: ", chunk.status().message()));
  PutTensorChunkView view;
  view.chunk = *std::move(chunk);
  if (view.chunk.submessage) {
    v1::PutTensorHeader header;
    if (!header.ParseFromString(*view.chunk.submessage)) {
      return absl::InvalidArgumentError(
          "PutTensor: the message is not a PutTensorChunk (its header does not parse)");
    }
    view.header = std::move(header);
  }
  return view;
}

grpc::ByteBuffer TensorDataMessage(const v1::TensorInfo* info,
                                   std::shared_ptr<const ResidentTensor> tensor, int64_t offset,
                                   int64_t n) {
  std::string info_bytes;
  if (info != nullptr) info_bytes = info->SerializeAsString();
  const absl::string_view data = tensor->data().substr(static_cast<size_t>(offset), static_cast<size_t>(n));
  return wire::ChunkMessage(wire::kTensorData, info != nullptr ? &info_bytes : nullptr, offset, data,
                            std::move(tensor));
}

}  // namespace gpucompute
