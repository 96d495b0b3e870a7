// Dense models given at start-up (--model_manifest): each is loaded as a LoadModel call would
// load it (the same header rules, limits, fit check and registry), before the server listens,
// so that a new or restarted server (a pod, a worker) serves Dense for them from its first call.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/backend.h"
#include "server/runtime/model_registry.h"
#include "server/service/limits.h"

namespace gpucompute {

// A model as the messages of a LoadModel stream: the header, then its tensors' chunks.
struct StartupModel {
  std::string source;  // where it came from, for errors and logs ("--model_manifest mlp=m.json")
  v1::ModelHeader header;
  std::vector<v1::TensorChunk> chunks;
};

// Loads `model` into `models` on `backend`. The error of the LoadModel call it stands for
// (INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED, ALREADY_EXISTS), prefixed with the
// source; nothing is left reserved.
absl::Status LoadStartupModel(const StartupModel& model, const DenseLimits& limits,
                              Backend& backend, ModelRegistry& models);

}  // namespace gpucompute
