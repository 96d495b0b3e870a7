// CUDA host code of the periodogram: packs a batch into the slot's pinned staging buffer,
// copies it in, computes every series on the device (nterms = 1 direct: the NVRTC kernel, all
// such series in one launch, or for large uniform grids matrix products on the tensor cores,
// kernels/lombscargle_product.cuh; nterms > 1 direct: nvcc kernels per nterms; fast: spreading,
// cuFFT and the power kernel, kernels/nufft_kernels.cuh), reduces the peaks on the device and
// copies power and peaks out, all on the slot's stream. Peak-only (bootstrap) series' power
// stays on the device.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/periodogram/batch_plan.h"
#include "server/ops/periodogram/periodogram.h"
#include "server/device/device_context.h"
#include "server/device/kernel_cache.h"

namespace gpucompute::periodogram {

// The NVRTC program for one dtype and shape (a kernel-cache key).
KernelSpec LombScargleKernelSpec(ElementType dtype, const CudaKernelShape& shape);

// The kernel for (dtype, shape) from the device's cache: built on first use, then a lookup.
absl::StatusOr<cudaKernel_t> PeriodogramKernel(DeviceContext& device, ElementType dtype,
                                               const CudaKernelShape& shape);

// Compiles (or loads) every default kernel and runs a tiny batch of each dtype and shape
// through the whole pipeline on every stream, so that no request pays for first-use costs
// (NVRTC, lazy module loading of the nvcc-built kernels, pool growth, first use of a stream).
absl::Status WarmUpPeriodogram(DeviceContext& device);

// Where one enqueued batch's results will be in the slot's output staging buffer.
struct PendingPeriodogram {
  ElementType dtype = ElementType::kFloat64;
  std::vector<int64_t> out_offsets;  // per series, in elements of power; -1: not copied back
  size_t peaks_offset = 0;           // bytes; one LsPeak per series
  // The top-k peaks found on the device (of discarded power), from top_peaks_offset (bytes):
  // per series its first LsPeak entry (-1: none) and its k.
  size_t top_peaks_offset = 0;
  std::vector<int64_t> top_peaks;
  std::vector<int> top_peaks_k;
};

// Benchmark and diagnostic knobs: events recorded on the stream just before the first compute
// launch (after the copy in) and after the peak reduction (before the copy out), and the
// plan's switches (the NVRTC kernel's shape, the product form).
struct EnqueueOptions {
  cudaEvent_t before = nullptr;
  cudaEvent_t after = nullptr;
  PlanOptions plan;
};

// Enqueues `batch` on `slot`'s stream. Returns once everything is enqueued; the results are
// valid in slot.staging_out once the stream reaches the point after this call.
absl::StatusOr<PendingPeriodogram> EnqueuePeriodogram(DeviceContext& device, StreamSlot& slot,
                                                      const Batch& batch,
                                                      const EnqueueOptions* options = nullptr);

// Copies the results out of the slot's staging buffer (host work only; no CUDA call).
std::vector<SeriesPower> UnpackPeriodogram(const PendingPeriodogram& pending,
                                           const StreamSlot& slot, const Batch& batch);

}  // namespace gpucompute::periodogram
