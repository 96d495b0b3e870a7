// Models loaded at start-up (see startup_models.h).
#include "server/service/startup_models.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/service/model_upload.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

// The steps of LoadModelReactor after its name is reserved: fit, chunks, conversion, load.
absl::Status LoadReserved(const StartupModel& model, ModelUpload& upload, Backend& backend,
                          ModelRegistry& models) {
  RETURN_IF_ERROR(backend.CheckModelFits(models.loading_bytes()));
  for (const v1::TensorChunk& chunk : model.chunks) RETURN_IF_ERROR(upload.Add(chunk));
  ASSIGN_OR_RETURN(dense::ModelSpec spec, upload.Finish());
  ASSIGN_OR_RETURN(std::shared_ptr<const dense::LoadedModel> loaded,
                   backend.LoadDenseModel(std::move(spec)));
  models.Publish(std::move(loaded));
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadStartupModel(const StartupModel& model, const DenseLimits& limits,
                              Backend& backend, ModelRegistry& models) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelUpload> upload, ModelUpload::Start(model.header, limits));
    RETURN_IF_ERROR(models.Reserve(upload->name(), upload->stored_bytes()));
    absl::Status loaded = LoadReserved(model, *upload, backend, models);
    if (!loaded.ok()) models.Release(upload->name());
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
