// Models loaded at start-up (see startup_models.h).
#include "server/service/startup_models.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/load_model_reactor.h"
#include "server/service/model_upload.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// The steps of LoadModelReactor after its name is reserved: fit, chunks, then its last step.
absl::Status LoadReserved(const StartupModel& model, std::unique_ptr<ModelUpload> upload,
                          Backend& backend, ModelRegistry& models,
                          std::chrono::steady_clock::time_point start) {
  RETURN_IF_ERROR(backend.CheckModelFits(models.loading_bytes()));
  for (const v1::TensorChunk& chunk : model.chunks) RETURN_IF_ERROR(upload->Add(chunk));
  ASSIGN_OR_RETURN(std::shared_ptr<const dense::LoadedModel> loaded,
                   LoadUploadedModel(std::move(upload), backend, start));
  models.Publish(std::move(loaded));
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadStartupModel(const StartupModel& model, const DenseLimits& limits,
                              Backend& backend, ModelRegistry& models) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelUpload> upload, ModelUpload::Start(model.header, limits));
    const std::string name = upload->name();
    RETURN_IF_ERROR(models.Reserve(name, upload->stored_bytes()));
    absl::Status loaded = LoadReserved(model, std::move(upload), backend, models, start);
    if (!loaded.ok()) models.Release(name);
    return loaded;
  }();
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(model.source, ": ", status.message()));
  }
  spdlog::info("{}: model '{}' loaded in {:.1f} ms", model.source, model.header.name(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count());
  return absl::OkStatus();
}

}  // namespace gpucompute
