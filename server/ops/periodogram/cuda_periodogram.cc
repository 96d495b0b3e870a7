// CUDA periodogram host code (see cuda_periodogram.h).
#include "server/ops/periodogram/cuda_periodogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/embedded_sources.h"
#include "kernels/lombscargle_abi.cuh"
#include "kernels/peak_reduce.cuh"
#include "server/common/nvtx.h"
#include "server/common/parallel_for.h"
#include "server/common/status_macros.h"
#include "server/runtime/cuda/cuda_resources.h"

namespace gpucompute::periodogram {
namespace {

using gpucompute_kernels::LsBlockWork;
using gpucompute_kernels::LsSeriesDesc;
using gpucompute_kernels::LsPeak;

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the sections of the input buffer (the same on host and device).
struct InputLayout {
  size_t desc = 0, work = 0, seg = 0, t = 0, w = 0, wy = 0, freqs = 0, total = 0;
};

InputLayout MakeInputLayout(size_t series, size_t blocks, size_t samples, size_t freqs, int elem) {
  InputLayout l;
  size_t at = 0;
  l.desc = at;  at = AlignUp(at + series * sizeof(LsSeriesDesc));
  l.work = at;  at = AlignUp(at + blocks * sizeof(LsBlockWork));
  l.seg = at;   at = AlignUp(at + (series + 1) * sizeof(long long));
  l.t = at;     at = AlignUp(at + samples * sizeof(double));
  l.w = at;     at = AlignUp(at + samples * elem);
  l.wy = at;    at = AlignUp(at + samples * elem);
  l.freqs = at; at = AlignUp(at + freqs * sizeof(double));
  l.total = at;
  return l;
}

// Picks the shape for a batch: many frequencies per thread when the batch fills the GPU,
// fewer when it would leave multiprocessors idle.
CudaKernelShape ChooseShape(ComputeType dtype, const std::vector<const SeriesSpec*>& series,
                            int multiprocessors) {
  const std::vector<CudaKernelShape> shapes = DefaultKernelShapes(dtype);
  for (const CudaKernelShape& s : shapes) {
    int64_t blocks = 0;
    for (const SeriesSpec* x : series) blocks += (x->grid.size() + s.block * s.k - 1) / (s.block * s.k);
    if (blocks >= 2 * multiprocessors) return s;
  }
  return shapes.back();
}

}  // namespace

std::vector<CudaKernelShape> DefaultKernelShapes(ComputeType dtype) {
  // Largest work per thread first (fewest sin/cos per pair), then smaller for small batches
  // that would otherwise leave multiprocessors idle. Chosen by tests/bench (see NOTES.md).
  if (dtype == ComputeType::kFloat32) {
    return {CudaKernelShape{128, 16, 256, 4}, CudaKernelShape{128, 2, 256, 0}};
  }
  return {CudaKernelShape{128, 16, 256, 0}, CudaKernelShape{128, 2, 256, 0}};
}

KernelSpec LombScargleKernelSpec(ComputeType dtype, const CudaKernelShape& shape) {
  KernelSpec spec;
  spec.label = absl::StrCat("lombscargle<", ComputeTypeName(dtype), ",b", shape.block, ",k",
                            shape.k, ",tile", shape.tile, ",minb", shape.min_blocks, ">");
  spec.program_name = "lombscargle_rtc.cu";
  spec.source = std::string(EmbeddedKernelSource("lombscargle_rtc.cu"));
  for (const char* h : {"lombscargle_abi.cuh", "lombscargle_math.cuh"}) {
    spec.headers.emplace_back(h, std::string(EmbeddedKernelSource(h)));
  }
  spec.options = {absl::StrCat("-DLS_T=", dtype == ComputeType::kFloat32 ? "float" : "double"),
                  absl::StrCat("-DLS_BLOCK=", shape.block), absl::StrCat("-DLS_K=", shape.k),
                  absl::StrCat("-DLS_TILE=", shape.tile),
                  absl::StrCat("-DLS_MIN_BLOCKS=", shape.min_blocks)};
  spec.kernel_name = "lombscargle";
  return spec;
}

absl::StatusOr<cudaKernel_t> PeriodogramKernel(DeviceContext& device, ComputeType dtype,
                                               const CudaKernelShape& shape) {
  // The tag names every parameter of the spec (the sources are embedded in the binary), so
  // the cache can skip building and hashing the spec after the first lookup.
  const std::string tag = absl::StrCat("lombscargle/", ComputeTypeName(dtype), "/", shape.block,
                                       "/", shape.k, "/", shape.tile, "/", shape.min_blocks);
  return device.kernels().GetTagged(tag, [&] { return LombScargleKernelSpec(dtype, shape); });
}

absl::Status WarmUpPeriodogram(DeviceContext& device) {
  // Every slot at once, so that each stream and its staging buffers get their first use here.
  std::vector<StreamSlot*> slots;
  for (int i = 0; i < device.num_streams(); ++i) slots.push_back(device.AcquireSlot());
  absl::Status status;
  for (ComputeType dtype : {ComputeType::kFloat32, ComputeType::kFloat64}) {
    auto request = std::make_shared<Request>();
    request->dtype = dtype;
    SeriesSpec s;
    s.t = {0.0, 0.3, 1.1, 1.7};
    s.y = {1.0, -0.5, 0.25, 2.0};
    s.grid.uniform = UniformGrid{0.1, 0.1, 16};
    request->series.push_back(std::move(s));
    Batch batch;
    batch.dtype = dtype;
    batch.requests.push_back(request);
    for (const CudaKernelShape& shape : DefaultKernelShapes(dtype)) {
      EnqueueOptions options;
      options.shape = &shape;
      for (StreamSlot* slot : slots) {
        if (status.ok()) status = EnqueuePeriodogram(device, *slot, batch, &options).status();
      }
      // The next round reuses the slots' staging buffers: wait for this one.
      for (StreamSlot* slot : slots) {
        const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
        if (err != cudaSuccess && status.ok()) {
          status = CudaErrorStatus(err, "periodogram warm-up", __FILE__, __LINE__);
        }
      }
    }
  }
  for (StreamSlot* slot : slots) device.ReleaseSlot(slot);
  return status;
}

absl::StatusOr<PendingPeriodogram> EnqueuePeriodogram(DeviceContext& device, StreamSlot& slot,
                                                      const Batch& batch,
                                                      const EnqueueOptions* options) {
  RETURN_IF_ERROR(device.MakeCurrent());
  const cudaStream_t stream = slot.stream.get();
  const int elem = ElementSize(batch.dtype);
  const std::vector<const SeriesSpec*> series = batch.all_series();
  const CudaKernelShape shape = options && options->shape
                                     ? *options->shape
                                     : ChooseShape(batch.dtype, series, device.description().multiprocessors);
  ASSIGN_OR_RETURN(cudaKernel_t kernel, PeriodogramKernel(device, batch.dtype, shape));

  PendingPeriodogram pending;
  pending.dtype = batch.dtype;
  InputLayout layout;
  int64_t total_freqs = 0, n_blocks = 0;
  {
    NVTX_RANGE("periodogram.pack");
    int64_t samples = 0, explicit_freqs = 0;
    const int64_t per_block = static_cast<int64_t>(shape.block) * shape.k;
    for (const SeriesSpec* s : series) {
      samples += static_cast<int64_t>(s->t.size());
      if (!s->grid.uniform) explicit_freqs += s->grid.size();
      n_blocks += (s->grid.size() + per_block - 1) / per_block;
    }
    layout = MakeInputLayout(series.size(), n_blocks, samples, explicit_freqs, elem);
    RETURN_IF_ERROR(slot.staging_in.Reserve(layout.total));
    char* base = static_cast<char*>(slot.staging_in.data());
    auto* desc = reinterpret_cast<LsSeriesDesc*>(base + layout.desc);
    auto* work = reinterpret_cast<LsBlockWork*>(base + layout.work);
    auto* seg = reinterpret_cast<long long*>(base + layout.seg);
    auto* t = reinterpret_cast<double*>(base + layout.t);
    auto* freqs = reinterpret_cast<double*>(base + layout.freqs);
    // Offsets first (cheap, serial), then the per-sample work on several threads when the
    // batch is large: each series writes only its own ranges.
    int64_t sample_at = 0, freq_at = 0, block_at = 0;
    for (size_t i = 0; i < series.size(); ++i) {
      const SeriesSpec& s = *series[i];
      LsSeriesDesc& d = desc[i];
      d = LsSeriesDesc{};
      d.sample_offset = sample_at;
      d.out_offset = total_freqs;
      d.n_freq = s.grid.size();
      d.n_samples = static_cast<int>(s.t.size());
      d.explicit_offset = s.grid.uniform ? -1 : freq_at;
      seg[i] = block_at;  // the series' first block (the peak reduction reads these ranges)
      pending.out_offsets.push_back(total_freqs);
      sample_at += d.n_samples;
      if (!s.grid.uniform) freq_at += d.n_freq;
      block_at += (d.n_freq + per_block - 1) / per_block;
      total_freqs += d.n_freq;
    }
    seg[series.size()] = block_at;
    ParallelFor(static_cast<int64_t>(series.size()), samples, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const SeriesSpec& s = *series[i];
        const SeriesMoments m = ComputeMoments(s);
        LsSeriesDesc& d = desc[i];
        d.fit_mean = s.fit_mean ? 1 : 0;
        d.normalization = static_cast<int>(s.normalization);
        d.yy = m.yy;
        d.psd_scale = 0.5 * m.inv_var_sum;
        d.t_absmax = m.t_absmax;
        if (s.grid.uniform) {
          d.f0 = s.grid.uniform->f0;
          d.df = s.grid.uniform->df;
        } else {
          std::memcpy(freqs + d.explicit_offset, s.grid.explicit_frequencies.data(),
                      s.grid.explicit_frequencies.size() * sizeof(double));
        }
        const int64_t at = d.sample_offset;
        if (batch.dtype == ComputeType::kFloat32) {
          WritePrepared(s, m, t + at, reinterpret_cast<float*>(base + layout.w) + at,
                        reinterpret_cast<float*>(base + layout.wy) + at);
        } else {
          WritePrepared(s, m, t + at, reinterpret_cast<double*>(base + layout.w) + at,
                        reinterpret_cast<double*>(base + layout.wy) + at);
        }
        const int64_t chunks = (d.n_freq + per_block - 1) / per_block;
        for (int64_t c = 0; c < chunks; ++c) {
          work[seg[i] + c] = LsBlockWork{static_cast<int>(i), static_cast<int>(c)};
        }
      }
    });
  }

  const size_t power_bytes = AlignUp(static_cast<size_t>(total_freqs) * elem);
  pending.peaks_offset = power_bytes;
  // Output: power, then one peak per series, then one partial peak per block.
  const size_t peaks_bytes = AlignUp(series.size() * sizeof(LsPeak));
  const size_t out_bytes = power_bytes + peaks_bytes;  // copied back
  const size_t device_out_bytes = out_bytes + static_cast<size_t>(n_blocks) * sizeof(LsPeak);
  RETURN_IF_ERROR(slot.staging_out.Reserve(out_bytes));

  // Stream-ordered buffers, freed on the stream on every path (an early error return too: the
  // pool keeps what it is given back, so a leak here would be for the life of the process).
  void* d_in = nullptr;
  void* d_out = nullptr;
  struct FreeOnStream {
    void** ptrs[2];
    cudaStream_t stream;
    ~FreeOnStream() {
      for (void** p : ptrs) {
        if (*p != nullptr) cudaFreeAsync(*p, stream);
      }
    }
  } release{{&d_in, &d_out}, stream};
  CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&d_in, layout.total, device.memory_pool(), stream));
  CUDA_RETURN_IF_ERROR(
      cudaMallocFromPoolAsync(&d_out, device_out_bytes, device.memory_pool(), stream));
  {
    NVTX_RANGE("periodogram.copy_in");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_in, slot.staging_in.data(), layout.total,
                                         cudaMemcpyHostToDevice, stream));
  }
  {
    NVTX_RANGE("periodogram.kernel");
    char* in = static_cast<char*>(d_in);
    const void* a_desc = in + layout.desc;
    const void* a_work = in + layout.work;
    const void* a_t = in + layout.t;
    const void* a_w = in + layout.w;
    const void* a_wy = in + layout.wy;
    const void* a_freqs = in + layout.freqs;
    void* a_power = d_out;
    void* a_block_peaks = static_cast<char*>(d_out) + out_bytes;
    void* args[] = {&a_desc, &a_work, &a_t, &a_w, &a_wy, &a_freqs, &a_power, &a_block_peaks};
    if (options && options->before) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->before, stream));
    if (n_blocks > 0) {
      CUDA_RETURN_IF_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(kernel),
                                            dim3(static_cast<unsigned>(n_blocks)), dim3(shape.block),
                                            args, 0, stream));
      CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    }
    if (options && options->after) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->after, stream));
    auto* seg = reinterpret_cast<const long long*>(in + layout.seg);
    auto* peaks = reinterpret_cast<LsPeak*>(static_cast<char*>(d_out) + power_bytes);
    CUDA_RETURN_IF_ERROR(kernels::LaunchReducePeaks(static_cast<const LsPeak*>(a_block_peaks), seg,
                                                    static_cast<int>(series.size()), peaks, stream));
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  }
  {
    NVTX_RANGE("periodogram.copy_out");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.staging_out.data(), d_out, out_bytes,
                                         cudaMemcpyDeviceToHost, stream));
  }
  return pending;  // `release` frees d_in and d_out after the copy out, in stream order
}

