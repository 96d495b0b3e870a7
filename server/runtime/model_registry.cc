// Resident models by name (see model_registry.h).
#include "server/runtime/model_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpucompute {

absl::Status ModelRegistry::Reserve(const std::string& name, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (models_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("model '", name, "' is already loaded; unload it first"));
  }
  if (loading_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is being loaded"));
  }
  if (static_cast<int>(models_.size() + loading_.size()) >= max_models_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "at most ", max_models_, " models may be loaded (--max_models); unload one first"));
  }
  loading_.emplace(name, bytes);
  return absl::OkStatus();
}

int64_t ModelRegistry::loading_bytes() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [name, bytes] : loading_) total += bytes;
  return total;
}

void ModelRegistry::Release(const std::string& name) {
  absl::MutexLock lock(&mu_);
  loading_.erase(name);
}

void ModelRegistry::Publish(std::shared_ptr<const dense::LoadedModel> model) {
  absl::MutexLock lock(&mu_);
  const std::string& name = model->info().name;
  loading_.erase(name);
  models_[name] = std::move(model);
}

absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> ModelRegistry::Find(
    absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
  }
  return it->second;
}

absl::Status ModelRegistry::Unload(absl::string_view name) {
  std::shared_ptr<const dense::LoadedModel> dropped;  // freed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
  }
  dropped = std::move(it->second);
  models_.erase(it);
  return absl::OkStatus();
}

std::vector<dense::ModelInfo> ModelRegistry::List() const {
  std::vector<dense::ModelInfo> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, model] : models_) out.push_back(model->info());
  }
  std::sort(out.begin(), out.end(),
            [](const dense::ModelInfo& a, const dense::ModelInfo& b) { return a.name < b.name; });
  return out;
}

void ModelRegistry::Clear() {
  absl::flat_hash_map<std::string, std::shared_ptr<const dense::LoadedModel>> dropped;
  absl::MutexLock lock(&mu_);
  dropped.swap(models_);
}

}  // namespace gpucompute
