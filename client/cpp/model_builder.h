// ModelBuilder: assembles a dense model (layers of float vectors) into the ModelUpload that
// Client::LoadModel streams, plus helpers for Dense requests and results.
//
//   ModelBuilder builder("mlp");
//   builder.SetDType(v1::BFLOAT16)
//          .AddLayer({.weight = w0, .in_features = 256, .out_features = 512, .bias = b0,
//                     .layernorm = true, .activation = v1::ACTIVATION_GELU_TANH})
//          .AddLayer({.weight = w1, .in_features = 512, .out_features = 128});
//   ASSIGN_OR_RETURN(client::ModelUpload upload, builder.Build());
//   ASSIGN_OR_RETURN(client::LoadModelResult loaded, client.LoadModel(std::move(upload)));
//   ASSIGN_OR_RETURN(v1::DenseRequest request, MakeDenseRequest("mlp", x, rows, 256));
//
// Each layer computes y = activation(LayerNorm(x) . W + b) with W of shape [in_features,
// out_features] (row-major) and LayerNorm's biased variance. The builder checks each vector
// against its layer's declared shape; everything else (layers chaining, names, limits) is the
// server's to check, with field paths in its INVALID_ARGUMENT.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/cpp/client.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::client {

struct DenseLayer {
  std::vector<float> weight;   // in_features * out_features values, row-major [in, out]
  int64_t in_features = 0;
  int64_t out_features = 0;
  std::vector<float> bias;     // empty (no bias) or out_features values
  bool layernorm = false;      // normalise each input row first
  std::optional<double> eps;   // LayerNorm epsilon; unset: the server's default, 1e-5
  std::vector<float> gamma;    // LayerNorm scale: empty (ones) or in_features values
  std::vector<float> beta;     // LayerNorm shift: empty (zeros) or in_features values
  v1::Activation activation = v1::ACTIVATION_NONE;
};

// Activation names as the CLI, manifests and the Python client spell them: "none",
// "gelu_tanh", "gelu_erf", "relu", "silu". INVALID_ARGUMENT for anything else.
absl::StatusOr<v1::Activation> ParseActivation(absl::string_view name);
absl::string_view ActivationName(v1::Activation activation);

// A model's storage/compute dtype by name: "float32", "float16" or "bfloat16".
absl::StatusOr<v1::DType> ParseModelDType(absl::string_view name);

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name);

  // Storage and compute dtype: FLOAT32 (the default, as in the proto), FLOAT16 or BFLOAT16.
  ModelBuilder& SetDType(v1::DType dtype);
  // float32 models only: let the server's matrix products use TF32 tensor cores.
  ModelBuilder& SetAllowTf32(bool allow);
  // The dtype the tensors travel in: FLOAT32 (default, lossless for float vectors), or
  // FLOAT16/BFLOAT16 to halve the upload, rounded here (nearest even) as the server would
  // round them for a model of that dtype.
  ModelBuilder& SetWireDType(v1::DType dtype);
  ModelBuilder& AddLayer(DenseLayer layer);

  const std::string& name() const { return name_; }
  v1::DType dtype() const { return dtype_; }
  const std::vector<DenseLayer>& layers() const { return layers_; }

  // The header and every tensor's bytes (weight, bias, gamma, beta per layer, those present).
  // INVALID_ARGUMENT naming the layer when a vector's size does not match the layer's shape,
  // gamma/beta/eps are set without layernorm, or the wire dtype is not a float type.
  absl::StatusOr<ModelUpload> Build() const;

 private:
  std::string name_;
  v1::DType dtype_ = v1::FLOAT32;
  bool allow_tf32_ = false;
  v1::DType wire_dtype_ = v1::FLOAT32;
  std::vector<DenseLayer> layers_;
};

// A Dense request for `rows` x `in_features` values (row-major), sent as `dtype` (FLOAT32,
// FLOAT64, FLOAT16 or BFLOAT16). INVALID_ARGUMENT when x.size() != rows * in_features.
absl::StatusOr<v1::DenseRequest> MakeDenseRequest(std::string model, absl::Span<const float> x,
                                                  int64_t rows, int64_t in_features,
                                                  v1::DType dtype = v1::FLOAT32);

// A Dense response's output, widened to float (exact for every dtype a model can have).
struct DenseOutput {
  int64_t rows = 0;
  int64_t cols = 0;                 // out_features of the model's last layer
  v1::DType dtype = v1::FLOAT32;    // as sent: the model's dtype
  std::vector<float> values;        // rows * cols, row-major
};
// INVALID_ARGUMENT when the output is not a well-formed 2-D float tensor.
absl::StatusOr<DenseOutput> DecodeDenseOutput(const v1::DenseResponse& response);

// The stack's output for `x` ([rows, layers[0].in_features], row-major) in float64, by naive
// loops over the float weights: a reference for checking the server. Activations come from
// math/activation.cuh (the formulas of the proto's Activation comments).
// INVALID_ARGUMENT when shapes do not chain or sizes do not match.
absl::StatusOr<std::vector<double>> DenseReference(const std::vector<DenseLayer>& layers,
                                                   absl::Span<const double> x, int64_t rows);

// ||a - b||_2 / ||b||_2 (0 when both are zero; +inf when b is zero but a is not), and NaN when
// either holds a NaN, so that a NaN never passes a tolerance check.
double RelativeL2Error(absl::Span<const double> a, absl::Span<const double> b);

}  // namespace gpucompute::client