std::vector<SeriesPower> UnpackPeriodogram(const PendingPeriodogram& pending,
                                           const StreamSlot& slot, const Batch& batch) {
  NVTX_RANGE("periodogram.unpack");
  const int elem = ElementSize(pending.dtype);
  const char* base = static_cast<const char*>(slot.staging_out.data());
  const auto* peaks = reinterpret_cast<const LsPeak*>(base + pending.peaks_offset);
  const std::vector<const SeriesSpec*> series = batch.all_series();
  std::vector<SeriesPower> out(series.size());
  const int64_t total = pending.out_offsets.empty()
                            ? 0
                            : pending.out_offsets.back() + series.back()->grid.size();
  // Copying power out of pinned memory (and faulting in the strings) dominates for big
  // batches: several threads when there is a lot of it.
  ParallelFor(static_cast<int64_t>(series.size()), total, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const SeriesSpec& s = *series[i];
      SeriesPower& p = out[i];
      const int64_t n = s.grid.size();
      p.power.assign(base + pending.out_offsets[i] * elem, static_cast<size_t>(n) * elem);
      const LsPeak& peak = peaks[i];
      p.peak_index = peak.index < 0 ? 0 : peak.index;
      p.peak_frequency = s.grid.frequency(p.peak_index);
      p.peak_power = peak.index < 0 ? std::nan("") : peak.value;
    }
  }, /*min_cost_per_thread=*/int64_t{1} << 21);
  return out;
}

}  // namespace gpucompute::periodogram
