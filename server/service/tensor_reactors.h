// The streaming calls of resident tensors, on their wire form (tensor_wire.h: one copy of the
// bulk on the server). PutTensor reads a header (a new tensor's dtype and shape, or the handle
// of one reserved by CreateTensor) and chunks at any offsets, copying each into the tensor as it
// arrives; GetTensor writes a range of a complete tensor in chunks that gRPC sends from the
// tensor's own bytes, one write in flight. Both hold the tensor (shared_ptr) for the whole call, so a delete or expiry
// meanwhile does not pull the bytes from under them. Each authenticates its caller and holds one
// of its token's in-flight slots until it finishes. Reactors delete themselves in OnDone.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/tensor_store.h"
#include "server/transport/auth.h"
#include "server/service/service_parts.h"
#include "server/service/tensor_upload.h"
#include "server/service/tensor_wire.h"

namespace gpucompute {

// GetTensor's chunk size when the request sets none: 4 MiB less 1 KiB, so that a chunk with its
// framing stays under gRPC's default 4 MiB receive limit.
inline constexpr int64_t kDefaultTensorChunkBytes = (int64_t{4} << 20) - 1024;

// The proto form of a tensor's state at `now`.
void FillTensorInfo(const ResidentTensor& tensor, absl::Time now, v1::TensorInfo* out);

class PutTensorReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // Starts reading at once; deletes itself when the call is done.
  // `response` receives the TensorInfo.
  PutTensorReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                   grpc::ByteBuffer* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  // Finishes with `status`; a tensor this call created is deleted unless the call succeeded.
  void End(const absl::Status& status);

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  grpc::ByteBuffer* const response_;
  std::optional<TensorUpload> upload_;  // once the caller is admitted
  InFlightSlot slot_;
  grpc::ByteBuffer chunk_;    // the read buffer (a PutTensorChunk)
};

class GetTensorReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Validates the request (a GetTensorRequest) and starts writing at once (or finishes with
  // the error); deletes itself when the call is done.
  GetTensorReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                   const grpc::ByteBuffer& request);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  absl::Status Open(const v1::GetTensorRequest& request);
  void WriteNext();

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  std::shared_ptr<const ResidentTensor> tensor_;
  InFlightSlot slot_;
  grpc::ByteBuffer message_;  // the write in flight (a TensorData)
  int64_t next_ = 0;        // next byte of the tensor to send
  int64_t end_ = 0;         // end of the range
  int64_t chunk_bytes_ = kDefaultTensorChunkBytes;
  bool first_ = true;
};

}  // namespace gpucompute
