// Building gpucompute.v1.Tensor messages from host vectors and decoding them back.
//
// A Tensor is {dtype, shape, raw little-endian row-major bytes}. These helpers are the client's
// one place that knows the byte layout; they are pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/cpp/float_convert.h"
#include "gpucompute/v1/dtype.h"
#include "gpucompute/v1/tensor.pb.h"

namespace gpucompute::client {

// Bytes per element and names of dtypes (gpucompute/v1/dtype.h, shared with the server).
using v1::DTypeName;
using v1::DTypeSize;

// Product of `shape`, or INVALID_ARGUMENT when a dimension is negative or the product overflows.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape);

// 1-D tensors holding `values` (FLOAT64 / FLOAT32).
v1::Tensor MakeTensor(absl::Span<const double> values);
v1::Tensor MakeTensor(absl::Span<const float> values);

// `values` converted to `dtype` (FLOAT64 or FLOAT32), 1-D. Converting to FLOAT32 rounds.
absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const double> values, v1::DType dtype);

// N-D tensors; INVALID_ARGUMENT when product(shape) != values.size().
absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const double> values,
                                      absl::Span<const int64_t> shape);
absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const float> values,
                                      absl::Span<const int64_t> shape);

// `values` encoded as raw little-endian `dtype` elements: FLOAT32, FLOAT64, FLOAT16 or BFLOAT16
// (narrowing rounds to nearest, ties to even). INVALID_ARGUMENT for any other dtype.
absl::StatusOr<std::string> EncodeFloats(absl::Span<const float> values, v1::DType dtype);

// N-D tensor of `values` encoded as `dtype` (as EncodeFloats); INVALID_ARGUMENT when
// product(shape) != values.size() or the dtype is not one of those four.
absl::StatusOr<v1::Tensor> MakeTensor(absl::Span<const float> values,
                                      absl::Span<const int64_t> shape, v1::DType dtype);

// All elements of `tensor`, in row-major order, converted to double. Accepts every dtype of
// tensor.proto (float16/bfloat16 widened exactly; int64 rounded above 2^53). INVALID_ARGUMENT
// when the dtype is unspecified, the payload is missing, or its size does not match the shape.
absl::StatusOr<std::vector<double>> TensorToDoubles(const v1::Tensor& tensor);

// All elements converted to float (float64 and int values round to nearest).
absl::StatusOr<std::vector<float>> TensorToFloats(const v1::Tensor& tensor);

// ---- tensors that refer to bytes elsewhere (docs/python.md "Resident tensors and shared memory")

// A Tensor naming the caller's resident tensor `handle` (PutTensor, or an output kept with
// KeepOutputs()); dtype and shape may be left empty (the server takes the resident tensor's).
v1::Tensor HandleTensor(std::string handle, v1::DType dtype = v1::DTYPE_UNSPECIFIED,
                        std::vector<int64_t> shape = {});

// A Tensor whose bytes are [offset, offset + product(shape) * sizeof(dtype)) of the shared-memory
// region registered as `region`. INVALID_ARGUMENT for an unknown dtype or a bad shape.
absl::StatusOr<v1::Tensor> SharedMemoryTensor(std::string region, int64_t offset, v1::DType dtype,
                                              std::vector<int64_t> shape);

// Output placements: keep every output on the server, or write them into `region` from
// `offset` (each at a multiple of 64 bytes, within `length` bytes; 0: to the region's end), or
// return none (each output Tensor then has dtype and shape only), or keep those over `bytes`
// and return the others inline.
v1::OutputPlacement KeepOutputs();
v1::OutputPlacement DiscardOutputs();
v1::OutputPlacement KeepOutputsAbove(int64_t bytes);
v1::OutputPlacement SharedMemoryOutputs(std::string region, int64_t offset = 0, int64_t length = 0);

// HalfToFloat, BFloat16ToFloat, FloatToHalf, FloatToBFloat16: client/cpp/float_convert.h.

}  // namespace gpucompute::client
