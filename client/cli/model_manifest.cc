// JSON model manifests; see model_manifest.h for the format.
#include "client/cli/model_manifest.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/npy.h"
#include "nlohmann/json.hpp"

namespace gpucompute::cli {
namespace {

using nlohmann::json;

absl::Status Error(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::Status CheckKeys(const json& object, absl::string_view where,
                       std::initializer_list<absl::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (absl::string_view a : allowed) known |= key == a;
    if (!known) {
      return Error(where, absl::StrCat("unknown key \"", key, "\" (expected ",
                                       absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// Reads the .npy named by `value` (a string) and checks its rank.
absl::StatusOr<NpyArray> ReadArray(const json& value, absl::string_view where, size_t rank,
                                   const std::string& base_dir) {
  if (!value.is_string()) return Error(where, "expected a .npy path (a string)");
  std::filesystem::path path(value.get<std::string>());
  if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
  absl::StatusOr<NpyArray> array = ReadNpyFile(path.string());
  if (!array.ok()) {
    return absl::Status(array.status().code(), absl::StrCat(where, ": ", array.status().message()));
  }
  if (array->shape.size() != rank) {
    return Error(where, absl::StrCat(path.string(), " has shape (", absl::StrJoin(array->shape, ", "),
                                     "), expected ", rank, "-D"));
  }
  return array;
}

std::vector<float> ToFloats(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

absl::StatusOr<client::DenseLayer> ParseLayer(const json& j, const std::string& where,
                                              const std::string& base_dir) {
  if (!j.is_object()) return Error(where, "expected an object");
  if (absl::Status s = CheckKeys(j, where, {"weight", "bias", "layernorm", "activation"});
      !s.ok()) {
    return s;
  }
  client::DenseLayer layer;
  if (!j.contains("weight")) return Error(where, "\"weight\" is required");
  absl::StatusOr<NpyArray> weight = ReadArray(j["weight"], where + ".weight", 2, base_dir);
  if (!weight.ok()) return weight.status();
  layer.in_features = weight->shape[0];
  layer.out_features = weight->shape[1];
  layer.weight = ToFloats(weight->data);

  if (j.contains("bias") && !j["bias"].is_null()) {
    absl::StatusOr<NpyArray> bias = ReadArray(j["bias"], where + ".bias", 1, base_dir);
    if (!bias.ok()) return bias.status();
    layer.bias = ToFloats(bias->data);
  }
  if (j.contains("layernorm")) {
    const json& ln = j["layernorm"];
    const std::string ln_where = where + ".layernorm";
    if (ln.is_boolean()) {
      layer.layernorm = ln.get<bool>();
    } else if (ln.is_object()) {
      layer.layernorm = true;
      if (absl::Status s = CheckKeys(ln, ln_where, {"eps", "gamma", "beta"}); !s.ok()) return s;
      if (ln.contains("eps") && !ln["eps"].is_null()) {
        if (!ln["eps"].is_number()) return Error(ln_where + ".eps", "expected a number");
        layer.eps = ln["eps"].get<double>();
      }
      for (const char* name : {"gamma", "beta"}) {
        if (!ln.contains(name) || ln[name].is_null()) continue;
        absl::StatusOr<NpyArray> a = ReadArray(ln[name], absl::StrCat(ln_where, ".", name), 1, base_dir);
        if (!a.ok()) return a.status();
        (std::string(name) == "gamma" ? layer.gamma : layer.beta) = ToFloats(a->data);
      }
    } else if (!ln.is_null()) {
      return Error(ln_where, "expected true, false or an object {eps, gamma, beta}");
    }
  }
  if (j.contains("activation") && !j["activation"].is_null()) {
    if (!j["activation"].is_string()) {
      return Error(where + ".activation", "expected a name (a string)");
    }
    absl::StatusOr<v1::Activation> act = client::ParseActivation(j["activation"].get<std::string>());
    if (!act.ok()) return Error(where + ".activation", act.status().message());
    layer.activation = *act;
  }
  return layer;
}

}  // namespace

absl::StatusOr<ModelManifest> ParseModelManifest(absl::string_view json_text,
                                                 const std::string& base_dir) {
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("manifest is not valid JSON");
  ModelManifest manifest;
  const json* layers = &root;
  if (root.is_object()) {
    if (absl::Status s = CheckKeys(root, "manifest", {"layers", "dtype", "allow_tf32"}); !s.ok()) {
      return s;
    }
    if (!root.contains("layers")) return Error("manifest", "\"layers\" is required");
    layers = &root["layers"];
    if (root.contains("dtype")) {
      if (!root["dtype"].is_string()) return Error("dtype", "expected a string");
      manifest.dtype = root["dtype"].get<std::string>();
    }
    if (root.contains("allow_tf32")) {
      if (!root["allow_tf32"].is_boolean()) return Error("allow_tf32", "expected true or false");
      manifest.allow_tf32 = root["allow_tf32"].get<bool>();
    }
  }
  if (!layers->is_array()) {
    return Error("layers", "expected an array of layers (or an object with \"layers\")");
  }
  if (layers->empty()) return Error("layers", "a model needs at least one layer");
  for (size_t i = 0; i < layers->size(); ++i) {
    absl::StatusOr<client::DenseLayer> layer =
        ParseLayer((*layers)[i], absl::StrCat("layers[", i, "]"), base_dir);
    if (!layer.ok()) return layer.status();
    manifest.layers.push_back(*std::move(layer));
  }
  return manifest;
}

absl::StatusOr<ModelManifest> ReadModelManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<ModelManifest> manifest =
      ParseModelManifest(text.str(), std::filesystem::path(path).parent_path().string());
  if (!manifest.ok()) {
    return absl::Status(manifest.status().code(),
                        absl::StrCat(path, ": ", manifest.status().message()));
  }
  return manifest;
}

client::ModelBuilder BuilderOf(const std::string& name, ModelManifest manifest, v1::DType dtype,
                               bool allow_tf32) {
  client::ModelBuilder builder(name);
  builder.SetDType(dtype).SetAllowTf32(allow_tf32);
  for (client::DenseLayer& layer : manifest.layers) builder.AddLayer(std::move(layer));
  return builder;
}

}  // namespace gpucompute::cli
