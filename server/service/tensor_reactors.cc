// PutTensor and GetTensor (see tensor_reactors.h).
#include "server/service/tensor_reactors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "common/byte_range.h"
#include "server/service/call_timing.h"
#include "server/transport/status_mapping.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

void FillTensorInfo(const ResidentTensor& tensor, absl::Time now, v1::TensorInfo* out) {
  out->set_handle(tensor.handle());
  out->set_dtype(static_cast<v1::DType>(tensor.spec().dtype));
  out->mutable_shape()->Assign(tensor.spec().shape.begin(), tensor.spec().shape.end());
  out->set_bytes(tensor.bytes());
  out->set_complete(tensor.complete());
  out->set_owner(tensor.owner());
  out->set_idle_ms(std::max<int64_t>(0, absl::ToInt64Milliseconds(tensor.idle(now))));
}

// ---------------------------------------------------------------- PutTensor

PutTensorReactor::PutTensorReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                                   grpc::ByteBuffer* response)
    : context_(context), parts_(parts), response_(response) {
  auto admitted = AuthenticateAndEnter(*context, parts->auth);
  if (!admitted.ok()) {
    Finish(ToGrpcStatus(admitted.status()));
    return;
  }
  upload_.emplace(parts->tensors, std::move(admitted->first.id));
  slot_ = std::move(admitted->second);
  StartRead(&chunk_);
}

void PutTensorReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The client has sent everything, or gave up.
    if (context_->IsCancelled()) {
      End(absl::CancelledError("PutTensor cancelled by the client before its end"));
    } else if (upload_->tensor() == nullptr) {
      End(absl::InvalidArgumentError("the PutTensor stream ended before its header"));
    } else {
      End(absl::OkStatus());
    }
    return;
  }
  auto chunk = ParsePutTensorChunk(chunk_);
  absl::Status s = chunk.ok() ? upload_->Accept(*chunk) : chunk.status();
  chunk_.Clear();
  if (!s.ok()) {
    End(s);
    return;
  }
  StartRead(&chunk_);
}

void PutTensorReactor::End(const absl::Status& status) {
  if (status.ok()) {
    v1::TensorInfo info;
    FillTensorInfo(*upload_->tensor(), parts_->tensors->Now(), &info);
    bool own_buffer = false;
    (void)grpc::SerializationTraits<v1::TensorInfo>::Serialize(info, response_, &own_buffer);
    upload_->Close();
  } else if (upload_) {
    upload_->Abandon();
  }
  slot_.Release();
  Finish(ToGrpcStatus(status));
}

void PutTensorReactor::OnDone() { delete this; }

// ---------------------------------------------------------------- GetTensor

GetTensorReactor::GetTensorReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                                   const grpc::ByteBuffer& request)
    : context_(context), parts_(parts) {
  v1::GetTensorRequest parsed;
  grpc::ByteBuffer copy(request);  // shares the slices; deserialising consumes the buffer
  absl::Status s = grpc::SerializationTraits<v1::GetTensorRequest>::Deserialize(&copy, &parsed).ok()
                       ? Open(parsed)
                       : absl::InvalidArgumentError("GetTensor: the request is not a GetTensorRequest");
  if (!s.ok()) {
    slot_.Release();
    Finish(ToGrpcStatus(s));
    return;
  }
  WriteNext();
}

absl::Status GetTensorReactor::Open(const v1::GetTensorRequest& request) {
  auto admitted = AuthenticateAndEnter(*context_, parts_->auth);
  if (!admitted.ok()) return admitted.status();
  slot_ = std::move(admitted->second);
  auto tensor = parts_->tensors->Acquire(admitted->first.id, request.handle());
  if (!tensor.ok()) return Prefixed("handle", tensor.status());
  tensor_ = *std::move(tensor);
  const int64_t size = tensor_->bytes();
  if (request.offset() < 0 || request.offset() > size) {
    return absl::InvalidArgumentError(absl::StrCat("offset: ", request.offset(),
                                                   " is outside the tensor's ", size, " bytes"));
  }
  const int64_t length = request.length() == 0 ? size - request.offset() : request.length();
  if (length < 0 || length > size - request.offset()) {
    return absl::InvalidArgumentError(absl::StrCat("length: bytes ", ByteRange(request.offset(), length),
                                                   " are outside the tensor's ", size, " bytes"));
  }
  if (request.chunk_bytes() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes: must be >= 0 (got ", request.chunk_bytes(), ")"));
  }
  if (request.chunk_bytes() > 0) {
    // Every message must fit the server's send limit with its framing.
    chunk_bytes_ = std::min<int64_t>(request.chunk_bytes(), parts_->limits.max_response_bytes - 4096);
  }
  next_ = request.offset();
  end_ = request.offset() + length;
  return absl::OkStatus();
}

void GetTensorReactor::WriteNext() {
  if (!first_ && next_ >= end_) {
    tensor_.reset();
    slot_.Release();
    Finish(grpc::Status::OK);
    return;
  }
  v1::TensorInfo info;
  if (first_) FillTensorInfo(*tensor_, parts_->tensors->Now(), &info);
  const int64_t n = std::min(chunk_bytes_, end_ - next_);
  message_ = TensorDataMessage(first_ ? &info : nullptr, tensor_, next_, n);
  first_ = false;
  next_ += n;
  StartWrite(&message_);
}

void GetTensorReactor::OnWriteDone(bool ok) {
  if (!ok) {
    // The client is gone (or cancelled): nobody reads the rest.
    tensor_.reset();
    slot_.Release();
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "GetTensor: the client went away"));
    return;
  }
  WriteNext();
}

void GetTensorReactor::OnDone() { delete this; }

}  // namespace gpucompute
