// Tensor encode/decode: raw little-endian row-major bytes (see tensor.proto).
#include "client/cpp/tensor_util.h"

#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpucompute::client {
namespace {

// Reads one little-endian T from `p`, whatever the host byte order.
template <typename T>
T LoadLittleEndian(const char* p) {
  T value;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&value, p, sizeof(T));
  } else {
    char swapped[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) swapped[i] = p[sizeof(T) - 1 - i];
    std::memcpy(&value, swapped, sizeof(T));
  }
  return value;
}

template <typename T>
void StoreLittleEndian(T value, char* p) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &value, sizeof(T));
  } else {
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = raw[sizeof(T) - 1 - i];
  }
}

template <typename T>
std::string EncodeElements(absl::Span<const T> values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if constexpr (std::endian::native == std::endian::little) {
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    for (size_t i = 0; i < values.size(); ++i) StoreLittleEndian(values[i], &bytes[i * sizeof(T)]);
  }
  return bytes;
}

template <typename T>
v1::Tensor MakeTensorImpl(absl::Span<const T> values, absl::Span<const int64_t> shape,
                          v1::DType dtype) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (int64_t d : shape) tensor.add_shape(d);
  tensor.set_data(EncodeElements(values));
  return tensor;
}

absl::Status CheckShape(size_t count, absl::Span<const int64_t> shape) {
  absl::StatusOr<int64_t> n = NumElements(shape);
  if (!n.ok()) return n.status();
  if (static_cast<uint64_t>(*n) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape holds ", *n, " elements but ", count, " values were given"));
  }
  return absl::OkStatus();
}

// Decodes every element of a checked tensor into Out.
template <typename Out>
absl::StatusOr<std::vector<Out>> DecodeAs(const v1::Tensor& tensor) {
  const int size = DTypeSize(tensor.dtype());
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor dtype ", DTypeName(tensor.dtype()), " cannot be decoded"));
  }
  if (tensor.payload_case() != v1::Tensor::kData) {
    return absl::InvalidArgumentError("tensor has no inline data");
  }
  absl::StatusOr<int64_t> n = NumElements(tensor.shape());
  if (!n.ok()) return n.status();
  const std::string& data = tensor.data();
  if (static_cast<uint64_t>(data.size()) != static_cast<uint64_t>(*n) * size) {
    return absl::InvalidArgumentError(absl::StrCat("tensor data holds ", data.size(),
                                                   " bytes but shape and dtype need ",
                                                   *n * size));
  }
  std::vector<Out> out(static_cast<size_t>(*n));
  const char* p = data.data();
  for (int64_t i = 0; i < *n; ++i, p += size) {
    switch (tensor.dtype()) {
      case v1::FLOAT32: out[i] = static_cast<Out>(LoadLittleEndian<float>(p)); break;
      case v1::FLOAT64: out[i] = static_cast<Out>(LoadLittleEndian<double>(p)); break;
      case v1::FLOAT16: out[i] = static_cast<Out>(HalfToFloat(LoadLittleEndian<uint16_t>(p))); break;
      case v1::BFLOAT16:
        out[i] = static_cast<Out>(BFloat16ToFloat(LoadLittleEndian<uint16_t>(p)));
        break;
      case v1::INT32: out[i] = static_cast<Out>(LoadLittleEndian<int32_t>(p)); break;
      case v1::INT64: out[i] = static_cast<Out>(LoadLittleEndian<int64_t>(p)); break;
      case v1::UINT8: out[i] = static_cast<Out>(static_cast<uint8_t>(*p)); break;
      default: return absl::InternalError("unreachable dtype");
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension ", d));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError("shape has too many elements");
    }
    n *= d;
  }
  return n;
}

v1::Tensor MakeTensor(absl::Span<const double> values) {
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  return MakeTensorImpl(values, shape, v1::FLOAT64);
}

v1::Tensor MakeTensor(absl::Span<const float> values) {
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  return MakeTensorImpl(values, shape, v1::FLOAT32);
}

absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const double> values, v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT64: return MakeTensor(values);
    case v1::FLOAT32: {
      std::vector<float> narrowed(values.begin(), values.end());
      return MakeTensor(absl::Span<const float>(narrowed));
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot encode values as ", DTypeName(dtype), " (float32/float64 only)"));
  }
}

absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const double> values,
                                      absl::Span<const int64_t> shape) {
  if (absl::Status s = CheckShape(values.size(), shape); !s.ok()) return s;
  return MakeTensorImpl(values, shape, v1::FLOAT64);
}

absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const float> values,
                                      absl::Span<const int64_t> shape) {
  if (absl::Status s = CheckShape(values.size(), shape); !s.ok()) return s;
  return MakeTensorImpl(values, shape, v1::FLOAT32);
}

absl::StatusOr<std::string> EncodeFloats(absl::Span<const float> values, v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return EncodeElements(values);
    case v1::FLOAT64: {
      std::vector<double> widened(values.begin(), values.end());
      return EncodeElements(absl::Span<const double>(widened));
    }
    case v1::FLOAT16:
    case v1::BFLOAT16: {
      std::string bytes(values.size() * 2, '\0');
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t bits =
            dtype == v1::FLOAT16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
        StoreLittleEndian(bits, &bytes[i * 2]);
      }
      return bytes;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot encode floats as ", DTypeName(dtype), " (float32/float64/float16/bfloat16)"));
  }
}

absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const float> values,
                                      absl::Span<const int64_t> shape, v1::DType dtype) {
  if (absl::Status s = CheckShape(values.size(), shape); !s.ok()) return s;
  absl::StatusOr<std::string> bytes = EncodeFloats(values, dtype);
  if (!bytes.ok()) return bytes.status();
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  for (int64_t d : shape) tensor.add_shape(d);
  tensor.set_data(*std::move(bytes));
  return tensor;
}

absl::StatusOr<std::vector<double>> TensorToDoubles(const v1::Tensor& tensor) {
  return DecodeAs<double>(tensor);
}

absl::StatusOr<std::vector<float>> TensorToFloats(const v1::Tensor& tensor) {
  return DecodeAs<float>(tensor);
}

v1::Tensor HandleTensor(std::string handle, v1::DType dtype, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.set_handle(std::move(handle));
  return t;
}

absl::StatusOr<v1::Tensor> SharedMemoryTensor(std::string region, int64_t offset, v1::DType dtype,
                                              std::vector<int64_t> shape) {
  const int size = DTypeSize(dtype);
  if (size == 0) return absl::InvalidArgumentError("SharedMemoryTensor: unknown dtype");
  absl::StatusOr<int64_t> n = NumElements(shape);
  if (!n.ok()) return n.status();
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  v1::SharedMemoryRef* ref = t.mutable_shared_memory();
  ref->set_region(std::move(region));
  ref->set_offset(offset);
  ref->set_length(*n * size);
  return t;
}

v1::OutputPlacement KeepOutputs() {
  v1::OutputPlacement p;
  p.set_keep(true);
  return p;
}

v1::OutputPlacement DiscardOutputs() {
  v1::OutputPlacement p;
  p.set_discard(true);
  return p;
}

v1::OutputPlacement KeepOutputsAbove(int64_t bytes) {
  v1::OutputPlacement p;
  p.set_keep_above_bytes(bytes);
  return p;
}

v1::OutputPlacement SharedMemoryOutputs(std::string region, int64_t offset, int64_t length) {
  v1::OutputPlacement p;
  v1::SharedMemoryRef* ref = p.mutable_shared_memory();
  ref->set_region(std::move(region));
  ref->set_offset(offset);
  ref->set_length(length);
  return p;
}

}  // namespace gpucompute::client
