// The resident dense models by name. A load first reserves its name (so two loads of one name
// cannot race and a failed load leaves nothing behind), then publishes the loaded model.
// Requests hold models by shared_ptr: unloading only drops the registry's reference, and the
// weights are freed when the last batch using them ends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/ops/dense/dense.h"

namespace gpucompute {

class ModelRegistry {
 public:
  explicit ModelRegistry(int max_models) : max_models_(max_models) {}

  // Claims `name` for a load of a model of `bytes` (stored): ALREADY_EXISTS when it is loaded
  // or being loaded, RESOURCE_EXHAUSTED when max_models are loaded or loading.
  absl::Status Reserve(const std::string& name, int64_t bytes = 0);
  // Gives up a reservation (the load failed).
  void Release(const std::string& name);
  // Turns the reservation of model->info().name into a loaded model.
  void Publish(std::shared_ptr<const dense::LoadedModel> model);

  // NOT_FOUND naming the model when it is not loaded.
  absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> Find(absl::string_view name) const;
  absl::Status Unload(absl::string_view name);
  std::vector<dense::ModelInfo> List() const;  // sorted by name
  // Drops every model (at shutdown, before the backend goes).
  void Clear();

  int max_models() const { return max_models_; }
  // The stored bytes of the loads in progress (reserved, not yet published or released): a new
  // load must fit beside them.
  int64_t loading_bytes() const;

 private:
  const int max_models_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const dense::LoadedModel>> models_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> loading_ ABSL_GUARDED_BY(mu_);  // name -> bytes
};

}  // namespace gpucompute
