// CUDA backend: one DeviceContext per visible GPU; batches go round-robin to devices and to
// a free stream slot on each. Completion: a stream callback posts to the completion queue
// (the callback itself makes no CUDA call; unlike cudaLaunchHostFunc it also runs after a
// device fault, so calls get an error instead of waiting forever).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/cuda/device_context.h"

namespace gpucompute {

class CudaBackend final : public Backend {
 public:
  static int DeviceCount();  // 0 when no driver or device
  // Creates a context per device and warms the kernel cache with the default variants.
  static absl::StatusOr<std::unique_ptr<Backend>> Create(const BackendOptions& options,
                                                         CompletionQueue* completions);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  void RunPeriodogram(std::shared_ptr<const periodogram::Batch> batch,
                      PeriodogramDone done) override;
  absl::Status CheckModelFits(int64_t stored_bytes) const override;
  absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> LoadDenseModel(
      dense::ModelSpec spec) override;
  void RunDense(std::shared_ptr<const dense::Batch> batch, DenseDone done) override;
  void RunAssimilate(std::shared_ptr<const assimilate::Batch> batch, AssimilateDone done) override;
  std::vector<DeviceDescription> Devices() const override;
  // cudaMemGetInfo and the pool's reserved/used attributes of each device; a device whose
  // query fails is left out (and logged).
  std::vector<DeviceMemoryUsage> MemoryUsage() const override;
  KernelCacheStats KernelStats() const override;
  std::string NvrtcVersion() const override { return KernelCache::NvrtcVersion(); }

 private:
  CudaBackend(std::vector<std::unique_ptr<DeviceContext>> devices, CompletionQueue* completions);

  // Round-robin over the devices.
  DeviceContext* NextDevice() { return devices_[next_device_.fetch_add(1) % devices_.size()].get(); }

  std::vector<std::unique_ptr<DeviceContext>> devices_;
  CompletionQueue* const completions_;
  std::atomic<uint64_t> next_device_{0};
};

}  // namespace gpucompute
