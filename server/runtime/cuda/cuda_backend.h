// CUDA backend: one DeviceContext per visible GPU; each batch goes to the least-loaded healthy
// device (for dense, among those holding the model) and to a free stream slot on it.
// Completion: an event recorded after each batch, watched by its device's CompletionPoller, which
// finishes the batch (or fails it with the stream's error after a device fault, so no call
// waits forever). A sticky CUDA error marks the devices unhealthy (every
// one: CUDA loses its state for the whole process, see OnStreamError): work fails with
// UNAVAILABLE and BackendOptions::on_device_unhealthy tells the server.
#pragma once

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/cuda/completion_poller.h"
#include "server/device/device_context.h"

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
  int64_t LetkfMaxMembers() const override;
  std::vector<DeviceDescription> Devices() const override;
  // cudaMemGetInfo and the pool's reserved/used attributes of each device; a device whose
  // query fails is left out (and logged).
  std::vector<DeviceMemoryUsage> MemoryUsage() const override;
  KernelCacheStats KernelStats() const override;
  std::string NvrtcVersion() const override { return KernelCache::NvrtcVersion(); }
  std::shared_ptr<HostMemory> TensorMemory() const override { return tensor_memory_; }
  // On the first healthy device's poller that is idle (CompletionPoller::RunIfIdle), from a
  // rotating start.
  bool RunOnIdleThread(std::function<void()> task) override;

  // After error `err` on `device`'s stream: a sticky one marks every device unhealthy (and
  // tells the listener). Returns what the batch's callers get: UNAVAILABLE for a lost device,
  // else the error as a status. Called when a batch's stream has failed.
  absl::Status OnStreamError(DeviceContext* device, cudaError_t err, const char* what);

 private:
  CudaBackend(std::vector<std::unique_ptr<DeviceContext>> devices,
              std::shared_ptr<SlotSignal> slot_signal, CompletionQueue* completions,
              const BackendOptions& options);

  // The healthy devices that may run a batch, least loaded first (DeviceContext::load); ties
  // in round-robin order. With `model`, only devices holding it.
  absl::InlinedVector<DeviceContext*, 8> DevicesByLoad(const dense::LoadedModel* model);
  // A free stream slot on the least loaded of DevicesByLoad(model) that has one, taken; waits
  // while every slot of those devices is lent, for the first one any of them frees (never for
  // one device while another has a slot free). {null, null} when no such device is healthy.
  std::pair<DeviceContext*, StreamSlot*> AcquireSlotOnAnyDevice(const dense::LoadedModel* model);
  // Runs one batch of `Op` on a device that may (`model`: one holding it); UNAVAILABLE when no
  // healthy device can.
  template <typename Op>
  void Run(std::shared_ptr<const typename Op::Batch> batch, const dense::LoadedModel* model,
           std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done);
  // Run's second half, on the slot it took (on the poller thread, or Run's caller).
  template <typename Op>
  void Launch(std::shared_ptr<const typename Op::Batch> batch, DeviceContext* device, StreamSlot* slot,
              absl::Time taken, std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done);
  // Fails a batch with `status` on a completion thread.
  template <typename Op>
  void Fail(std::function<void(absl::StatusOr<std::vector<typename Op::Result>>)> done, absl::Status status);
  // Where a model of `stored_bytes` goes: every healthy device (replicate_models) or the one
  // with the most free memory; RESOURCE_EXHAUSTED when it does not fit there.
  absl::StatusOr<std::vector<DeviceContext*>> ModelDevices(int64_t stored_bytes) const;
  // Fault injection: true when this batch on `device` is the one to trap after.
  bool InjectFaultNow(const DeviceContext& device);

  std::vector<std::unique_ptr<DeviceContext>> devices_;
  std::shared_ptr<SlotSignal> slot_signal_;  // every device's: a slot freed on any of them
  CompletionQueue* const completions_;
  const BackendOptions options_;
  std::atomic<uint64_t> next_device_{0};
  std::atomic<int64_t> injected_batches_{0};  // batches seen on options_.inject_fault_device
  // One per device, at its ordinal (DeviceContext::device()). Declared last, so destroyed
  // first: they finish every batch still in flight while the devices and the completion
  // queue are still there.
  std::vector<std::unique_ptr<CompletionPoller>> pollers_;
  // Page-locked blocks for resident tensors (portable: every device's copies read them).
  std::shared_ptr<HostMemory> tensor_memory_;
  CompletionPoller& PollerOf(const DeviceContext& device) {
    return *pollers_[static_cast<size_t>(device.device())];
  }
};

}  // namespace gpucompute
