// Tensor decoding and encoding (see tensor_codec.h).
#include "server/service/tensor_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpucompute {

absl::StatusOr<int64_t> CheckTensor(const v1::Tensor& tensor, absl::string_view field) {
  const int size = DTypeSize(tensor.dtype());
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".dtype: must be set to a known dtype (got ", static_cast<int>(tensor.dtype()), ")"));
  }
  if (tensor.payload_case() != v1::Tensor::kData) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".data: missing"));
  }
  int64_t count = 1;
  for (int i = 0; i < tensor.shape_size(); ++i) {
    const int64_t d = tensor.shape(i);
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape[", i, "]: must be >= 0 (got ", d, ")"));
    }
    if (d > 0 && count > std::numeric_limits<int64_t>::max() / d / size) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape: too many elements"));
    }
    count *= d;
  }
  const uint64_t expected = static_cast<uint64_t>(count) * size;
  if (tensor.data().size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data: holds ", tensor.data().size(), " bytes but shape [",
        absl::StrJoin(tensor.shape(), ","), "] of ", DTypeName(tensor.dtype()), " needs ",
        expected));
  }
  return count;
}

absl::StatusOr<std::vector<double>> DecodeVector(const v1::Tensor& tensor, absl::string_view field,
                                                 bool require_finite) {
  if (tensor.shape_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape: must be 1-D (got ", tensor.shape_size(), " dimensions)"));
  }
  if (tensor.dtype() != v1::FLOAT32 && tensor.dtype() != v1::FLOAT64) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".dtype: must be float32 or float64 (got ", DTypeName(tensor.dtype()), ")"));
  }
  auto count = CheckTensor(tensor, field);
  if (!count.ok()) return count.status();
  std::vector<double> out(static_cast<size_t>(*count));
  const char* data = tensor.data().data();
  if (tensor.dtype() == v1::FLOAT64) {
    std::memcpy(out.data(), data, out.size() * sizeof(double));
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      out[i] = v;
    }
  }
  if (require_finite) {
    for (size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(out[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": values must be finite (index ", i, " is ", out[i], ")"));
      }
    }
  }
  return out;
}

void EncodeVector(v1::DType dtype, int64_t n, std::string&& bytes, v1::Tensor* out) {
  out->set_dtype(dtype);
  out->clear_shape();
  out->add_shape(n);
  out->set_data(std::move(bytes));
}

absl::StatusOr<ElementType> FloatElementType(v1::DType dtype, absl::string_view field) {
  switch (dtype) {
    case v1::FLOAT32: return ElementType::kFloat32;
    case v1::FLOAT64: return ElementType::kFloat64;
    case v1::FLOAT16: return ElementType::kFloat16;
    case v1::BFLOAT16: return ElementType::kBFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(field, " is ", DTypeName(dtype),
                                                     " but must be float32, float64, float16 or bfloat16"));
  }
}

v1::DType ToWireDType(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return v1::FLOAT32;
    case ElementType::kFloat64: return v1::FLOAT64;
    case ElementType::kFloat16: return v1::FLOAT16;
    case ElementType::kBFloat16: return v1::BFLOAT16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

}  // namespace gpucompute
