// Dense request decoding (see dense_decode.h).
#include "server/service/dense_decode.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

absl::StatusOr<dense::Request> DecodeDenseRequest(const v1::DenseRequest& request,
                                                  const ModelRegistry& models,
                                                  const ServiceLimits& limits,
                                                  TensorResolver* resolver) {
  dense::Request out;
  ASSIGN_OR_RETURN(out.model, models.Find(request.model()));
  const dense::ModelInfo& info = out.model->info();
  if (!request.has_input()) return absl::InvalidArgumentError("input is required");
  TensorResolver inline_only;
  ASSIGN_OR_RETURN(const TensorView input,
                   (resolver != nullptr ? resolver : &inline_only)->Resolve(request.input(), "input"));
  ASSIGN_OR_RETURN(out.input_dtype, FloatElementType(input.dtype, "input.dtype"));
  if (input.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.shape must have 2 dimensions (rows, in_features), not ", input.rank()));
  }
  if (input.shape[1] != info.in_features()) {
    return absl::InvalidArgumentError(absl::StrCat("input.shape[1] is ", input.shape[1], " but model '",
                                                   info.name, "' takes ", info.in_features(),
                                                   " input features"));
  }
  out.rows = input.shape[0];
  if (out.rows > limits.dense.max_rows_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat("input has ", out.rows, " rows; the limit is ",
                                                     limits.dense.max_rows_per_request,
                                                     " per request (--max_rows_per_request)"));
  }
  const int64_t response_bytes = out.rows * info.out_features() * ElementSize(info.dtype);
  if (InlineOutputBytes(request.output_placement(), response_bytes) > limits.max_response_bytes - 4096) {
    return absl::ResourceExhaustedError(absl::StrCat("the output would take ", response_bytes,
                                                     " bytes; responses are limited to ",
                                                     limits.max_response_bytes, " bytes"));
  }
  if (resolver != nullptr) {
    RETURN_IF_ERROR(CheckOutputBytes(resolver->context(), request.output_placement(), response_bytes));
  }
  out.input = input.bytes;
  return out;
}

}  // namespace gpucompute
