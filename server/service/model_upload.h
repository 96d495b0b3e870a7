// Assembles a model from a LoadModel stream: validates the header (every rule names its field,
// e.g. "header.layers[1].weight.shape"), collects each tensor's chunks in order, and at the
// end converts and folds them into a dense::ModelSpec. Nothing here touches a device.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/ops/dense/dense.h"
#include "server/service/limits.h"

namespace gpucompute {

class ModelUpload {
 public:
  // INVALID_ARGUMENT for a malformed header, RESOURCE_EXHAUSTED over a limit.
  static absl::StatusOr<std::unique_ptr<ModelUpload>> Start(const v1::ModelHeader& header,
                                                           const DenseLimits& limits);

  const std::string& name() const { return name_; }
  ElementType dtype() const { return dtype_; }
  // Stored bytes of the model (dense::StoredBytes), known from the header alone.
  int64_t stored_bytes() const { return stored_bytes_; }

  // Appends one chunk; INVALID_ARGUMENT for an unknown tensor, out-of-order or excess bytes.
  absl::Status Add(const v1::TensorChunk& chunk);

  // INVALID_ARGUMENT when a tensor is incomplete or holds a non-finite value; otherwise the
  // model with gamma/beta folded in. Frees the received bytes.
  absl::StatusOr<dense::ModelSpec> Finish();

 private:
  struct Pending {
    std::string field;  // "layers[0].weight"
    ElementType wire = ElementType::kFloat32;
    int64_t elements = 0;
    std::string bytes;  // received so far
    bool declared = false;
  };
  struct PendingLayer {
    int64_t in = 0;
    int64_t out = 0;
    bool layernorm = false;
    double eps = dense::kDefaultLayerNormEps;
    dense::Activation activation = dense::Activation::kNone;
    Pending tensors[4];  // indexed by v1::LayerTensor
  };

  ModelUpload() = default;
  // INVALID_ARGUMENT when fewer bytes than declared arrived.
  static absl::Status CheckComplete(const Pending& p);
  // The tensor's values as doubles, after checking completeness and finiteness.
  absl::StatusOr<std::vector<double>> TakeDoubles(Pending& p);

  std::string name_;
  ElementType dtype_ = ElementType::kFloat32;
  bool allow_tf32_ = false;
  int64_t stored_bytes_ = 0;
  std::vector<PendingLayer> layers_;
};

}  // namespace gpucompute
