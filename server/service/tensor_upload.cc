// One PutTensor stream's state (see tensor_upload.h).
#include "server/service/tensor_upload.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

TensorUpload::TensorUpload(TensorStore* store, std::string client)
    : store_(store), client_(std::move(client)) {}

absl::Status TensorUpload::Open(const v1::PutTensorHeader& header) {
  if (!header.handle().empty()) {
    auto found = store_->FindForWrite(client_, header.handle());
    if (!found.ok()) return Prefixed("header.handle", found.status());
    const TensorSpec& spec = (*found)->spec();
    if ((header.dtype() != v1::DTYPE_UNSPECIFIED && header.dtype() != spec.dtype) ||
        (header.shape_size() > 0 &&
         !std::equal(header.shape().begin(), header.shape().end(), spec.shape.begin(),
                     spec.shape.end()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header: dtype and shape must be left unset, or match tensor \"", header.handle(),
          "\", when a handle is given"));
    }
    tensor_ = *std::move(found);
    return absl::OkStatus();
  }
  if (DTypeSize(header.dtype()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header.dtype: must be set to a known dtype (got ", static_cast<int>(header.dtype()),
        "), or give the handle of a tensor made by CreateTensor"));
  }
  auto created = store_->Create(client_, ResidentSpec(header.dtype(), header.shape()));
  if (!created.ok()) {
    if (created.status().code() == absl::StatusCode::kInvalidArgument) {
      return Prefixed("header", created.status());
    }
    return created.status();
  }
  tensor_ = *std::move(created);
  created_here_ = true;
  return absl::OkStatus();
}

absl::Status TensorUpload::Accept(const PutTensorChunkView& message) {
  if (tensor_ == nullptr) {
    if (!message.header) {
      return absl::InvalidArgumentError("header: the first PutTensor message must carry the header");
    }
    if (absl::Status s = Open(*message.header); !s.ok()) return s;
  } else if (message.header) {
    return absl::InvalidArgumentError("header: only the first PutTensor message carries it");
  }
  if (message.chunk.data_bytes() == 0) return absl::OkStatus();
  return tensor_->Write(message.chunk.offset, message.chunk.data);
}

void TensorUpload::Abandon() {
  if (created_here_ && tensor_ != nullptr) (void)store_->Delete(client_, tensor_->handle());
  tensor_.reset();
}

}  // namespace gpucompute
