// Reading a dense model from a JSON manifest and .npy files, for `gpucompute model load`.
//
//   {"dtype": "bfloat16", "allow_tf32": false,          <- optional; CLI flags override
//    "layers": [
//      {"weight": "w0.npy", "bias": "b0.npy", "layernorm": true, "activation": "gelu_tanh"},
//      {"weight": "w1.npy", "layernorm": {"eps": 1e-6, "gamma": "g1.npy", "beta": "b1.npy"}},
//      {"weight": "w2.npy"}]}
//
// A bare array of layers is accepted too. Per layer: "weight" (required; a 2-D .npy of shape
// [in_features, out_features]), "bias" (1-D, out_features), "layernorm" (true/false, or an
// object with optional "eps", "gamma", "beta"; gamma/beta 1-D of in_features), "activation"
// (none, gelu_tanh, gelu_erf, relu, silu; default none). Paths are relative to the manifest's
// folder unless absolute. Unknown keys are errors (they are usually typos). Shapes across
// layers are left to the server, which names the offending field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cpp/model_builder.h"

namespace gpucompute::cli {

struct ModelManifest {
  std::vector<client::DenseLayer> layers;
  std::optional<std::string> dtype;  // "dtype", when the manifest names one
  std::optional<bool> allow_tf32;    // "allow_tf32", when present
};

// Parses manifest text; relative .npy paths are resolved against `base_dir` ("" = the current
// folder). INVALID_ARGUMENT (with the JSON path, e.g. "layers[1].bias") for malformed JSON,
// unknown keys, wrong types, unknown activations and arrays of the wrong rank; the error of a
// .npy file that cannot be read.
absl::StatusOr<ModelManifest> ParseModelManifest(absl::string_view json_text,
                                                 const std::string& base_dir);

// Reads the manifest at `path` (NOT_FOUND when it cannot be opened); errors carry the path.
absl::StatusOr<ModelManifest> ReadModelManifest(const std::string& path);

// A ModelBuilder for model `name` holding the manifest's layers, stored in `dtype`, with
// `allow_tf32` (callers resolve both from their flags and the manifest's "dtype" and
// "allow_tf32"). Used by `gpucompute model load` and the server's --model_manifest.
client::ModelBuilder BuilderOf(const std::string& name, ModelManifest manifest, v1::DType dtype,
                               bool allow_tf32);

}  // namespace gpucompute::cli
