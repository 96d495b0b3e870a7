// The one place where wire Tensors are decoded and encoded. Every check names the field path
// it was given (e.g. "series[2].t") and the rule broken.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "gpucompute/v1/dtype.h"
#include "gpucompute/v1/tensor.pb.h"
#include "server/common/element_type.h"

namespace gpucompute {

using v1::DTypeName;
using v1::DTypeSize;

// Checks dtype, shape (non-negative dims) and that the payload holds exactly
// product(shape) * sizeof(dtype) bytes. Returns the element count.
absl::StatusOr<int64_t> CheckTensor(const v1::Tensor& tensor, absl::string_view field);

// A 1-D float32/float64 tensor as doubles. With `require_finite`, NaN and infinities are
// INVALID_ARGUMENT naming the first bad index.
absl::StatusOr<std::vector<double>> DecodeVector(const v1::Tensor& tensor, absl::string_view field,
                                                 bool require_finite = true);

// A 1-D tensor of `dtype` that takes ownership of `bytes` (no copy).
void EncodeVector(v1::DType dtype, int64_t n, std::string&& bytes, v1::Tensor* out);

// The element type of a float dtype (float32, float64, float16, bfloat16); INVALID_ARGUMENT
// naming `field` ("<field> is int32 but must be float32, float64, float16 or bfloat16").
absl::StatusOr<ElementType> FloatElementType(v1::DType dtype, absl::string_view field);

// The wire dtype of an element type.
v1::DType ToWireDType(ElementType type);

}  // namespace gpucompute
