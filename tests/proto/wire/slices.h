// Test helpers for wire-form messages: bytes cut into a ByteBuffer of several slices, pieces
// joined back, random bytes, a PutTensorChunk with every field set.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/string_view.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::testing_wire {

// `bytes` as a ByteBuffer of slices cut at `cuts` (sorted offsets into bytes).
inline grpc::ByteBuffer Sliced(const std::string& bytes, std::vector<size_t> cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  cuts.push_back(bytes.size());
  for (size_t c : cuts) {
    slices.emplace_back(bytes.data() + at, c - at);
    at = c;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

inline std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string out;
  for (absl::string_view p : pieces) out.append(p.data(), p.size());
  return out;
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A first PutTensorChunk: a header (float64, 3 x 5000), an offset past 32 bits and 120,000
// random bytes.
inline v1::PutTensorChunk SampleChunk() {
  v1::PutTensorChunk chunk;
  chunk.mutable_header()->set_dtype(v1::FLOAT64);
  chunk.mutable_header()->add_shape(3);
  chunk.mutable_header()->add_shape(5000);
  chunk.set_offset(123456789012);
  chunk.set_data(RandomBytes(120000, 1));
  return chunk;
}

}  // namespace gpucompute::testing_wire
