// CUDA host code of dense-layer inference: models made resident on a device (weights rounded
// to the model's dtype, rows padded to a multiple of 8 elements), and batches run on a stream
// slot: pack the requests' rows into pinned staging, one copy in, per layer either the
// few-rows kernel (one or two rows: streams W once, LayerNorm, bias and activation fused) or
// LayerNorm/convert + a cuBLASLt product with a bias(+GELU/ReLU) epilogue (+ an activation
// kernel for gelu_erf and silu), one copy out.
//
// Threading: a CudaDenseModel is immutable once uploaded except for its cache of cuBLASLt
// plans (mutex), so any number of slots may run it at once. A slot is used by one batch at a
// time (DeviceContext::AcquireSlot).
#pragma once

#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/ops/dense/batch_plan.h"
#include "server/ops/dense/dense.h"
#include "server/device/cublaslt.h"
#include "server/device/device_context.h"

namespace gpucompute::dense {

// One layer as resident on one device (pointers into the model's one allocation).
struct CudaLayer {
  int64_t in = 0;
  int64_t out = 0;
  int64_t ldw = 0;  // PaddedCols(in): row stride of the transposed weight
  int64_t ldy = 0;  // PaddedCols(out): row stride of this layer's output, length of the biases
  bool layernorm = false;
  float eps = 1e-5f;
  Activation activation = Activation::kNone;
  // W^T: out rows of ldw values in the model's dtype, padding columns zero. Transposed
  // ("K-major") so that one output's weights are contiguous for the few-rows kernel; cuBLASLt
  // reads it with op T at the same speed as the natural layout (docs/design/dense.md).
  const void* weight = nullptr;
  const float* bias = nullptr;       // ldy floats (padding zero)
  const float* colsum = nullptr;     // ldy floats: sum over k of the stored W (the tensor-core
                                     // kernel's LayerNorm fold)
  const void* bias_model = nullptr;  // the bias in the model's dtype (if cuBLASLt refuses f32)
};

// A cuBLASLt product prepared for one (layer, rows, ldb): descriptors and the chosen algorithm.
struct GemmPlan;

// One device's copy of a model. Owns its device memory (one allocation) and its plan cache.
class CudaDenseModel {
 public:
  ~CudaDenseModel();
  CudaDenseModel(const CudaDenseModel&) = delete;
  CudaDenseModel& operator=(const CudaDenseModel&) = delete;

  int device() const { return memory_.device(); }
  ElementType dtype() const { return dtype_; }
  bool allow_tf32() const { return allow_tf32_; }
  const std::vector<CudaLayer>& layers() const { return layers_; }
  int64_t in_features() const { return layers_.front().in; }
  int64_t out_features() const { return layers_.back().out; }
  size_t device_bytes() const { return memory_.size(); }

  // The plan for layer `layer` over `rows` rows whose input has leading dimension `ldb`:
  // built (heuristic query) on first use, then a lookup. Thread-safe; the plan lives as long
  // as the model.
  absl::StatusOr<const GemmPlan*> Plan(cublasLtHandle_t handle, int layer, int64_t rows,
                                       int64_t ldb) const;
  int64_t cached_plans() const;

 private:
  friend absl::StatusOr<std::unique_ptr<CudaDenseModel>> UploadModel(DeviceContext& device,
                                                                      const ModelSpec& spec);
  CudaDenseModel() = default;

  ElementType dtype_ = ElementType::kFloat32;
  bool allow_tf32_ = false;
  std::vector<CudaLayer> layers_;
  DeviceMemory memory_;

  mutable absl::Mutex mu_;
  // Key: (layer, rows, ldb).
  mutable absl::flat_hash_map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<GemmPlan>> plans_
      ABSL_GUARDED_BY(mu_);
};

// Makes `spec` resident on `device`: weights rounded to spec.dtype on the host (round to
// nearest even, as the device would), padded, and copied into one cudaMalloc allocation.
// Blocking. RESOURCE_EXHAUSTED when the device is out of memory (after trimming the stream
// pool once); nothing stays allocated on any failure. INVALID_ARGUMENT for a malformed spec.
absl::StatusOr<std::unique_ptr<CudaDenseModel>> UploadModel(DeviceContext& device,
                                                            const ModelSpec& spec);

// The model the CUDA backend hands out: one CudaDenseModel per device (index = device id).
class CudaLoadedModel final : public LoadedModel {
 public:
  CudaLoadedModel(ModelInfo info, std::vector<std::unique_ptr<CudaDenseModel>> per_device)
      : LoadedModel(std::move(info)), per_device_(std::move(per_device)) {}
  // Null when the model is not resident on `device`.
  const CudaDenseModel* on_device(int device) const {
    return device >= 0 && device < static_cast<int>(per_device_.size())
               ? per_device_[static_cast<size_t>(device)].get()
               : nullptr;
  }

 private:
  std::vector<std::unique_ptr<CudaDenseModel>> per_device_;
};

// Uploads `spec` to every device in `devices` (indexed by DeviceContext::device()) and wraps
// the copies; sets load_ms. All or nothing.
absl::StatusOr<std::shared_ptr<const LoadedModel>> LoadModelOnDevices(
    const std::vector<DeviceContext*>& devices, const ModelSpec& spec);

// OK when `bytes` of model (plus padding and a safety margin) fit in the free memory of
// `device` (free memory plus what the stream pool holds idle); RESOURCE_EXHAUSTED with
// "model needs X bytes on device N but only Y are free" otherwise.
absl::Status CheckFitsOnDevice(DeviceContext& device, int64_t bytes);

// Benchmark and test knobs: events recorded on the stream just before the first layer and just
// after the last (device time of the layers alone), and a forced path.
struct EnqueueOptions {
  cudaEvent_t before = nullptr;
  cudaEvent_t after = nullptr;
  DensePath path = DensePath::kAuto;
  int tensor_core_cluster = 0;  // CTAs per cluster of the tensor-core kernel; 0: its default
  // Called with the stream after the copy in and before `before` is recorded: a benchmark
  // enqueues its L2 flush here, so that the layers queue up behind it on the same engine.
  void (*before_layers)(cudaStream_t stream, void* arg) = nullptr;
  void* before_layers_arg = nullptr;
};

// Where an enqueued batch's outputs will be in the slot's output staging buffer.
struct PendingDense {
  ElementType dtype = ElementType::kFloat32;
  int64_t out_features = 0;
  std::vector<int64_t> row_offsets;  // per request, first row in the batch
};

// Enqueues `batch` (its model must be a CudaLoadedModel resident on `device`) on `slot`'s
// stream. Returns once everything is enqueued; the outputs are valid in slot.staging_out once
// the stream reaches the point after this call. INVALID_ARGUMENT when a request's byte count
// does not match rows x in_features x input dtype.
absl::StatusOr<PendingDense> EnqueueDense(DeviceContext& device, StreamSlot& slot,
                                          const Batch& batch,
                                          const EnqueueOptions* options = nullptr);

// One Output per request, copied out of the slot's staging buffer (host work only).
std::vector<Output> UnpackDense(const PendingDense& pending, const StreamSlot& slot,
                                const Batch& batch);

// Runs a small model of every dtype through both paths (every few-rows variant, every input
// dtype) on every stream, so that no request pays for lazy module loading, cuBLASLt set-up or
// a stream's first use.
absl::Status WarmUpDense(DeviceContext& device);

}  // namespace gpucompute::dense
