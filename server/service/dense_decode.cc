// Dense request decoding (see dense_decode.h).
#include "server/service/dense_decode.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

absl::StatusOr<dense::Request> DecodeDenseRequest(const v1::DenseRequest& request,
                                                  const ModelRegistry& models,
                                                  const ServiceLimits& limits) {
  dense::Request out;
  ASSIGN_OR_RETURN(out.model, models.Find(request.model()));
  const dense::ModelInfo& info = out.model->info();
  if (!request.has_input()) return absl::InvalidArgumentError("input is required");
  const v1::Tensor& input = request.input();
  ASSIGN_OR_RETURN(out.input_dtype, FloatElementType(input.dtype(), "input.dtype"));
  if (input.shape_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.shape must have 2 dimensions (rows, in_features), not ", input.shape_size()));
  }
  if (input.shape(1) != info.in_features()) {
    return absl::InvalidArgumentError(absl::StrCat("input.shape[1] is ", input.shape(1), " but model '",
                                                   info.name, "' takes ", info.in_features(),
                                                   " input features"));
  }
  out.rows = input.shape(0);
  if (out.rows > limits.dense.max_rows_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat("input has ", out.rows, " rows; the limit is ",
                                                     limits.dense.max_rows_per_request,
                                                     " per request (--max_rows_per_request)"));
  }
  RETURN_IF_ERROR(CheckTensor(input, "input").status());
  const int64_t response_bytes = out.rows * info.out_features() * ElementSize(info.dtype);
  if (response_bytes > limits.max_response_bytes - 4096) {
    return absl::ResourceExhaustedError(absl::StrCat("the output would take ", response_bytes,
                                                     " bytes; responses are limited to ",
                                                     limits.max_response_bytes, " bytes"));
  }
  out.input = input.data();
  return out;
}

}  // namespace gpucompute
