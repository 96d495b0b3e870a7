// One PutTensor stream's state, apart from gRPC: the first message's header opens the tensor
// (a new one, or one reserved by CreateTensor), and each message writes its range. A stream
// that fails Abandon()s the upload: a tensor it created is deleted (nobody has its handle yet,
// so it would only hold quota until it expired). PutTensorReactor feeds it the messages as
// parsed (tensor_wire.h); the tensor-stream fuzzer does the same without a server.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/tensor_store.h"
#include "server/service/tensor_wire.h"

namespace gpucompute {

class TensorUpload {
 public:
  // `store` must outlive the upload; `client` owns what it writes.
  TensorUpload(TensorStore* store, std::string client);

  // One message of the stream. INVALID_ARGUMENT (naming the field) for a header out of place,
  // a bad header or a range outside the tensor; NOT_FOUND or RESOURCE_EXHAUSTED from the store.
  absl::Status Accept(const PutTensorChunkView& message);

  // The tensor written to; null before the header.
  const std::shared_ptr<ResidentTensor>& tensor() const { return tensor_; }

  // The stream failed: deletes the tensor if this upload created it. Drops the tensor.
  void Abandon();
  // The stream is over: drops the tensor (it stays in the store).
  void Close() { tensor_.reset(); }

 private:
  absl::Status Open(const v1::PutTensorHeader& header);

  TensorStore* const store_;
  const std::string client_;
  std::shared_ptr<ResidentTensor> tensor_;
  bool created_here_ = false;  // by this stream's header (not reserved by CreateTensor)
};

}  // namespace gpucompute
