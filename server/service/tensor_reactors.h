// The streaming calls of resident tensors. PutTensor reads a header (a new tensor's dtype and
// shape, or the handle of one reserved by CreateTensor) and chunks at any offsets, copying each
// into the tensor as it arrives; GetTensor writes a range of a complete tensor in chunks, one
// write in flight. Both hold the tensor (shared_ptr) for the whole call, so a delete or expiry
// meanwhile does not pull the bytes from under them. Each authenticates its caller and holds one
// of its token's in-flight slots until it finishes. Reactors delete themselves in OnDone.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/tensor_store.h"
#include "server/service/auth.h"
#include "server/service/service_parts.h"

namespace gpucompute {

// GetTensor's chunk size when the request sets none: 4 MiB less 1 KiB, so that a chunk with its
// framing stays under gRPC's default 4 MiB receive limit.
inline constexpr int64_t kDefaultTensorChunkBytes = (int64_t{4} << 20) - 1024;

// The proto form of a tensor's state at `now`.
void FillTensorInfo(const ResidentTensor& tensor, absl::Time now, v1::TensorInfo* out);

class PutTensorReactor final : public grpc::ServerReadReactor<v1::PutTensorChunk> {
 public:
  // Starts reading at once; deletes itself when the call is done.
  PutTensorReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                   v1::TensorInfo* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  absl::Status Accept(const v1::PutTensorChunk& chunk);
  absl::Status Open(const v1::PutTensorHeader& header);
  // Finishes with `status`; a tensor this call created is deleted unless the call succeeded.
  void End(const absl::Status& status);

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  v1::TensorInfo* const response_;
  std::string client_;        // the caller (Authenticate)
  InFlightSlot slot_;
  v1::PutTensorChunk chunk_;  // the read buffer
  std::shared_ptr<ResidentTensor> tensor_;
  bool created_here_ = false;  // by this call's header (not reserved by CreateTensor)
};

class GetTensorReactor final : public grpc::ServerWriteReactor<v1::TensorData> {
 public:
  // Validates the request and starts writing at once (or finishes with the error); deletes
  // itself when the call is done.
  GetTensorReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                   const v1::GetTensorRequest& request);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  absl::Status Open(const v1::GetTensorRequest& request);
  void WriteNext();

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  std::shared_ptr<const ResidentTensor> tensor_;
  InFlightSlot slot_;
  v1::TensorData message_;  // the write in flight
  int64_t next_ = 0;        // next byte of the tensor to send
  int64_t end_ = 0;         // end of the range
  int64_t chunk_bytes_ = kDefaultTensorChunkBytes;
  bool first_ = true;
};

}  // namespace gpucompute
